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
