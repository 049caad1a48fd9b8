import { randomBytes } from "node:crypto";
import type { Page, Route } from "@playwright/test";
import type Redis from "ioredis";
import { encodeLockValue } from "@lockscope/redlock";
import { Redlock } from "@lockscope/redlock";
import { E2E_VIEWER_TOKEN, expect, lockNodeClients, test } from "./fixtures";
import { deleteMatching, holdLock, restartNodeOne, settled, unique } from "./scene";

async function setOnAll(clients: Redis[], key: string, value: string, ttlMs: number) {
  await Promise.all(clients.map((c) => c.set(key, value, "PX", ttlMs)));
}

test.describe("live locks", () => {
  let clients: Redis[] = [];
  test.afterEach(() => {
    for (const c of clients) c.disconnect();
    clients = [];
  });

  test("a lock taken outside the browser appears, its TTL bar shrinks, and it leaves when it expires", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    await page.goto("/");
    await expect(page.getByRole("status", { name: "Live connection" })).toHaveText(/live/);
    // The table of every lock, not the grouped view an earlier spec's large fleet may still call for while its
    // ended locks leave the list: the lock's whole life is watched in the table. (Right after such a fleet the
    // table's first change can take a few seconds to come: the TTL leaves room for it.)
    const table = page.getByRole("table", { name: "Locks" });
    await expect(table).toBeVisible({ timeout: 30_000 });
    const resource = unique("expiring");
    const value = encodeLockValue({ label: "report-builder", host: "batch-7", pid: 4242, fence: null, acquiredAt: Date.now() });
    await setOnAll(clients, resource, value, 15_000);

    const row = table.getByRole("row", { name: resource, exact: true });
    await expect(row).toBeVisible();
    await expect(row.getByRole("cell").nth(0)).toHaveText("held");
    await expect(row).toContainText("report-builder (batch-7 pid 4242)");
    await expect(row.getByLabel("node-0: holds this value")).toBeVisible();
    await expect(row).toContainText("3/3");

    const bar = row.getByRole("progressbar", { name: "TTL left" });
    const fill = bar.locator(".ttl-fill");
    const first = Number(await bar.getAttribute("aria-valuenow"));
    const firstWidth = (await fill.boundingBox())?.width ?? 0;
    await expect.poll(async () => Number(await bar.getAttribute("aria-valuenow"))).toBeLessThan(first - 1_000);
    const laterWidth = (await fill.boundingBox())?.width ?? 0;
    expect(laterWidth).toBeLessThan(firstWidth);

    await expect(row.getByRole("cell").nth(0)).toHaveText("expired", { timeout: 20_000 });
    await expect(row).toHaveCount(0, { timeout: 20_000 });
  });

  test("the lock page shows holder, nodes and the timeline as it happens", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    const resource = unique("orders/42");
    await page.goto("/");
    await expect(page.getByRole("status", { name: "Live connection" })).toHaveText(/live/);
    await setOnAll(clients, resource, "foreign-client-token-1", 60_000);
    const row = page.getByRole("table", { name: "Locks" }).getByRole("row", { name: resource, exact: true });
    await expect(row).toContainText("raw foreign-client-token-1");
    await row.getByRole("link", { name: resource }).click();

    await expect(page.getByRole("heading", { level: 1, name: resource })).toBeVisible();
    await expect(page).toHaveURL(new RegExp(`/locks/${encodeURIComponent(resource).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`));
    const nodes = page.getByRole("table", { name: "Nodes holding this lock" });
    await expect(nodes.getByRole("row", { name: "node-1" })).toContainText("foreign-client-token-1");
    const timeline = page.getByRole("list", { name: "Timeline" });
    await expect(timeline).toContainText("acquired");
    // A foreign client's failed attempts leave no trace in Redis: no chart claiming there were none.
    await expect(page.getByText("Failed attempts are not visible for this lock")).toBeVisible();
    await expect(page.getByRole("img", { name: /Failed acquisition attempts per 10 seconds/ })).toHaveCount(0);

    // This console keeps no history database (its history routes answer `recording: false`): the history section says
    // so in one line, naming the setting, and offers no "who held it at…" form that could only come back empty.
    expect(((await (await page.request.get(`/api/locks/${encodeURIComponent(resource)}/history?limit=1`)).json()) as { recording: boolean }).recording).toBe(false);
    const history = page.getByRole("region", { name: "Recorded history" });
    await expect(history).toContainText("Lock history is not recorded on this console: set AUDIT_DATABASE_URL");
    await expect(history.locator("code")).toHaveText("AUDIT_DATABASE_URL");
    await expect(page.getByRole("heading", { name: "Who held it at…" })).toHaveCount(0);
    await expect(page.getByRole("form", { name: "Who held it at a given time" })).toHaveCount(0);
    await expect(history.getByRole("table")).toHaveCount(0);

    await Promise.all(clients.map((c) => c.del(resource)));
    await expect(timeline).toContainText("released");
    await expect(page.getByText("released", { exact: true }).first()).toBeVisible();
  });

  test("the table's count says how many of the rows shown are held, ended or partial, and its held agrees with the tile", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    await page.goto("/");
    const table = page.getByRole("table", { name: "Locks" });
    await expect(table).toBeVisible({ timeout: 30_000 });
    const prefix = unique("counted");
    for (const name of ["a", "b", "c"]) await setOnAll(clients, `${prefix}/${name}`, encodeLockValue({ label: "counter", host: "web-1", pid: 7, fence: null, acquiredAt: Date.now() }), 120_000);
    await clients[0]!.set(`${prefix}/split`, "only-on-node-0", "PX", 120_000);
    await clients[1]!.set(`${prefix}/split`, "only-on-node-1", "PX", 120_000);
    // Nothing is read out while the operator has not changed the filter, however the count changes.
    const readOut = page.locator(".locks-tools [role=status]");
    await expect(readOut).toHaveText("");
    await page.getByLabel("Filter locks").fill(prefix);
    await expect(page.getByText(/^4 (of [\d,]+ )?locks shown/)).toHaveText(/^4 (of [\d,]+ )?locks shown: 3 held, 1 partial$/);
    // The filter's count is read out once typing pauses.
    await expect(readOut).toHaveText(/^Filtered: 4 (of [\d,]+ )?locks shown: 3 held, 1 partial$/);
    // One of the three ends: it stays listed a few seconds, as ended, and is no longer counted as held.
    await Promise.all(clients.map((c) => c.del(`${prefix}/c`)));
    await expect(table.getByRole("row", { name: `${prefix}/c`, exact: true }).getByRole("cell").nth(0)).toHaveText("released");
    await expect(page.getByText(/^4 (of [\d,]+ )?locks shown/)).toHaveText(/^4 (of [\d,]+ )?locks shown: 2 held, 1 partial, 1 ended$/);
    // A lock that comes or goes changes the count beside the box, but is not read out (a busy fleet's would be, every second).
    await expect(readOut).toHaveText(/^Filtered: 4 (of [\d,]+ )?locks shown: 3 held, 1 partial$/);
    await page.getByLabel("Filter locks").fill("");
    // Unfiltered, the count's "held" is the "locks held" tile's figure.
    const tile = page.locator("dl[aria-label='Live counts'] > div").filter({ hasText: "locks held" }).locator("dd");
    await expect
      .poll(async () => {
        const count = (await page.getByText(/^[\d,]+ locks? shown/).textContent()) ?? "";
        return count.match(/: ([\d,]+) held/)?.[1] === (await tile.textContent());
      })
      .toBe(true);
    await Promise.all(clients.map((c) => c.del(`${prefix}/a`, `${prefix}/b`, `${prefix}/split`)));
  });

  test("a lock its node came back without after a restart reads lost on its page, not released", async ({ page, request, signIn }) => {
    test.setTimeout(120_000);
    await signIn("viewer");
    clients = await lockNodeClients(request);
    const resource = unique("payouts/7");
    // A single-instance lock on node 1 (the embedded nodes keep nothing across a restart).
    await clients[1]!.set(resource, "payout-worker-token-9", "PX", 300_000);
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    const state = page.locator(".detail-grid .state-badge").first();
    await expect(state).toHaveText("held");
    await restartNodeOne(request);
    await expect(state).toHaveText("lost", { timeout: 30_000 });
    const timeline = page.getByRole("list", { name: "Timeline" });
    await expect(timeline).toContainText("nobody released it, and its holder may still think it holds it");
    await expect(timeline).toContainText("lost in restart on node-1 — node-1 restarted without an append-only file and came back without this lock");
    await expect(timeline.getByText("released", { exact: true })).toHaveCount(0);

    // Long after it left the list, the locks page still names it, for the on-call the alert woke.
    await page.goto("/");
    const losses = page.getByRole("region", { name: /Lost in node restarts and failovers/ });
    await expect(losses).toContainText(/In the last 24 hours, (node-1|nodes) lost \d+ locks? while (its|their) TTL ran; (it is|they are|\d+ of them (is|are)) gone: /);
    const row = losses.getByRole("table", { name: "Lost and gone" }).getByRole("row").filter({ hasText: resource });
    await expect(row.getByRole("cell")).toHaveText([/ago$/, resource, "node-1", "restarted without it"]);
    await row.getByRole("link", { name: resource }).click();
    await expect(page.getByRole("heading", { level: 1, name: resource })).toBeVisible();
  });

  test("a loss's age in the losses panel counts on between the console's answers, also when they stop coming", async ({ page, signIn }) => {
    await signIn("viewer");
    await page.clock.install();
    const resource = unique("lost-age");
    // The console's answer once, as it gives it (when, by its clock, and what); then it no longer answers.
    let answered = false;
    await page.route("**/api/losses", async (route) => {
      if (answered) return route.abort();
      answered = true;
      const now = Date.now();
      await route.fulfill({
        json: {
          serverTime: now,
          deployments: ["default"],
          losses: [{ at: now - 5_000, resource, deployment: "default", node: "node-1", kind: "restart", detail: "node-1 restarted without this lock", token: "t-1", wentOn: false }],
        },
      });
    });
    await page.goto("/");
    const row = page.getByRole("table", { name: "Lost and gone" }).getByRole("row").filter({ hasText: resource });
    await expect(row.getByRole("cell").first()).toHaveText(/^\d+(\.\d)? s ago$/);
    await page.clock.runFor(60_000);
    await expect(row.getByRole("cell").first()).toHaveText(/^1 min \d+ s ago$/);
  });

  test("the losses panel says when it could not read the losses (no answer, a refusal, a session ended), rather than show none", async ({ page, signIn }) => {
    await signIn("viewer");
    const answers: Array<{ answer: (route: Route) => Promise<void>; says: RegExp }> = [
      { answer: (route) => route.abort("connectionrefused"), says: /^Could not load the locks lost in node restarts and failovers: the console did not answer\.$/ },
      {
        answer: (route) => route.fulfill({ status: 503, json: { error: { code: "unavailable", message: "The console is shutting down." } } }),
        says: /^Could not load the locks lost in node restarts and failovers: The console is shutting down\.$/,
      },
      {
        answer: (route) => route.fulfill({ status: 401, json: { error: { code: "unauthorized", message: "Sign in on /login or send `Authorization: Bearer <token>`." } } }),
        says: /^Could not load the locks lost in node restarts and failovers: You are not signed in, or your session has ended: sign in again, then try once more\.$/,
      },
    ];
    for (const { answer, says } of answers) {
      await page.unroute("**/api/losses");
      await page.route("**/api/losses", answer);
      await page.goto("/");
      await expect(page.getByRole("table", { name: "Lock nodes" })).toBeVisible();
      await expect(page.getByRole("alert").filter({ hasText: "Could not load the locks lost" })).toHaveText(says);
    }
  });

  test("the Nodes panel says when it could not read the nodes (no answer, a refusal, a session ended), rather than vanish", async ({ page, signIn }) => {
    await signIn("viewer");
    const answers: Array<{ answer: (route: Route) => Promise<void>; says: RegExp }> = [
      { answer: (route) => route.abort("connectionrefused"), says: /^Could not load the nodes: the console did not answer\.$/ },
      {
        answer: (route) => route.fulfill({ status: 503, json: { error: { code: "unavailable", message: "The console is shutting down." } } }),
        says: /^Could not load the nodes: The console is shutting down\.$/,
      },
      {
        answer: (route) => route.fulfill({ status: 401, json: { error: { code: "unauthorized", message: "Sign in on /login or send `Authorization: Bearer <token>`." } } }),
        says: /^Could not load the nodes: You are not signed in, or your session has ended: sign in again, then try once more\.$/,
      },
    ];
    const panel = page.getByRole("region", { name: "Nodes", exact: true });
    for (const { answer, says } of answers) {
      await page.unroute("**/api/health");
      await page.route("**/api/health", answer);
      await page.goto("/");
      await expect(panel.getByRole("alert")).toHaveText(says, { timeout: 30_000 });
    }
    // Read once, then no answer: the nodes as last read stay, under the same sentence.
    await page.unroute("**/api/health");
    await page.goto("/");
    await expect(panel.getByRole("table", { name: "Lock nodes" }).getByRole("row", { name: "node-1" })).toBeVisible();
    await expect(panel.getByRole("alert")).toHaveCount(0);
    await page.route("**/api/health", (route) => route.abort("connectionrefused"));
    await expect(panel.getByRole("alert")).toHaveText(/^Could not load the nodes: the console did not answer\.$/, { timeout: 30_000 });
    await expect(panel.getByRole("table", { name: "Lock nodes" }).getByRole("row", { name: "node-1" })).toBeVisible();
  });

  test("a node's last event in the Nodes panel counts on between the console's answers, also when they stop coming", async ({ page, signIn }) => {
    await signIn("viewer");
    await page.clock.install();
    // The console's answer once, each node's last event 2 s before it; then it no longer answers.
    let answered = false;
    await page.route("**/api/health", async (route) => {
      if (answered) return route.abort();
      answered = true;
      const response = await route.fetch();
      const body = (await response.json()) as { nodes: Array<{ watcher?: { lastEventAgeMs: number | null } }> };
      for (const node of body.nodes) if (node.watcher) node.watcher.lastEventAgeMs = 2_000;
      await route.fulfill({ response, json: body });
    });
    await page.goto("/");
    const nodes = page.getByRole("table", { name: "Lock nodes" });
    const lastEvent = nodes.getByRole("row", { name: "node-0", exact: true }).getByRole("cell").nth(3);
    await expect(nodes.getByRole("columnheader").nth(4)).toHaveText("Last event");
    await expect(lastEvent).toHaveText(/^\d+(\.\d)? s ago$/);
    await page.clock.runFor(60_000);
    await expect(lastEvent).toHaveText(/^1 min \d+ s ago$/);
  });

  test("a lock's page that cannot refresh keeps the lock as last read and says why in the page's words, not the browser's", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    const resource = unique("refresh-fails");
    await holdLock(clients, resource, "invoicer", "17");
    const path = `/api/locks/${encodeURIComponent(resource)}`;
    const lockRead = (url: URL) => url.pathname === path;
    // Never answered: nothing to keep, and no "Failed to fetch".
    await page.route(lockRead, (route) => route.abort("connectionrefused"));
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.getByRole("main").getByRole("alert").filter({ hasText: "Could not" })).toHaveText("Could not load this lock: the console did not answer.");
    await page.unroute(lockRead);
    await page.reload();
    const details = page.locator(".detail-grid");
    await expect(details).toContainText("invoicer (e2e-host pid 4242)");
    // Its next refresh (every 5 s) gets no answer: the lock stays, with why it may be out of date.
    await page.route(lockRead, (route) => route.abort("connectionrefused"));
    const notice = page.getByRole("main").getByRole("alert").filter({ hasText: "Could not refresh this lock" });
    await expect(notice).toHaveText(/^Could not refresh this lock: the console did not answer\. Shown as read at \d\d:\d\d:\d\d; trying again\.$/, { timeout: 20_000 });
    await expect(page.getByRole("heading", { level: 1, name: resource })).toBeVisible();
    await expect(details).toContainText("invoicer (e2e-host pid 4242)");
    await expect(page.getByRole("table", { name: "Nodes holding this lock" }).getByRole("row", { name: "node-1" })).toBeVisible();
    // The console's own failure, in its words.
    await page.unroute(lockRead);
    await page.route(lockRead, (route) => route.fulfill({ status: 503, json: { error: { code: "unavailable", message: "No lock node answers." } } }));
    await expect(notice).toHaveText(/^Could not refresh this lock: No lock node answers\. Shown as read at/, { timeout: 20_000 });
    await expect(details).toContainText("invoicer (e2e-host pid 4242)");
    // Answered again: the notice goes.
    await page.unroute(lockRead);
    await expect(notice).toHaveCount(0, { timeout: 20_000 });
    await expect(details).toContainText("invoicer (e2e-host pid 4242)");
  });

  test("a lock whose key is too long to open is listed without a link, and says why", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    await page.goto("/");
    const table = page.getByRole("table", { name: "Locks" });
    await expect(table).toBeVisible({ timeout: 30_000 });
    const resource = unique(`long-${"x".repeat(1_100)}`);
    const short = unique("short-beside-long");
    // 700 emoji: 1,400 UTF-16 units, but 700 characters and more as the console counts them: it opens.
    const emoji = unique(`emoji-${"🔒".repeat(700)}`);
    try {
      await setOnAll(clients, resource, "long-key-holder", 60_000);
      await setOnAll(clients, short, "short-key-holder", 60_000);
      await setOnAll(clients, emoji, "emoji-key-holder", 60_000);
      const emojiRow = table.getByRole("row", { name: emoji, exact: true });
      await expect(emojiRow).toContainText("emoji-key-holder");
      await emojiRow.getByRole("link").click();
      // The lock's page, not the table's row (which names the holder too): the navigation is over before the next.
      await expect(page.getByRole("heading", { name: emoji })).toBeVisible();
      await expect(page.getByText("emoji-key-holder").first()).toBeVisible();
      expect((await page.request.get(`/api/locks/${encodeURIComponent(emoji)}`)).status()).toBe(200);
      // (To the table by its address: Chromium's history call after the long address's page once failed with
      // "Not attached to an active page", a detail of the browser's, not of the console.)
      await page.goto("/");
      await expect(table).toBeVisible({ timeout: 30_000 });
      const row = table.getByRole("row", { name: resource, exact: true });
      await expect(row).toContainText("long-key-holder");
      await expect(row.getByRole("link")).toHaveCount(0);
      await expect(row.locator(".unlinked")).toHaveAttribute("title", new RegExp(`This key has ${resource.length.toLocaleString("en-US")} characters: a lock key longer than 1,024 characters is listed but cannot be opened`));
      await expect(table.getByRole("row", { name: short, exact: true }).getByRole("link", { name: short })).toBeVisible();
      const api = await page.request.get(`/api/locks/${encodeURIComponent(resource)}`);
      expect(api.status()).toBe(400);
      expect(((await api.json()) as { error: { message: string } }).error.message).toContain("a lock key longer than 1,024 characters is listed but cannot be opened, released or looked up here");
    } finally {
      await Promise.all(clients.map((c) => c.del(resource, short, emoji)));
    }
  });

  test("a filter that matches no lock says so on screen, on a phone as on a laptop", async ({ page, signIn }) => {
    await signIn("viewer");
    for (const width of [390, 1440]) {
      await page.setViewportSize({ width, height: 844 });
      await page.goto("/");
      await expect(page.getByRole("status", { name: "Live connection" })).toHaveText(/live/);
      await page.getByLabel("Filter locks").fill(unique("matches-no-lock"));
      const note = page.getByText("No lock matches the filter.");
      await expect(note).toBeVisible();
      // The table is wider than a phone's screen (it scrolls in its box): the sentence must be inside the box's view.
      const text = await note.evaluate((el) => {
        const range = document.createRange();
        range.selectNodeContents(el);
        const { left, right } = range.getBoundingClientRect();
        const box = el.closest(".locks-scroll")!.getBoundingClientRect();
        return { left, right, boxLeft: box.left, boxRight: box.right };
      });
      expect(text.left, `${width} px`).toBeGreaterThanOrEqual(text.boxLeft);
      expect(text.right, `${width} px`).toBeLessThanOrEqual(text.boxRight);
    }
  });

  test("the filter finds a lock by its state as the table shows it: 'TTL elapsed'", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    const prefix = unique("state-shown");
    // The SETNX pattern: the value is when the lock ends (unix seconds), the key has no TTL and outlives it, so
    // the lock stays "TTL elapsed, not yet reclaimed".
    const ended = `${prefix}/ended`;
    const held = `${prefix}/held`;
    try {
      await Promise.all(clients.map((c) => c.set(ended, String(Math.floor(Date.now() / 1000) + 2))));
      await setOnAll(clients, held, "still-held-token", 120_000);
      await page.goto("/");
      const table = page.getByRole("table", { name: "Locks" });
      await expect(table).toBeVisible({ timeout: 30_000 });
      const endedRow = table.getByRole("row", { name: ended, exact: true });
      await expect(endedRow.getByRole("cell").nth(0)).toHaveText("TTL elapsed", { timeout: 15_000 });
      await expect(table.getByRole("row", { name: held, exact: true }).getByRole("cell").nth(0)).toHaveText("held");

      await page.getByLabel("Filter locks").fill("TTL elapsed");
      await expect(endedRow).toBeVisible();
      await expect(table.getByRole("row", { name: held, exact: true })).toHaveCount(0);
    } finally {
      await Promise.all(clients.map((c) => c.del(ended, held)));
    }
  });

  test("the locks table's filter and sort are kept in the address: a lock opened from it leads Back to them, and a reload keeps them", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    const tag = `kept${randomBytes(3).toString("hex")}`;
    // A key with a space, a `#` and a `%`: the address carries the filter as typed.
    const filterText = `${tag} #1%`;
    const first = `lock:e2e/${tag} #1%/a`;
    const second = `lock:e2e/${tag} #1%/b`;
    try {
      await holdLock(clients, first, "alpha", null);
      await holdLock(clients, second, "beta", null);
      await page.goto("/");
      const table = page.getByRole("table", { name: "Locks" });
      await expect(table).toBeVisible({ timeout: 30_000 });
      const filter = page.getByLabel("Filter locks");
      await filter.fill(filterText);
      await table.getByRole("button", { name: "Resource" }).click();
      const rows = table.getByRole("row").filter({ hasText: tag });
      await expect(rows).toHaveCount(2);
      await expect(rows.nth(0)).toHaveAccessibleName(second);
      const shown = async () => {
        await expect(filter).toHaveValue(filterText);
        await expect(table.getByRole("columnheader", { name: "Resource" })).toHaveAttribute("aria-sort", "descending");
        await expect(rows).toHaveCount(2);
        await expect(rows.nth(0)).toHaveAccessibleName(second);
        await expect(table.getByRole("row")).toHaveCount(3);
      };

      await rows.nth(1).getByRole("link", { name: first }).click();
      await expect(page.getByRole("heading", { level: 1, name: first })).toBeVisible();
      await page.goBack();
      await shown();
      await page.reload();
      await shown();
    } finally {
      await Promise.all(clients.map((c) => c.del(first, second)));
    }
  });

  test("the filter finds a lock by its whole token pasted in, where the Holder column shows the token cut", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    // node-redlock's token: 16 random bytes as hex, 32 characters; the column shows 27 of them and an ellipsis.
    const token = randomBytes(16).toString("hex");
    const resource = unique("pasted-token");
    try {
      await setOnAll(clients, resource, token, 120_000);
      await page.goto("/");
      const table = page.getByRole("table", { name: "Locks" });
      await expect(table).toBeVisible({ timeout: 30_000 });
      const row = table.getByRole("row", { name: resource, exact: true });
      await expect(row).toContainText(`raw ${token.slice(0, 27)}…`);

      await page.getByLabel("Filter locks").fill(token);
      await expect(row).toBeVisible();
    } finally {
      await Promise.all(clients.map((c) => c.del(resource)));
    }
  });

  test("sorted by Fence either way, locks without a fence come last, as in a group's table", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    const prefix = unique("fence-order");
    const names = ["twelve", "five", "none"].map((n) => `${prefix}/${n}`);
    try {
      await holdLock(clients, `${prefix}/twelve`, "writer", "12");
      await holdLock(clients, `${prefix}/five`, "writer", "5");
      await setOnAll(clients, `${prefix}/none`, "foreign-token", 120_000);
      await page.setViewportSize({ width: 1440, height: 900 });
      await page.goto("/");
      const table = page.getByRole("table", { name: "Locks" });
      await expect(table).toBeVisible({ timeout: 30_000 });
      await page.getByLabel("Filter locks").fill(prefix);
      const order = () => table.locator("tbody tr[aria-label]").evaluateAll((rows) => rows.map((r) => r.getAttribute("aria-label")));
      await expect.poll(order).toEqual([...names].sort());

      await table.getByRole("button", { name: "Fence", exact: true }).click();
      await expect(table.getByRole("columnheader", { name: "Fence" })).toHaveAttribute("aria-sort", "ascending");
      await expect.poll(order).toEqual([`${prefix}/five`, `${prefix}/twelve`, `${prefix}/none`]);
      await table.getByRole("button", { name: "Fence", exact: true }).click();
      await expect(table.getByRole("columnheader", { name: "Fence" })).toHaveAttribute("aria-sort", "descending");
      await expect.poll(order).toEqual([`${prefix}/twelve`, `${prefix}/five`, `${prefix}/none`]);
    } finally {
      await Promise.all(clients.map((c) => c.del(...names)));
    }
  });

  test("a large fleet's header does not count its locks as 0 held before the console has counted them", async ({ page, signIn }) => {
    await signIn("viewer");
    // A fleet of 6,000 held locks, shown grouped; the live stream's counts (every second) have not come yet: here they
    // never do, the stream being cut, as while the console is reached again.
    const group = { group: "lock:fleet", locks: 6_000, held: 6_000, partial: 0, elapsed: 0, ended: 0, contention: { attemptsPerMin: 0, waiters: 0 }, oldest: null, shortestTtl: null };
    await page.route(/\/api\/locks\/groups/, (route: Route) => route.fulfill({ json: { serverTime: Date.now(), locks: 6_000, total: 1, offset: 0, groups: [group] } }));
    await page.route(/\/api\/locks\/stream/, (route: Route) => route.abort());
    await page.goto("/");
    await expect(page.getByRole("table", { name: "Lock groups" }).getByRole("row", { name: "lock:fleet", exact: true })).toContainText("6,000");
    const tile = (name: string) => page.getByLabel("Live counts").locator("div").filter({ has: page.getByText(name, { exact: true }) }).getByRole("definition");
    for (const name of ["locks held", "acquisitions/s", "contention/s", "expirations/s"]) await expect(tile(name), name).toHaveText("–");
  });

  test("while the console reads a node's locks, the notice above the list is read out once, not again with each count of keys read", async ({ page, request, signIn }) => {
    await signIn("viewer");
    const { nodes } = (await (await request.get("/api/locks?limit=1", { headers: { Authorization: `Bearer ${E2E_VIEWER_TOKEN}` } })).json()) as { nodes: Array<Record<string, unknown>> };
    // node-0 is being read (as after a reconnect to a node of many keys): each stream the page opens says how far.
    let keysRead = 1_000;
    await page.route(/\/api\/locks\/stream/, (route: Route) => {
      const reading = nodes.map((n, i) => (i === 0 ? { ...n, up: false, reading: { since: Date.now() - 5_000, keysRead } } : n));
      const snapshot = JSON.stringify({ serverTime: Date.now(), part: 0, parts: 1, nodes: reading, locks: [] });
      return route.fulfill({ status: 200, headers: { "Content-Type": "text/event-stream" }, body: `retry: 300\n\nevent: snapshot\ndata: ${snapshot}\n\n` });
    });
    await page.goto("/");
    const notice = page.locator("main").getByText(/^Reading the locks on node-0/);
    await expect(notice).toBeVisible();
    await expect(page.locator("main")).toContainText("1,000 keys");
    // What a screen reader reads out of it: the text of the page's live regions about it.
    const readOut = () =>
      page
        .locator("main")
        .locator("[role='status'], [aria-live]")
        .evaluateAll((els) => els.map((el) => el.textContent ?? "").filter((text) => text.includes("Reading the locks")).join(" | "));
    const before = await readOut();
    expect(before).toContain("Reading the locks on node-0");

    keysRead = 2_000;
    await expect(page.locator("main")).toContainText("2,000 keys", { timeout: 20_000 });
    expect(await readOut(), "read out again for each count").toBe(before);
  });

  test("asks to sign in when reading needs a token", async ({ page }) => {
    await page.goto("/");
    await expect(page.getByText("Sign in to see locks.")).toBeVisible();
    await page.getByRole("link", { name: "Sign in" }).last().click();
    await expect(page).toHaveURL(/\/login/);
  });

  test("stays smooth under load: thousands of locks, churn and contention", async ({ page, request, signIn }) => {
    test.setTimeout(120_000);
    await signIn("viewer");
    clients = await lockNodeClients(request);
    await page.setViewportSize({ width: 1500, height: 920 });
    const prefix = `lock:load-${randomBytes(2).toString("hex")}`;
    const labels = ["checkout-api", "billing-worker", "inventory-sync", "report-builder", "mailer"];
    const hosts = ["web-1", "web-2", "worker-3", "batch-7"];
    // 3,000 locks from every kind of client: engine values (holder decoded), foreign tokens (shown raw).
    const values = Array.from({ length: 3_000 }, (_, i) =>
      i % 3 === 2
        ? randomBytes(8).toString("hex")
        : encodeLockValue({ label: labels[i % labels.length]!, host: hosts[i % hosts.length]!, pid: 1000 + (i % 97), fence: i % 4 === 0 ? String(i) : null, acquiredAt: Date.now() - (i % 600) * 1000 }),
    );
    for (const c of clients) {
      const pipeline = c.pipeline();
      values.forEach((value, i) => pipeline.set(`${prefix}/order-${String(i).padStart(5, "0")}`, value, "PX", 30_000 + (i % 90) * 1_000));
      await pipeline.exec();
    }
    // A split vote: two values on two nodes, neither on a quorum (one value on one node would be a single-instance lock).
    await clients[0]!.set(`${prefix}/a-split-brain`, "only-on-node-0", "PX", 60_000);
    await clients[1]!.set(`${prefix}/a-split-brain`, "only-on-node-1", "PX", 60_000);
    // Contention on a few hot locks, from the engine (its telemetry feeds the contention column).
    const holder = new Redlock(clients, { label: "flash-sale", host: "web-1" });
    const hot = await Promise.all([0, 1, 2].map((i) => holder.acquire([`${prefix}/a-hot-sku-${i}`], 60_000)));
    const waiters = Array.from({ length: 4 }, (_, i) => new Redlock(clients, { label: `buyer-${i}`, retryCount: 40, retryDelayMs: 150, retryJitterMs: 50 }));
    const attempts = waiters.map((w, i) => w.acquire([`${prefix}/a-hot-sku-${i % 3}`], 5_000).catch(() => null));
    // Churn: acquisitions and releases while the page is open, one per frame the page paints (the page's own
    // pace, so the load follows what the browser keeps up with rather than a fixed delay).
    let churning = true;
    const nextFrame = () => page.evaluate(() => new Promise<void>((resolve) => requestAnimationFrame(() => resolve()))).catch(() => undefined);
    const churn = (async () => {
      let n = 0;
      while (churning) {
        const key = `${prefix}/churn-${n++ % 200}`;
        await setOnAll(clients, key, encodeLockValue({ label: "churner", host: "worker-3", pid: 77, fence: null, acquiredAt: Date.now() }), 2_000);
        await nextFrame();
      }
    })();

    await page.goto("/");
    await expect(page.getByRole("status", { name: "Live connection" })).toHaveText(/live/);
    const table = page.getByRole("table", { name: "Locks" });
    await expect(page.getByText(/\d+ locks shown/)).toHaveText(/^(3,[0-9]{3}) locks shown: /, { timeout: 30_000 });
    // Virtualized: only what fits on screen is in the DOM.
    expect(await table.getByRole("row").count()).toBeLessThan(120);
    await expect(table.getByRole("row", { name: `${prefix}/a-hot-sku-0`, exact: true })).toBeVisible();
    await expect(table.getByRole("row", { name: `${prefix}/a-split-brain`, exact: true })).toContainText("partial");
    await expect(table.getByRole("row", { name: `${prefix}/a-hot-sku-0`, exact: true })).toContainText(/\d+\/min/, { timeout: 20_000 });
    await page.getByLabel("Filter locks").fill("order-00042");
    await expect(page.getByText(/^1 of [\d,]+ locks shown: 1 held$/)).toBeVisible();
    await page.getByLabel("Filter locks").fill("");
    // Most contended first: click Contention twice (ascending, then descending).
    await page.getByRole("button", { name: "Contention" }).click();
    await page.getByRole("button", { name: "Contention" }).click();
    await expect(page.getByRole("columnheader", { name: "Contention" })).toHaveAttribute("aria-sort", "descending");
    await expect(table.getByRole("row", { name: `${prefix}/a-hot-sku-1`, exact: true })).toContainText(/\d+\/min/, { timeout: 20_000 });

    churning = false;
    await churn;
    await Promise.all(attempts);
    await Promise.all(hot.map((l) => holder.release(l)));
    await Promise.all([holder, ...waiters].map((r) => r.quit()));
    await deleteMatching(clients, `${prefix}/*`);
  });
});

