import type Redis from "ioredis";
import type { Route } from "@playwright/test";
import type { LockHold } from "@/lib/history/types";
import { expect, lockNodeClients, test } from "./fixtures";
import { holdLock, unique } from "./scene";

/**
 * The history views with a history database's answers. The e2e console keeps no history database: its history
 * routes' answers are given here, as the API documents them (docs/api.md, "Lock history").
 */
test.describe("lock history in the browser", () => {
  let nodes: Redis[] = [];
  test.beforeEach(async ({ request }) => {
    nodes = await lockNodeClients(request);
  });
  test.afterEach(() => {
    for (const n of nodes) n.disconnect();
  });

  test("who held what, when: every hold at that instant, page after page, not only the first hundred", async ({ page, signIn }) => {
    await signIn("viewer");
    const at = Date.parse("2026-03-01T03:12:00Z");
    const hold = (i: number): LockHold => ({
      id: `${at - 1_000 - i}-${1_000 - i}`,
      resource: `lock:orders/${i}`,
      deployment: "default",
      token: `token-${i}`,
      holder: `worker-${i} @ web-1:42`,
      fence: null,
      acquiredAt: at - 1_000 - i,
      endedAt: null,
      endType: null,
    });
    const asked: string[] = [];
    await page.route("**/api/history?*", async (route: Route) => {
      const query = new URL(route.request().url()).searchParams;
      const common = { recording: true, deployments: ["default"] };
      if (!query.has("at")) return route.fulfill({ json: { events: [], next: null, ...common } });
      asked.push(query.get("before") ?? "first");
      const limit = Number(query.get("limit"));
      // 130 holds at that instant, newest acquisition first, `limit` at a time.
      const all = Array.from({ length: 130 }, (_, i) => hold(i));
      const from = query.has("before") ? all.findIndex((h) => h.id === query.get("before")) + 1 : 0;
      const holds = all.slice(from, from + limit);
      const next = from + limit < all.length ? (holds.at(-1)?.id ?? null) : null;
      return route.fulfill({ json: { at: Number(new Date(query.get("at") ?? "").getTime()), holds, next, ...common } });
    });
    await page.goto("/audit");
    const form = page.getByRole("form", { name: "Who held it at a given time" });
    await form.getByLabel("At").fill("2026-03-01T03:12:00");
    await form.getByRole("button", { name: "Who held it" }).click();
    const table = page.getByRole("table", { name: /^Holds at / });
    await expect(table.getByRole("row").filter({ hasText: "lock:orders/" })).toHaveCount(100);
    await page.getByRole("button", { name: "Show more holds" }).click();
    await expect(table.getByRole("row").filter({ hasText: "lock:orders/" })).toHaveCount(130);
    await expect(table.getByRole("row").filter({ hasText: "lock:orders/129" })).toContainText("worker-129 @ web-1:42");
    await expect(page.getByRole("button", { name: "Show more holds" })).toHaveCount(0);
    expect(asked).toEqual(["first", hold(99).id]);
  });

  test("Show more holds, pressed from the keyboard, keeps focus while it loads, then moves it to the first hold added and says how many", async ({ page, signIn }) => {
    await signIn("viewer");
    const at = Date.parse("2026-03-01T03:12:00Z");
    const hold = (i: number): LockHold => ({
      id: `${at - 1_000 - i}-${1_000 - i}`,
      resource: `lock:orders/${i}`,
      deployment: "default",
      token: `token-${i}`,
      holder: `worker-${i} @ web-1:42`,
      fence: null,
      acquiredAt: at - 1_000 - i,
      endedAt: null,
      endType: null,
    });
    // 230 holds at that instant, 100 at a time; each further page is held back until the test lets it through.
    const all = Array.from({ length: 230 }, (_, i) => hold(i));
    const gates: Array<() => void> = [];
    await page.route("**/api/history?*", async (route: Route) => {
      const query = new URL(route.request().url()).searchParams;
      const common = { recording: true, deployments: ["default"] };
      if (!query.has("at")) return route.fulfill({ json: { events: [], next: null, ...common } });
      if (query.has("before")) await new Promise<void>((resolve) => gates.push(resolve));
      const limit = Number(query.get("limit"));
      const from = query.has("before") ? all.findIndex((h) => h.id === query.get("before")) + 1 : 0;
      const holds = all.slice(from, from + limit);
      const next = from + limit < all.length ? (holds.at(-1)?.id ?? null) : null;
      return route.fulfill({ json: { at: Number(new Date(query.get("at") ?? "").getTime()), holds, next, ...common } });
    });
    await page.goto("/audit");
    const form = page.getByRole("form", { name: "Who held it at a given time" });
    await form.getByLabel("At").fill("2026-03-01T03:12:00");
    await form.getByRole("button", { name: "Who held it" }).click();
    const rows = page.getByRole("table", { name: /^Holds at / }).getByRole("row").filter({ hasText: "lock:orders/" });
    await expect(rows).toHaveCount(100);
    const said = page.getByRole("status").filter({ hasText: /holds? (added|shown)|Every hold/ });
    const more = page.getByRole("button", { name: /^(Show|Loading) more holds/ });
    const row = (i: number) => rows.filter({ has: page.getByRole("cell", { name: `lock:orders/${i}`, exact: true }) });

    await more.focus();
    await page.keyboard.press("Enter");
    await expect(more).toHaveAttribute("aria-disabled", "true");
    await expect(more).toBeFocused();
    gates.shift()?.();
    await expect(rows).toHaveCount(200);
    await expect(row(100)).toBeFocused();
    await expect(said).toHaveText("100 more holds shown.");

    // Back on the button, with Space this time: the last page.
    await more.focus();
    await page.keyboard.press(" ");
    await expect(more).toBeFocused();
    await expect.poll(() => gates.length).toBe(1);
    gates.shift()?.();
    await expect(rows).toHaveCount(230);
    await expect(row(200)).toBeFocused();
    await expect(said).toHaveText("30 more holds shown. Every hold at that time is shown.");
    await expect(more).toHaveCount(0);
  });

  test("Load older events, pressed from the keyboard, keeps focus while it loads, then moves it to the first older event and says how many", async ({ page, signIn }) => {
    await signIn("viewer");
    const resource = unique("history-older");
    await holdLock(nodes, resource, "billing-worker", "17");
    const at = Date.parse("2026-03-01T03:12:00Z");
    // 60 recorded events, newest first, 50 at a time; the older page is held back until the test lets it through.
    const all = Array.from({ length: 60 }, (_, i) => ({
      id: `${at - i * 1_000}-${1_000 - i}`,
      at: at - i * 1_000,
      resource,
      deployment: "default",
      type: i % 2 === 0 ? "released" : "acquired",
      node: null,
      token: `token-${i}`,
      holder: `worker-${i} @ web-1:42`,
      fence: String(1_000 - i),
      detail: null,
    }));
    let letThrough: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (letThrough = resolve));
    await page.route(`**/api/locks/${encodeURIComponent(resource)}/history?*`, async (route: Route) => {
      const query = new URL(route.request().url()).searchParams;
      const common = { recording: true, deployments: ["default"] };
      if (query.has("at")) return route.fulfill({ json: { at: 0, holds: [], next: null, ...common } });
      if (query.has("before")) await held;
      const limit = Number(query.get("limit"));
      const from = query.has("before") ? all.findIndex((e) => e.id === query.get("before")) + 1 : 0;
      const events = all.slice(from, from + limit);
      const next = from + limit < all.length ? (events.at(-1)?.id ?? null) : null;
      return route.fulfill({ json: { events, next, ...common } });
    });
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    const history = page.getByRole("region", { name: "Recorded history" });
    const rows = history.getByRole("table", { name: "Recorded history" }).getByRole("row").filter({ hasText: "worker-" });
    await expect(rows).toHaveCount(50);
    const more = history.getByRole("button", { name: /^Load(ing)? older events/ });
    await expect(more).toHaveText("Load older events");

    await more.focus();
    await page.keyboard.press("Enter");
    await expect(more).toHaveAttribute("aria-disabled", "true");
    await expect(more).toBeFocused();
    letThrough();
    await expect(rows).toHaveCount(60);
    await expect(rows.filter({ hasText: "worker-50 @" })).toBeFocused();
    await expect(history.getByRole("status").filter({ hasText: /older event/ })).toHaveText("10 older events loaded. No older events are left.");
    await expect(more).toHaveCount(0);
  });

  test("a lock's recorded history says it could not be read, not that nothing was recorded, while the database does not answer", async ({ page, signIn }) => {
    await signIn("viewer");
    const resource = unique("history-down");
    await holdLock(nodes, resource, "billing-worker", "17");
    const message = "Lock history cannot be read: the database (postgres://lockscope:****@db:5432/lockscope) did not answer.";
    await page.route(`**/api/locks/${encodeURIComponent(resource)}/history?*`, (route) => route.fulfill({ status: 503, json: { error: { code: "unavailable", message } } }));
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    const history = page.getByRole("region", { name: "Recorded history" });
    await expect(history.getByRole("alert")).toHaveText(message);
    await expect(history).not.toContainText("Nothing recorded yet.");
  });
});
