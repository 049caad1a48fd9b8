import { randomBytes } from "node:crypto";
import type Redis from "ioredis";
import { encodeLockValue } from "@lockscope/redlock";
import { Redlock } from "@lockscope/redlock";
import { expect, lockNodeClients, test } from "./fixtures";
import { deleteMatching } from "./scene";

const unique = (name: string) => `lock:e2e/${name}-${randomBytes(3).toString("hex")}`;

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
    await expect(page.getByText("Not visible for this lock")).toBeVisible();
    await expect(page.getByRole("img", { name: /Failed acquisition attempts per 10 seconds/ })).toHaveCount(0);

    await Promise.all(clients.map((c) => c.del(resource)));
    await expect(timeline).toContainText("released");
    await expect(page.getByText("released", { exact: true }).first()).toBeVisible();
  });

  test("a lock whose key is too long to open is listed without a link, and says why", async ({ page, request, signIn }) => {
    await signIn("viewer");
    clients = await lockNodeClients(request);
    await page.goto("/");
    const table = page.getByRole("table", { name: "Locks" });
    await expect(table).toBeVisible({ timeout: 30_000 });
    const resource = unique(`long-${"x".repeat(1_100)}`);
    const short = unique("short-beside-long");
    try {
      await setOnAll(clients, resource, "long-key-holder", 60_000);
      await setOnAll(clients, short, "short-key-holder", 60_000);
      const row = table.getByRole("row", { name: resource, exact: true });
      await expect(row).toContainText("long-key-holder");
      await expect(row.getByRole("link")).toHaveCount(0);
      await expect(row.locator(".unlinked")).toHaveAttribute("title", new RegExp(`This key has ${resource.length.toLocaleString("en-US")} characters: a lock key longer than 1,024 characters is listed but cannot be opened`));
      await expect(table.getByRole("row", { name: short, exact: true }).getByRole("link", { name: short })).toBeVisible();
      const api = await page.request.get(`/api/locks/${encodeURIComponent(resource)}`);
      expect(api.status()).toBe(400);
      expect(((await api.json()) as { error: { message: string } }).error.message).toContain("a lock key longer than 1,024 characters is listed but cannot be opened, released or looked up here");
    } finally {
      await Promise.all(clients.map((c) => c.del(resource, short)));
    }
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
    await expect(page.getByText(/\d+ locks$/)).toHaveText(/^(3[0-9]{3}) locks$/, { timeout: 30_000 });
    // Virtualized: only what fits on screen is in the DOM.
    expect(await table.getByRole("row").count()).toBeLessThan(120);
    await expect(table.getByRole("row", { name: `${prefix}/a-hot-sku-0`, exact: true })).toBeVisible();
    await expect(table.getByRole("row", { name: `${prefix}/a-split-brain`, exact: true })).toContainText("partial");
    await expect(table.getByRole("row", { name: `${prefix}/a-hot-sku-0`, exact: true })).toContainText(/\d+\/min/, { timeout: 20_000 });
    await page.getByLabel("Filter locks").fill("order-00042");
    await expect(page.getByText(/^1 of \d+ locks$/)).toBeVisible();
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