/** The contention chart's time labels as drawn on its canvas: one box per tick (its lines stacked), left to right. */
async function chartTimeLabels(page: Page): Promise<{ canvasWidth: number; labels: Array<{ text: string; left: number; right: number }> }> {
  return page.evaluate(() => {
    const canvas = document.querySelector<HTMLCanvasElement>(".contention-chart canvas");
    const drawn = canvas && "drawnText" in canvas ? (canvas.drawnText as DrawnText[]) : [];
    // The time axis is under the plot: its labels hang from their tick (baseline top), centred on it, unrotated.
    const byTick = new Map<number, DrawnText[]>();
    for (const t of drawn) {
      if (t.baseline !== "top" || t.align !== "center" || t.rotated) continue;
      const at = Math.round(t.x);
      byTick.set(at, [...(byTick.get(at) ?? []), t]);
    }
    const labels = [...byTick].map(([x, lines]) => {
      const width = Math.max(...lines.map((l) => l.width));
      return { text: lines.map((l) => l.text).join(" / "), left: x - width / 2, right: x + width / 2 };
    });
    return { canvasWidth: canvas?.width ?? 0, labels: labels.sort((a, b) => a.left - b.left) };
  });
}

interface DrawnText {
  text: string;
  x: number;
  width: number;
  align: string;
  baseline: string;
  rotated: boolean;
}

