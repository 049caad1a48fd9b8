import AxeBuilder from "@axe-core/playwright";
import type { Locator, Page } from "@playwright/test";
import type Redis from "ioredis";
import { encodeLockValue } from "@lockscope/redlock";
import { E2E_OPERATOR_TOKEN, expect, lockNodeClients, test } from "./fixtures";
import { deleteMatching, holdLock, pauseNode, THEMES, unique, useSystemTheme } from "./scene";

/** Presses Tab until `target` has the focus (at most `max` times), as a keyboard user would. */
async function tabTo(page: Page, target: Locator, max = 40): Promise<void> {
  for (let i = 0; i < max; i++) {
    if (await target.evaluate((el) => el === document.activeElement)) return;
    await page.keyboard.press("Tab");
  }
  await expect(target).toBeFocused();
}

test.describe("force release from the browser", () => {
  let nodes: Redis[] = [];
  test.beforeEach(async ({ request }) => {
    nodes = await lockNodeClients(request);
  });
  test.afterEach(() => {
    for (const n of nodes) n.disconnect();
  });

  test("an operator releases a live lock through the dialog, and the audit page shows who, why and each node", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("stuck");
    await holdLock(nodes, resource, "billing-worker", "17");

    await page.goto("/");
    const row = page.getByRole("row", { name: resource });
    await expect(row).toContainText("billing-worker");
    // Not on the row: the table links to the lock's page, where the release is.
    await expect(page.getByRole("table", { name: "Locks" }).getByRole("button", { name: /release/i })).toHaveCount(0);
    await row.getByRole("link", { name: resource }).click();
    await page.getByRole("button", { name: "Force release" }).click();

    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await expect(dialog).toBeVisible();
    await expect(dialog).toContainText("billing-worker (e2e-host, pid 4242)");
    await expect(dialog).toContainText("17");
    await expect(dialog.getByRole("list", { name: "Nodes" }).getByRole("listitem")).toHaveCount(3);
    const release = dialog.getByRole("button", { name: "Release" });
    await expect(release).toBeDisabled();
    await dialog.getByLabel("Reason").fill("worker hung after deploy 4711");
    await release.click();
    await expect(dialog.getByRole("status")).toContainText("Released on 3 of 3 nodes");
    await dialog.getByRole("button", { name: "Close" }).click();
    await expect(dialog).toBeHidden();

    // The lock's page shows it ended, and offers no second release.
    await expect(page.locator(".detail-grid").getByText("force-released", { exact: true })).toBeVisible();
    await expect(page.getByRole("button", { name: "Force release" })).toHaveCount(0);
    for (const n of nodes) expect(await n.get(resource)).toBeNull();

    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Audit" }).click();
    await expect(page.getByRole("heading", { level: 1, name: "Audit log" })).toBeVisible();
    const entry = page.getByRole("table", { name: "Audit entries" }).getByRole("row").filter({ hasText: resource });
    await expect(entry).toHaveCount(1);
    await expect(entry).toContainText("e2e-operator");
    await expect(entry).toContainText("worker hung after deploy 4711");
    await expect(entry).toContainText("billing-worker");
    await expect(entry).toContainText("released");
    for (const id of ["node-0", "node-1", "node-2"]) await expect(entry).toContainText(`${id}: deleted`);

    // This console keeps no lock history (no history database): "who held what, when" says so in one line, naming
    // the setting, instead of a form whose every answer would be empty.
    const heldAt = page.getByRole("region", { name: "Who held what, when" });
    await expect(heldAt).toContainText("Lock history is not recorded on this console: set AUDIT_DATABASE_URL");
    await expect(page.getByRole("form", { name: "Who held it at a given time" })).toHaveCount(0);

    await page.getByRole("searchbox", { name: "Actor" }).fill("nobody-by-this-name");
    await page.getByRole("button", { name: "Apply filters" }).click();
    await expect(page.getByText("No force releases or pattern changes recorded that match these filters.", { exact: true })).toBeVisible();
    await page.getByRole("button", { name: "Clear" }).click();
    await expect(entry).toHaveCount(1);

    const download = page.waitForEvent("download");
    await page.getByRole("link", { name: "Export CSV" }).click();
    const csv = await (await download).path();
    const { readFileSync } = await import("node:fs");
    expect(readFileSync(csv, "utf8")).toContain("worker hung after deploy 4711");
  });

  test("a lock whose key holds a percent sign and two hex digits is titled, shown and released as itself, not as the key it would decode to", async ({ page, signIn }) => {
    await signIn("operator");
    // A key made from an already URL-encoded name (`user%40example.com`), beside the key that name decodes to.
    const base = unique("pct");
    const resource = `${base}:user%40example.com`;
    const decoded = `${base}:user@example.com`;
    await holdLock(nodes, resource, "encoded-name-worker", "3");
    const other = await holdLock(nodes, decoded, "decoded-name-worker", "9");

    await page.goto("/");
    await page.getByRole("row", { name: resource }).getByRole("link", { name: resource }).click();
    await expect(page).toHaveTitle(`${resource} · Lockscope`);
    await expect(page.getByRole("heading", { level: 1, name: resource })).toBeVisible();
    await expect(page.locator(".detail-grid")).toContainText("encoded-name-worker");
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await expect(dialog).toContainText("encoded-name-worker");
    await dialog.getByLabel("Reason").fill("holder of the encoded name hung");
    await dialog.getByRole("button", { name: "Release" }).click();
    await expect(dialog.getByRole("status")).toContainText("Released on 3 of 3 nodes");
    for (const n of nodes) {
      expect(await n.get(resource)).toBeNull();
      expect(await n.get(decoded)).toBe(other);
    }
    // Opened by its address too (the page rendered on the server, not reached from the table).
    await page.goto(`/locks/${encodeURIComponent(decoded)}`);
    await expect(page).toHaveTitle(`${decoded} · Lockscope`);
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page).toHaveTitle(`${resource} · Lockscope`);
    await expect(page.getByRole("heading", { level: 1, name: resource })).toBeVisible();
  });

  test("when the lock changed hands while the dialog was open, it says so, shows the new holder and deletes nothing", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("handover");
    await holdLock(nodes, resource, "old-holder", "5");
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.locator(".detail-grid")).toContainText("old-holder");
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await dialog.getByLabel("Reason").fill("looks stuck");

    await expect(dialog.getByRole("button", { name: "Release" })).toBeEnabled();
    await expect(dialog).toContainText("Fence5");

    const newValue = await holdLock(nodes, resource, "new-holder", "6");
    // Said as soon as the live view shows it, not only after a click on Release: the dialog never shows the old
    // holder with the new one's fence and TTL as if it were still the lock to release.
    const alert = dialog.getByRole("alert");
    await expect(alert).toContainText("The lock changed hands");
    await expect(alert).toContainText("new-holder (e2e-host, pid 4242), fence 6");
    await expect(dialog.getByRole("button", { name: "Release" })).toHaveCount(0);
    await expect(dialog.getByRole("button", { name: "Close" })).toBeFocused();
    await expect(dialog.getByRole("button", { name: "Close" })).toHaveAccessibleDescription(/^The lock changed hands since you opened this dialog/);
    for (const n of nodes) expect(await n.get(resource)).toBe(newValue);
    await dialog.getByRole("button", { name: "Close" }).click();
  });

  test("a lock that ended while the dialog was open stays shown as ended, also once it has left the live list", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("ended-open");
    // Marks when the tab has applied the live list without this lock: the stream's removal, then (timers run in
    // deadline order) the list's next update and its render, well before this mark's own timer.
    await page.addInitScript((watched) => {
      const Native = window.EventSource;
      window.EventSource = class extends Native {
        constructor(url: string | URL, init?: EventSourceInit) {
          super(url, init);
          this.addEventListener("lock-removed", (e) => {
            const removal = JSON.parse((e as MessageEvent<string>).data) as { resource: string };
            if (removal.resource === watched) setTimeout(() => document.body.setAttribute("data-removal-applied", "yes"), 1_000);
          });
        }
      };
    }, resource);
    await holdLock(nodes, resource, "report-job", "12");
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.locator(".detail-grid")).toContainText("report-job");
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    const listed = dialog.getByRole("list", { name: "Nodes" }).getByRole("listitem");
    await expect(listed).toHaveCount(3);
    await expect(listed.first()).toContainText("holds it");

    await deleteMatching(nodes, resource);
    await expect(dialog).toContainText("none: released");
    await expect(page.locator("body")).toHaveAttribute("data-removal-applied", "yes", { timeout: 30_000 });
    // Not the lock as it was opened, held with its TTL running down on every node.
    await expect(dialog).toContainText("none: released");
    for (const item of await listed.all()) await expect(item).toContainText("holds nothing");
    await dialog.getByRole("button", { name: "Close" }).click();
  });

  test("an ended lock's dialog says how it ended and offers no release", async ({ page, signIn }) => {
    await signIn("operator");
    for (const [how, end, said] of [
      ["released", (resource: string) => deleteMatching(nodes, resource), "This lock has ended: it was released (its key was deleted)"],
      ["expired", () => Promise.resolve(), "This lock has ended: it expired (its TTL ran out)"],
    ] as const) {
      const resource = unique(`ended-${how}`);
      await holdLock(nodes, resource, "report-job", "12", how === "expired" ? 8_000 : 120_000);
      await page.goto(`/locks/${encodeURIComponent(resource)}`);
      await expect(page.locator(".detail-grid")).toContainText("report-job");
      await page.getByRole("button", { name: "Force release" }).click();
      const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
      await dialog.getByLabel("Reason").fill("looks stuck");
      await expect(dialog.getByRole("button", { name: "Release" })).toBeEnabled();

      await end(resource);
      await expect(dialog.getByRole("status")).toContainText(said, { timeout: 20_000 });
      await expect(dialog.getByRole("status")).toContainText("there is nothing to release");
      await expect(dialog.getByRole("button", { name: "Release" })).toHaveCount(0);
      await dialog.getByRole("button", { name: "Close" }).click();
      await expect(dialog).toBeHidden();
    }
  });

  test("a release sent after the session ended says so in plain words, releases nothing, and the header offers Sign in", async ({ page, signIn, baseURL }) => {
    await signIn("operator");
    const resource = unique("session-ended");
    const value = await holdLock(nodes, resource, "night-batch", "8");
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await dialog.getByLabel("Reason").fill("stuck since midnight");
    // The session ends while the dialog is open (it expired, or the operator signed out in another tab).
    expect((await page.request.delete("/api/session", { headers: { Origin: new URL(baseURL ?? "http://127.0.0.1").origin } })).status()).toBe(204);
    await dialog.getByRole("button", { name: "Release" }).click();
    await expect(dialog.getByRole("alert")).toHaveText("Your session has ended, so nothing was released. Sign in again, then release the lock.");
    await expect(page.getByRole("banner").getByRole("link", { name: "Sign in" })).toBeVisible();
    for (const n of nodes) expect(await n.get(resource)).toBe(value);
    await deleteMatching(nodes, resource);
  });

  test("a node that does not answer is shown in the dialog as unknown, as on the lock's page, not as holding nothing", async ({ page, request, signIn }) => {
    await signIn("operator");
    const resource = unique("node-down");
    await holdLock(nodes, resource, "ledger-writer", "31");
    const paused = await pauseNode(request, 2);
    try {
      await page.goto(`/locks/${encodeURIComponent(resource)}`);
      const row = page.getByRole("table", { name: "Nodes holding this lock" }).getByRole("row", { name: "node-2" });
      await expect(row).toContainText("down or not answering", { timeout: 30_000 });
      await expect(row).toContainText("unknown");
      await page.getByRole("button", { name: "Force release" }).click();
      const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
      const listed = dialog.getByRole("list", { name: "Nodes" }).getByRole("listitem");
      await expect(listed.filter({ hasText: "node-2" })).toHaveText("node-2: down or not answering: unknown");
      await expect(listed.filter({ hasText: "node-0" })).toContainText("node-0: holds it");
      await expect(dialog).not.toContainText("holds nothing");
      await dialog.getByRole("button", { name: "Cancel" }).click();
    } finally {
      await paused.resume();
    }
    await deleteMatching(nodes, resource);
  });

  test("a node that holds nothing is marked in the dialog as holding nothing, not with the cross of a node that is down", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("two-of-three");
    await holdLock(nodes.slice(0, 2), resource, "ledger-writer", "17");
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.locator(".detail-grid")).toContainText("ledger-writer");
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    const empty = dialog.getByRole("list", { name: "Nodes" }).getByRole("listitem").filter({ hasText: "node-2" });
    await expect(empty).toContainText("node-2: holds nothing");
    // The mark beside it, as drawn: the page's mark for a node holding nothing (an empty ring), not the red cross the
    // dialog, the node pills and the Nodes panel draw for a node that is down.
    const mark = await empty.locator(".dot").evaluate((el) => {
      const style = getComputedStyle(el);
      return { clipPath: style.clipPath, background: style.backgroundColor, border: style.borderTopStyle };
    });
    expect(mark.clipPath).toBe("none");
    expect(mark.background).toBe("rgba(0, 0, 0, 0)");
    expect(mark.border).toBe("solid");
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await deleteMatching(nodes, resource);
  });

  test("Escape while the release is under way does not hide its outcome: the release cannot be taken back", async ({ page, request, signIn }) => {
    await signIn("operator");
    const resource = unique("escape-sending");
    await holdLock(nodes, resource, "slow-release", "14");
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.locator(".detail-grid")).toContainText("slow-release");
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await dialog.getByLabel("Reason").fill("stuck; node-2 is slow");
    // A node that does not answer holds the release up for seconds (its answer is waited for, then it is read again).
    const paused = await pauseNode(request, 2);
    try {
      await dialog.getByRole("button", { name: "Release" }).click();
      await expect(dialog.getByRole("button", { name: "Releasing…" })).toBeVisible();
      await expect(dialog.getByRole("button", { name: "Cancel" })).toBeDisabled();
      await page.keyboard.press("Escape");
      await expect(dialog.getByRole("status")).toContainText("Released on 2 of 3 nodes", { timeout: 30_000 });
      await expect(dialog).toBeVisible();
    } finally {
      await paused.resume();
    }
    await dialog.getByRole("button", { name: "Close" }).click();
    await deleteMatching(nodes, resource);
  });

  test("a node that answered the release but was left untouched is named with why, not said not to have answered", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("other-type");
    const value = "batch-7f3a";
    await nodes[0]!.set(resource, value, "PX", 120_000);
    await nodes[1]!.set(resource, value, "PX", 120_000);
    // node-2 has a key of that name of another type (some other program's), which the release must not touch.
    await nodes[2]!.hset(resource, "owner", "someone-else");
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.locator(".detail-grid").getByText("held", { exact: true })).toBeVisible();
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await dialog.getByLabel("Reason").fill("batch died");
    await dialog.getByRole("button", { name: "Release" }).click();
    const status = dialog.getByRole("status");
    await expect(status).toContainText("Released on 2 of 3 nodes");
    await expect(status).toContainText("node-2: holds a hash that is not a token lock");
    await expect(status).not.toContainText("did not answer");
    expect(await nodes[2]!.hget(resource, "owner")).toBe("someone-else");
    await dialog.getByRole("button", { name: "Close" }).click();
    await deleteMatching(nodes, resource);
  });

  test("releasing one side of a split vote says the lock goes on with the other value", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("split");
    await nodes[0]!.set(resource, "x1-on-node-0", "PX", 120_000);
    await nodes[1]!.set(resource, "x2-on-node-1", "PX", 120_000);
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    const state = page.locator(".detail-grid");
    await expect(state.getByText("partial", { exact: true })).toBeVisible();
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await dialog.getByLabel("Reason").fill("one side of a split vote");
    await dialog.getByRole("button", { name: "Release" }).click();
    const status = dialog.getByRole("status");
    await expect(status).toContainText(/Released on 1 of 3 nodes, but the lock goes on with another value on 1 of 3 nodes \(node-[01]\)/);
    await dialog.getByRole("button", { name: "Close" }).click();
    // The page agrees: still partial, with the other value on one node.
    await expect(state.getByText("partial", { exact: true })).toBeVisible();
    const left = (await Promise.all(nodes.map((n) => n.get(resource)))).filter((v) => v !== null);
    expect(left).toHaveLength(1);
    await deleteMatching(nodes, resource);
  });

  test("a split vote of this engine's values: the dialog says no value leads and which node's value goes, not a foreign value without a fence", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("split-engine");
    await nodes[0]!.set(resource, encodeLockValue({ label: "checkout-api", host: "web-1", pid: 11, fence: "901", acquiredAt: Date.now() }), "PX", 120_000);
    await nodes[1]!.set(resource, encodeLockValue({ label: "billing-worker", host: "web-2", pid: 22, fence: "902", acquiredAt: Date.now() }), "PX", 120_000);
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.locator(".detail-grid")).toContainText("split vote: no value leads");
    // Every side's holder, with the node holding it, in node order: not whichever was read last.
    await expect(page.locator(".detail-grid .holder-list li")).toHaveText(["checkout-api on web-1 pid 11, held on node-0", "billing-worker on web-2 pid 22, held on node-1"]);
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    const fact = (name: string) => dialog.locator(`dt:text-is("${name}") + dd`);
    // Both values were written by this engine, each with its fence: neither is foreign, nor taken without a fence.
    await expect(fact("Holder")).toContainText("split vote: no value leads: checkout-api on web-1 pid 11, held on node-0; billing-worker on web-2 pid 22, held on node-1");
    await expect(fact("Holder")).toContainText(/the value on node-[01]/);
    await expect(fact("Holder")).not.toContainText("foreign");
    await expect(fact("Fence")).not.toContainText("not taken fenced");
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await deleteMatching(nodes, resource);
  });

  test("a split vote whose sides were replaced by a new holder while the dialog was open: the new holder is kept", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("split-replaced");
    await nodes[0]!.set(resource, "y1-on-node-0", "PX", 120_000);
    await nodes[1]!.set(resource, "y2-on-node-1", "PX", 120_000);
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.locator(".detail-grid").getByText("partial", { exact: true })).toBeVisible();
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await dialog.getByLabel("Reason").fill("split vote, both sides stuck");

    // Meanwhile both sides give up and another client takes the lock on every node.
    const fresh = await holdLock(nodes, resource, "new-holder", "40");
    await expect(dialog.getByRole("alert")).toContainText("The lock changed hands");
    await expect(dialog.getByRole("button", { name: "Release" })).toHaveCount(0);
    for (const n of nodes) expect(await n.get(resource)).toBe(fresh);
    await dialog.getByRole("button", { name: "Close" }).click();
    await deleteMatching(nodes, resource);
  });

  test("a script's release (bearer token, as with curl) shows on the audit page, with its per-node outcome", async ({ page, request, signIn }) => {
    const resource = unique("script");
    await holdLock(nodes, resource, "cron-runner", "9");
    const response = await request.post(`/api/locks/${encodeURIComponent(resource)}/release`, {
      data: { reason: "released by the on-call script" },
      headers: { Authorization: `Bearer ${E2E_OPERATOR_TOKEN}`, "X-Lockscope-Actor": "oncall-bot" },
    });
    expect(response.status(), await response.text()).toBe(200);
    const body = (await response.json()) as { released: boolean; auditId: string };
    expect(body.released).toBe(true);

    await signIn("viewer");
    await page.goto(`/audit?resource=${encodeURIComponent(resource)}`);
    const entry = page.getByRole("table", { name: "Audit entries" }).getByRole("row").filter({ hasText: resource });
    await expect(entry).toHaveCount(1);
    await expect(entry).toContainText("oncall-bot");
    await expect(entry).toContainText("cron-runner (e2e-host pid 4242)");
    await expect(entry).toContainText("released by the on-call script");
    await entry.getByRole("button", { name: "Details" }).click();
    await expect(page.getByText(body.auditId)).toBeVisible();
  });

  test("a viewer sees the lock but no release button, and the server refuses the release anyway", async ({ page, signIn, baseURL }) => {
    await signIn("viewer");
    const resource = unique("viewer");
    const value = await holdLock(nodes, resource, "read-only", "1");
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.locator(".detail-grid")).toContainText("read-only");
    await expect(page.getByRole("button", { name: "Force release" })).toHaveCount(0);

    const response = await page.request.post(`/api/locks/${encodeURIComponent(resource)}/release`, {
      data: { reason: "viewer tries anyway" },
      headers: { Origin: new URL(baseURL ?? "http://127.0.0.1").origin },
    });
    expect(response.status()).toBe(403);
    for (const n of nodes) expect(await n.get(resource)).toBe(value);
  });

  test("the dialog's Release button is readable in both themes: its text has AA contrast on its red", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("contrast");
    await holdLock(nodes, resource, "stuck-worker", "5");
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    // (A disabled button is exempt from contrast: the reason makes Release the button the operator reads and presses.)
    await dialog.getByLabel("Reason").fill("hung since the deploy");
    await expect(dialog.getByRole("button", { name: "Release" })).toBeEnabled();
    for (const theme of THEMES) {
      await useSystemTheme(page, theme);
      const contrast = await new AxeBuilder({ page }).include("dialog").withRules(["color-contrast"]).analyze();
      expect(
        contrast.violations.flatMap((v) => v.nodes.map((n) => `${n.target.join(" ")}: ${n.failureSummary?.split("\n")[1]?.trim() ?? v.help}`)),
        theme,
      ).toEqual([]);
    }
    await dialog.getByRole("button", { name: "Cancel" }).click();
    await deleteMatching(nodes, resource);
  });

  test("the whole force release works with the keyboard alone: filter, open the lock, release with a reason, close", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("keyboard");
    await holdLock(nodes, resource, "stuck-worker", "23");
    await page.goto("/");
    await expect(page.getByRole("row", { name: resource })).toContainText("stuck-worker");

    await tabTo(page, page.getByLabel("Filter locks"));
    await page.keyboard.type(resource);
    // (This one lock of however many there are: "1 lock shown" where the test runs alone.)
    await expect(page.getByText(/^1 (of [\d,]+ locks|lock) shown: 1 held$/)).toBeVisible();
    await tabTo(page, page.getByRole("link", { name: resource }));
    await page.keyboard.press("Enter");
    await expect(page.getByRole("heading", { level: 1, name: resource })).toBeVisible();

    const open = page.getByRole("button", { name: "Force release" });
    await tabTo(page, open);
    await page.keyboard.press("Enter");
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await expect(dialog).toBeVisible();
    // Escape cancels and gives the focus back to the button that opened it.
    await page.keyboard.press("Escape");
    await expect(dialog).toBeHidden();
    await expect(open).toBeFocused();

    await page.keyboard.press("Enter");
    await expect(dialog).toBeVisible();
    await expect(dialog.getByLabel("Reason")).toBeFocused();
    await page.keyboard.type("hung since the failover; keyboard only");
    await tabTo(page, dialog.getByRole("button", { name: "Release" }), 5);
    await page.keyboard.press("Enter");
    await expect(dialog.getByRole("status")).toContainText("Released on 3 of 3 nodes");
    // The outcome moves the focus to Close, so Enter ends the flow; a screen reader reads the outcome with it (the
    // focus move would otherwise cut the status short, or a reader that missed the new status never hear it).
    await expect(dialog.getByRole("button", { name: "Close" })).toBeFocused();
    await expect(dialog.getByRole("button", { name: "Close" })).toHaveAccessibleDescription(/^Released on 3 of 3 nodes\. Audit entry/);
    await page.keyboard.press("Enter");
    await expect(dialog).toBeHidden();
    // The button that opened it went with the lock: the focus comes back to the lock's page, at its title, not to
    // the top of the document (where the next Tab would start over at the header).
    await expect(page.getByRole("heading", { level: 1, name: resource })).toBeFocused();
    await page.keyboard.press("Shift+Tab");
    await expect(page.getByRole("link", { name: "← All locks" })).toBeFocused();
    for (const n of nodes) expect(await n.get(resource)).toBeNull();
  });
});
