import { randomBytes } from "node:crypto";
import type { Page } from "@playwright/test";
import type Redis from "ioredis";
import { Semaphore } from "redis-semaphore";
import { redissonPrefixName } from "@/lib/locks/formats/redisson";
import { RedissonWriter } from "../support/redisson";
import { expect, lockNodeClients, test } from "./fixtures";
import { unique } from "./scene";

/** Locks of other libraries, as an operator sees them on the default configuration. */
test.describe("locks of every format", () => {
  let nodes: Redis[] = [];
  test.beforeEach(async ({ request }) => {
    nodes = await lockNodeClients(request);
  });
  test.afterEach(() => {
    for (const n of nodes) n.disconnect();
  });

  test("a Redisson lock and a semaphore are in the table with their holders", async ({ page, signIn }) => {
    await signIn("viewer");
    const redissonKey = unique("redisson");
    const redisson = new RedissonWriter(nodes[0]!);
    await redisson.lock(redissonKey, 77, 120_000);
    const semaphoreName = `e2e-${randomBytes(3).toString("hex")}`;
    const permits = [0, 1].map(() => new Semaphore(nodes[1]!, semaphoreName, 4, { lockTimeout: 120_000, acquireTimeout: 1_000, refreshInterval: 0 }));
    for (const p of permits) await p.acquire();

    await page.goto("/");
    const redissonRow = page.getByRole("row", { name: redissonKey });
    await expect(redissonRow).toContainText("Redisson");
    await expect(redissonRow).toContainText("thread 77");
    await expect(redissonRow).toContainText("held");
    await expect(redissonRow).toContainText("not visible");
    const semaphoreRow = page.getByRole("row", { name: `semaphore:${semaphoreName}` });
    await expect(semaphoreRow).toContainText("redis-semaphore");
    await expect(semaphoreRow).toContainText("2 holders");
    await Promise.all(permits.map((p) => p.release()));
    await redisson.unlock(redissonKey, 77, 120_000);
  });

  test("a Redisson fair lock's page counts its queued waiters and claims no figure of failed attempts, which its clients never leave", async ({ page, signIn }) => {
    await signIn("viewer");
    const resource = unique("fair");
    const redisson = new RedissonWriter(nodes[0]!);
    await redisson.fairLock(resource, 1, 120_000);
    await redisson.fairLock(resource, 2, 120_000);
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await expect(page.locator(".detail-grid")).toContainText("1 waiting in the library's queue");
    await expect(page.getByText("Failed attempts are not visible for this lock")).toBeVisible();
    await expect(page.getByText(/No failed attempts in the last/)).toHaveCount(0);
    await expect(page.getByRole("img", { name: /Failed acquisition attempts per 10 seconds/ })).toHaveCount(0);
    await nodes[0]!.del(resource, redissonPrefixName("redisson_lock_queue", resource), redissonPrefixName("redisson_lock_timeout", resource));
  });

  test("a lock on one node is held, single-instance, and counted as held", async ({ page, signIn }) => {
    await signIn("viewer");
    const resource = unique("single");
    await page.goto("/");
    const counts = page.getByRole("list", { name: "Live counts" }).or(page.locator(".locks-counts"));
    const heldCount = async () => Number((await counts.locator("div", { hasText: "locks held" }).locator("dd").innerText()).replaceAll(",", ""));
    await expect(page.getByRole("status", { name: "Live connection" })).toContainText(/live|degraded/);
    await nodes[2]!.set(resource, "redis-py-token", "PX", 120_000);
    const row = page.getByRole("row", { name: resource });
    await expect(row.getByText("held", { exact: true })).toBeVisible();
    await expect(row).toContainText("single");
    // The count is every lock the table lists as held (or past its TTL), this one among them. (Not "one more than
    // before": locks an earlier test released may still be leaving the list when the page opens.)
    const heldRows = page.getByRole("row").filter({ has: page.getByText(/^(held|elapsed)$/) });
    await expect.poll(async () => (await heldCount()) - (await heldRows.count())).toBe(0);
    await nodes[2]!.del(resource);
  });

  test("each node's TTL on a lock's page counts down between two reads of the page, as the TTL above it does", async ({ page, signIn }) => {
    await signIn("viewer");
    const resource = unique("node-ttl");
    await Promise.all(nodes.map((n) => n.set(resource, "redis-py-token", "PX", 120_000)));
    // The page's first read only: later reads get the same answer, so nothing but the page's clock moves the TTLs.
    let first: { status: number; body: string } | null = null;
    await page.route(`**/api/locks/${encodeURIComponent(resource)}`, async (route) => {
      if (first) return route.fulfill({ status: first.status, body: first.body, contentType: "application/json" });
      const answer = await route.fetch();
      first = { status: answer.status(), body: await answer.text() };
      return route.fulfill({ response: answer, body: first.body });
    });
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    const cell = page.getByRole("row", { name: "node-0" }).getByRole("cell").nth(2);
    await expect(cell).toHaveText(/^\d+(\.\d+)? s$|^\d+ min \d+ s$/);
    const seconds = async () => {
      const text = await cell.innerText();
      const m = /^(?:(\d+) min )?(\d+(?:\.\d+)?) s$/.exec(text.trim());
      return m ? Number(m[1] ?? 0) * 60 + Number(m[2]) : Number.NaN;
    };
    const before = await seconds();
    await page.waitForTimeout(2_500);
    expect(before - (await seconds())).toBeGreaterThanOrEqual(1.5);
    await Promise.all(nodes.map((n) => n.del(resource)));
  });

  test("a semaphore holding a permit its library counts as dead says so in the table, in full", async ({ page, signIn }) => {
    await signIn("viewer");
    const resource = `semaphore:${unique("stale")}`;
    const now = Date.now();
    // One permit taken now, one five minutes ago with a two-minute timeout (the key's TTL): dead in the library's eyes.
    await nodes[1]!.multi().zadd(resource, now - 300_000, "dead-permit", now, "live-permit").pexpire(resource, 120_000).exec();
    await page.goto("/");
    const cell = page.getByRole("row", { name: resource }).locator("td.col-state");
    await expect(cell).toContainText("held");
    await expect(cell).toContainText("⚠ stale");
    await expect(cell).toHaveAttribute("title", /permits its library already counts as dead/);
    // Not cut off by the narrow column.
    expect(await cell.evaluate((el) => el.scrollWidth <= el.clientWidth)).toBe(true);
    await nodes[1]!.del(resource);
  });

  test("a lock that never expires carries the no-TTL warning", async ({ page, signIn }) => {
    await signIn("viewer");
    const resource = unique("no-ttl");
    await nodes[0]!.setnx(resource, "crashed-before-expire");
    await page.goto("/");
    const row = page.getByRole("row", { name: resource });
    await expect(row).toContainText("no TTL");
    await expect(row.locator(".col-ttl")).toContainText("never expires");
    await row.getByRole("link", { name: resource }).click();
    await expect(page.getByRole("note").filter({ hasText: "never expires by itself" })).toBeVisible();
    await nodes[0]!.del(resource);
  });

  test("the force-release dialog says a foreign holder is not told", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("foreign");
    await Promise.all(nodes.map((n) => n.set(resource, "node-redlock-token-0f3a", "PX", 120_000)));
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    // A foreign client's failed attempts leave no trace: the page does not claim there were none.
    await expect(page.getByText("Failed attempts are not visible for this lock")).toBeVisible();
    await expect(page.getByText(/No failed attempts/)).toHaveCount(0);
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    const note = dialog.getByRole("note", { name: "Who will be told" });
    await expect(note).toContainText("The holder is not told");
    await expect(note).toContainText("keeps working");
    await expect(dialog).not.toContainText("aborts at once");
    await dialog.getByLabel("Reason").fill("foreign holder stuck");
    await dialog.getByRole("button", { name: "Release" }).click();
    await expect(dialog.getByRole("status")).toContainText("The holder was not told: if it still runs");
    await dialog.getByRole("button", { name: "Close" }).click();
  });

  test("the force-release dialog of a semaphore says which nodes hold the permit chosen", async ({ page, signIn }) => {
    await signIn("operator");
    const name = `e2e-${randomBytes(3).toString("hex")}`;
    const permits = [0, 1, 2].map(() => new Semaphore(nodes[0]!, name, 4, { lockTimeout: 120_000, acquireTimeout: 1_000, refreshInterval: 0 }));
    for (const p of permits) await p.acquire();
    const resource = `semaphore:${name}`;
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await dialog.getByLabel("Holder to release").selectOption(permits[1]!.identifier);
    const nodeList = dialog.getByRole("list", { name: "Nodes" });
    await expect(nodeList).toContainText("node-0: holds it, among other holders");
    await expect(nodeList).not.toContainText("holds another value");
    await dialog.getByLabel("Reason").fill("one worker stuck");
    await dialog.getByRole("button", { name: "Release" }).click();
    await expect(dialog.getByRole("status")).toContainText("released", { ignoreCase: true });
    expect(await nodes[0]!.zscore(resource, permits[1]!.identifier)).toBeNull();
    await dialog.getByRole("button", { name: "Close" }).click();
    await Promise.all([permits[0]!.release(), permits[2]!.release()]);
  });

  test("a semaphore's dialog says so when the permit chosen is given back, without naming the others as one foreign value", async ({ page, signIn }) => {
    await signIn("operator");
    const name = `e2e-${randomBytes(3).toString("hex")}`;
    const permits = [0, 1, 2].map(() => new Semaphore(nodes[0]!, name, 4, { lockTimeout: 120_000, acquireTimeout: 1_000, refreshInterval: 0 }));
    for (const p of permits) await p.acquire();
    const resource = `semaphore:${name}`;
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await dialog.getByLabel("Holder to release").selectOption(permits[1]!.identifier);
    await dialog.getByLabel("Reason").fill("one worker stuck");

    await permits[1]!.release();
    const alert = dialog.getByRole("alert");
    await expect(alert).toContainText("No node has the holder you chose any more");
    await expect(alert).not.toContainText("foreign value");
    await expect(dialog.getByRole("button", { name: "Release" })).toHaveCount(0);
    expect(await nodes[0]!.zcard(resource)).toBe(2);
    await dialog.getByRole("button", { name: "Close" }).click();
    await Promise.all([permits[0]!.release(), permits[2]!.release()]);
  });

  test("a plain lock's dialog shows no TTL left once the lock is released", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = unique("ttl-after");
    await Promise.all(nodes.map((n) => n.set(resource, "ttl-after-token", "PX", 300_000)));
    await page.goto(`/locks/${encodeURIComponent(resource)}`);
    await page.getByRole("button", { name: "Force release" }).click();
    const dialog = page.getByRole("dialog", { name: `Force release ${resource}` });
    await expect(dialog.getByText(/^\d+ s$/)).toBeVisible();
    await dialog.getByLabel("Reason").fill("done with it");
    await dialog.getByRole("button", { name: "Release" }).click();
    await expect(dialog.getByRole("status")).toContainText("The holder was not told: if it still runs");
    await expect(dialog.getByText("none: force-released")).toBeVisible();
    await dialog.getByRole("button", { name: "Close" }).click();
  });

  test("an operator adds a pattern from the page and its locks appear at once", async ({ page, signIn }) => {
    await signIn("operator");
    const resource = `e2e-jobs/${randomBytes(3).toString("hex")}`;
    await nodes[0]!.set(resource, "job-runner-1", "PX", 120_000);
    await page.goto("/");
    await expect(page.getByRole("row", { name: resource })).toHaveCount(0);
    const form = page.getByRole("form", { name: "Change lock patterns" });
    await form.getByLabel("Reason (for the audit log)").fill("the job runner's locks");
    await form.getByLabel("Pattern").fill("e2e-jobs/*");
    await form.getByRole("button", { name: "Add pattern" }).click();
    await expect(page.getByRole("list", { name: "Lock patterns" })).toContainText("e2e-jobs/*");
    await expect(page.getByRole("row", { name: resource })).toContainText("held");

    await page.getByRole("button", { name: "Remove pattern e2e-jobs/*" }).click();
    await expect(page.getByRole("list", { name: "Lock patterns" })).not.toContainText("e2e-jobs/*");
    await expect(page.getByRole("row", { name: resource })).toHaveCount(0);
    await nodes[0]!.del(resource);

    // The audit log has the change, in a lock-pattern change's words (not a release's).
    await page.goto("/audit");
    await expect(page.getByText("Every force release and lock-pattern change")).toBeVisible();
    const change = page.getByRole("table", { name: "Audit entries" }).getByRole("row").filter({ hasText: "the job runner's locks" }).first();
    await expect(change).toContainText("patterns applied");
    await expect(change).not.toContainText("released");
  });

  /** Answers the page's discovery reads with these findings (the console's own scan finds only what is on its nodes at start). */
  async function discoveryAnswers(page: Page, answer: () => { scannedAt: number | null; candidates: Array<{ pattern: string; examples: string[] }> }) {
    await page.route("**/api/discovery", (route) => {
      const { scannedAt, candidates } = answer();
      return route.fulfill({
        json: { scannedKeys: 1_234, complete: scannedAt !== null, scannedAt, serverTime: Date.now(), candidates: candidates.map((c) => ({ ...c, format: "redisson", keys: c.examples.length })), nodes: [] },
      });
    });
  }

  test("discovery says when it last scanned the nodes, or that it has not yet", async ({ page, signIn }) => {
    await signIn("viewer");
    const section = page.getByRole("region", { name: "Lock patterns and discovery" });

    // The console's own scan starts with the console; its answer says when its last full pass ended.
    await expect.poll(async () => ((await (await page.request.get("/api/discovery")).json()) as { scannedAt: number | null }).scannedAt, { timeout: 60_000 }).not.toBeNull();
    const real = (await (await page.request.get("/api/discovery")).json()) as { scannedAt: number; serverTime: number };
    expect(real.serverTime - real.scannedAt).toBeGreaterThanOrEqual(0);
    expect(real.serverTime - real.scannedAt).toBeLessThan(60 * 60_000);
    await page.goto("/");
    await expect(section).toContainText(/Scanned (less than a minute|\d+ min) ago \(a new scan starts 10 minutes after one ends\)\./);

    // A scan that ended 3 minutes ago, then none ended yet.
    let scannedAt: number | null = Date.now() - 3 * 60_000 - 10_000;
    await discoveryAnswers(page, () => ({ scannedAt, candidates: [] }));
    await page.reload();
    await expect(section).toContainText("Scanned 3 min ago");
    scannedAt = null;
    await page.reload();
    await expect(section).toContainText("Not scanned yet: the first scan of every node has not ended.");
    await expect(section).not.toContainText("Scanned");
  });

  test("each family discovery suggests has its own Add pattern button, named for its glob, that adds that glob", async ({ page, signIn, baseURL }) => {
    await signIn("operator");
    const origin = new URL(baseURL ?? "http://127.0.0.1").origin;
    const section = page.getByRole("region", { name: "Lock patterns and discovery" });
    const found = [`e2e-found-${randomBytes(3).toString("hex")}:*`, `e2e-found-${randomBytes(3).toString("hex")}.*`];
    await discoveryAnswers(page, () => ({ scannedAt: Date.now() - 60_000, candidates: found.map((pattern) => ({ pattern, examples: [pattern.replace("*", "a"), pattern.replace("*", "b")] })) }));
    await page.goto("/");
    const table = section.getByRole("table", { name: "Discovered lock keys" });
    // A screen reader lists the buttons by name, out of their rows: each names its glob; the text stays "Add pattern".
    await expect(table.getByRole("button", { name: "Add pattern", exact: true })).toHaveCount(0);
    for (const glob of found) await expect(table.getByRole("button", { name: `Add pattern ${glob}`, exact: true })).toHaveText("Add pattern");

    const read = (await (await page.request.get("/api/patterns")).json()) as { patterns: Array<{ glob: string }> };
    try {
      await page.getByRole("form", { name: "Change lock patterns" }).getByLabel("Reason (for the audit log)").fill("the locks discovery found");
      await table.getByRole("button", { name: `Add pattern ${found[1]!}`, exact: true }).click();
      const list = page.getByRole("list", { name: "Lock patterns" });
      await expect(list).toContainText(found[1]!);
      await expect(list).not.toContainText(found[0]!);
    } finally {
      const now = (await (await page.request.get("/api/patterns")).json()) as { revision: string };
      const restored = await page.request.put("/api/patterns", { data: { patterns: read.patterns, reason: "end of the test", revision: now.revision }, headers: { Origin: origin } });
      expect(restored.status()).toBe(200);
    }
  });

  test("an operator changes a listed pattern's scope from the form, is told when it is listed already, and a refusal goes once the input changes", async ({ page, signIn, baseURL }) => {
    await signIn("operator");
    const origin = new URL(baseURL ?? "http://127.0.0.1").origin;
    const glob = `e2e-scoped-${randomBytes(3).toString("hex")}/*`;
    const read = (await (await page.request.get("/api/patterns")).json()) as { patterns: Array<{ glob: string }> };
    await page.goto("/");
    const list = page.getByRole("list", { name: "Lock patterns" });
    const entry = list.getByRole("listitem").filter({ hasText: glob });
    const form = page.getByRole("form", { name: "Change lock patterns" });
    const panel = page.getByRole("region", { name: "Lock patterns and discovery" });
    try {
      await form.getByLabel("Reason (for the audit log)").fill("report jobs lock on one instance");
      await form.getByLabel("Pattern").fill(glob);
      await form.getByRole("button", { name: "Add pattern" }).click();
      await expect(entry).toHaveCount(1);
      await expect(entry).not.toContainText("single instance");

      // The same glob with another scope changes that entry's scope.
      await form.getByLabel("Pattern").fill(glob);
      await form.getByLabel("Scope").selectOption({ label: "single instance" });
      await expect(panel.getByRole("status")).toContainText(`${glob} is listed (inferred scope): this changes it to single instance.`);
      await form.getByRole("button", { name: "Change scope" }).click();
      await expect(entry).toContainText("single instance");
      await expect(entry).toHaveCount(1);

      // The same glob with the same scope: nothing to change, and the panel says why.
      await form.getByLabel("Pattern").fill(glob);
      await form.getByLabel("Scope").selectOption({ label: "single instance" });
      await expect(panel.getByRole("status")).toContainText(`${glob} is already listed (single instance).`);
      await form.getByRole("button", { name: "Add pattern" }).click();
      await expect(entry).toHaveCount(1);
      await expect(entry).toContainText("single instance");

      // A refused pattern's reason stays only until the operator edits what they were about to send.
      await form.getByLabel("Pattern").fill("fence:*");
      await form.getByLabel("Scope").selectOption({ label: "inferred" });
      await form.getByRole("button", { name: "Add pattern" }).click();
      const refused = panel.getByRole("alert").filter({ hasText: "matches only keys under" });
      await expect(refused).toBeVisible();
      await form.getByLabel("Pattern").fill("fence-jobs:*");
      await expect(refused).toHaveCount(0);
      await expect(list).not.toContainText("fence:*");
    } finally {
      const now = (await (await page.request.get("/api/patterns")).json()) as { revision: string };
      const restored = await page.request.put("/api/patterns", { data: { patterns: read.patterns, reason: "end of the test", revision: now.revision }, headers: { Origin: origin } });
      expect(restored.status()).toBe(200);
    }
  });

  test("while the lock patterns in force have not been read, the panel sends no change, which would replace them all", async ({ page, signIn, baseURL }) => {
    await signIn("operator");
    const origin = new URL(baseURL ?? "http://127.0.0.1").origin;
    const mine = `e2e-unread-${randomBytes(3).toString("hex")}/*`;
    const read = (await (await page.request.get("/api/patterns")).json()) as { patterns: Array<{ glob: string }> };
    // The page's reads of the list fail (a proxy answering for a console that restarts behind it).
    await page.route("**/api/patterns", (route) =>
      route.request().method() === "GET" ? route.fulfill({ status: 502, json: { error: { code: "unavailable", message: "The console is restarting." } } }) : route.continue(),
    );
    await page.goto("/");
    try {
      const form = page.getByRole("form", { name: "Change lock patterns" });
      await expect(page.getByRole("region", { name: "Lock patterns and discovery" }).getByRole("alert")).toContainText("The console is restarting.");
      await form.getByLabel("Reason (for the audit log)").fill("our job runner's locks");
      await form.getByLabel("Pattern").fill(mine);
      const add = form.getByRole("button", { name: "Add pattern" });
      await expect(add).toBeDisabled();
      await expect(add).toHaveAttribute("title", "The lock patterns in force have not been read yet");
      // Nothing was sent: the patterns in force are still every one read before.
      const now = (await (await page.request.get("/api/patterns")).json()) as { patterns: Array<{ glob: string }> };
      expect(now.patterns).toEqual(read.patterns);
    } finally {
      const now = (await (await page.request.get("/api/patterns")).json()) as { patterns: Array<{ glob: string }>; revision: string };
      if (JSON.stringify(now.patterns) !== JSON.stringify(read.patterns)) {
        const restored = await page.request.put("/api/patterns", { data: { patterns: read.patterns, reason: "end of the test", revision: now.revision }, headers: { Origin: origin } });
        expect(restored.status()).toBe(200);
      }
    }
  });

  test("a change made on a list another operator changed meanwhile is refused, and the panel shows the list as it is now", async ({ page, signIn, baseURL }) => {
    await signIn("operator");
    const origin = new URL(baseURL ?? "http://127.0.0.1").origin;
    const [theirs, mine] = ["e2e-other", "e2e-mine"].map((name) => `${name}-${randomBytes(3).toString("hex")}/*`) as [string, string];
    await page.goto("/");
    const list = page.getByRole("list", { name: "Lock patterns" });
    await expect(list).toContainText("lock:*");
    const read = (await (await page.request.get("/api/patterns")).json()) as { patterns: Array<{ glob: string }>; revision: string };
    // This tab's view stays as it was read until it sends its change (its reads until then answer the list before the other change).
    let sent = false;
    await page.route("**/api/patterns", (route) => {
      if (route.request().method() !== "GET") sent = true;
      return route.request().method() === "GET" && !sent ? route.fulfill({ json: read }) : route.continue();
    });
    const other = await page.request.put("/api/patterns", {
      data: { patterns: [...read.patterns, { glob: theirs }], reason: "another operator's change", revision: read.revision },
      headers: { Origin: origin },
    });
    expect(other.status()).toBe(200);
    try {
      const form = page.getByRole("form", { name: "Change lock patterns" });
      await form.getByLabel("Reason (for the audit log)").fill("my change on an old list");
      await form.getByLabel("Pattern").fill(mine);
      await form.getByRole("button", { name: "Add pattern" }).click();
      const refused = page.getByRole("alert").filter({ hasText: "since you read them" });
      await expect(refused).toContainText("nothing changed");
      await expect(list).toContainText(theirs);
      await expect(list).not.toContainText(mine);
    } finally {
      const now = (await (await page.request.get("/api/patterns")).json()) as { revision: string };
      const restored = await page.request.put("/api/patterns", { data: { patterns: read.patterns, reason: "end of the test", revision: now.revision }, headers: { Origin: origin } });
      expect(restored.status()).toBe(200);
    }
  });
});