test.describe("the contention chart", () => {
  // The labels depend on the clock: one zone and one language, so a run reads the same times wherever it runs.
  test.use({ timezoneId: "UTC", locale: "en-US" });

  test("its time labels never overlap or leave the chart, wherever its 10 minutes start and however wide it is", async ({ page, request, signIn }) => {
    test.setTimeout(120_000);
    await signIn("viewer");
    const clients = await lockNodeClients(request);
    const resource = `lock:e2e/chart-${randomBytes(3).toString("hex")}`;
    try {
      await holdLock(clients, resource, "flash-sale", "9", 300_000);
      // What the chart draws (the canvas keeps its own list: each redraw starts with a clear of the whole canvas).
      await page.addInitScript(() => {
        type Drawn = { text: string; x: number; width: number; align: string; baseline: string; rotated: boolean };
        const proto = CanvasRenderingContext2D.prototype;
        // The originals, taken off the prototype (each called on its own context below).
        const fillText = Object.getOwnPropertyDescriptor(proto, "fillText")?.value as (this: CanvasRenderingContext2D, text: string, x: number, y: number, maxWidth?: number) => void;
        const clearRect = Object.getOwnPropertyDescriptor(proto, "clearRect")?.value as (this: CanvasRenderingContext2D, x: number, y: number, w: number, h: number) => void;
        proto.fillText = function (this: CanvasRenderingContext2D, text: string, x: number, y: number, maxWidth?: number) {
          const m = this.getTransform();
          const list = ((this.canvas as HTMLCanvasElement & { drawnText?: Drawn[] }).drawnText ??= []);
          list.push({ text, x: m.a * x + m.c * y + m.e, width: this.measureText(text).width, align: this.textAlign, baseline: this.textBaseline, rotated: m.b !== 0 || m.c !== 0 });
          return maxWidth === undefined ? fillText.call(this, text, x, y) : fillText.call(this, text, x, y, maxWidth);
        };
        proto.clearRect = function (this: CanvasRenderingContext2D, x: number, y: number, w: number, h: number) {
          if (w >= this.canvas.width && h >= this.canvas.height) (this.canvas as HTMLCanvasElement & { drawnText?: Drawn[] }).drawnText = [];
          return clearRect.call(this, x, y, w, h);
        };
      });
      // The lock's page as the console answers it, with the chart's window ending where the test says.
      let endsAt = 0;
      await page.route(
        (url) => url.pathname === `/api/locks/${encodeURIComponent(resource)}`,
        async (route) => {
          const response = await route.fetch();
          const body = (await response.json()) as { contentionHistory: { bucketMs: number; endsAt: number; attempts: number[] } };
          body.contentionHistory = { bucketMs: 10_000, endsAt, attempts: Array.from({ length: 60 }, (_, i) => (i * 7) % 5) };
          await route.fulfill({ response, json: body });
        },
      );
      const figure = page.getByRole("img", { name: /Failed acquisition attempts per 10 seconds/ });
      // A window ending on a whole 10 minutes, then 5 s later, and so on through a whole minute; at 10:50 PM, whose
      // labels ("10:50 PM") are about the widest there are, whatever the time the test runs.
      const base = Date.UTC(2026, 0, 1, 22, 50);
      for (let offset = 0; offset < 60_000; offset += 5_000) {
        endsAt = base + offset;
        await page.setViewportSize({ width: 1440, height: 1000 });
        await page.goto(`/locks/${encodeURIComponent(resource)}`);
        await expect(figure.locator("canvas")).toBeVisible();
        for (const width of [390, 820, 1280, 1440, 2560]) {
          await page.setViewportSize({ width, height: 1000 });
          await settled(page);
          const box = await figure.boundingBox();
          // Drawn at this size: the canvas is as wide as its box (the chart redraws when its box changes).
          await expect.poll(async () => (await chartTimeLabels(page)).canvasWidth).toBe(Math.round(Math.max(240, box?.width ?? 0) * (await page.evaluate(() => devicePixelRatio))));
          const { canvasWidth, labels } = await chartTimeLabels(page);
          const where = `window ending ${new Date(endsAt).toISOString()}, ${width} px: ${labels.map((l) => `${l.text} [${Math.round(l.left)}, ${Math.round(l.right)}]`).join(", ")}`;
          expect(labels.length, where).toBeGreaterThan(0);
          for (const [i, label] of labels.entries()) {
            expect(label.left, `${where}: "${label.text}" leaves the chart on the left`).toBeGreaterThanOrEqual(0);
            expect(label.right, `${where}: "${label.text}" leaves the chart on the right`).toBeLessThanOrEqual(canvasWidth);
            const next = labels[i + 1];
            if (next) expect(label.right, `${where}: "${label.text}" overlaps "${next.text}"`).toBeLessThanOrEqual(next.left);
          }
        }
      }
    } finally {
      await page.unrouteAll({ behavior: "ignoreErrors" });
      await Promise.all(clients.map((c) => c.del(resource)));
      for (const c of clients) c.disconnect();
    }
  });
});
