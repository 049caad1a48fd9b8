import { randomBytes } from "node:crypto";
import type { APIRequestContext } from "@playwright/test";
import type Redis from "ioredis";
import { E2E_VIEWER_TOKEN, expect, lockNodeClients, test } from "./fixtures";

/** One sample of the console's /metrics (open here: the e2e console runs without METRICS_TOKEN). */
async function metric(request: APIRequestContext, series: string): Promise<number | null> {
  const response = await request.get("/metrics");
  expect(response.status()).toBe(200);
  const line = (await response.text()).split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
}

const viewer = { Authorization: `Bearer ${E2E_VIEWER_TOKEN}` };

/**
 * Whether the held count of /metrics is the console's own at one moment (the held locks `GET /api/locks` counts,
 * read just before it), and whether `resource` is held there. Earlier tests' locks keep expiring on the shared
 * console, so a count read before this test's lock was taken may be off by the time it is counted; the console's
 * own list, read alongside, is not.
 */
async function heldCounts(request: APIRequestContext, resource: string): Promise<{ same: boolean; listed: boolean }> {
  const list = await request.get("/api/locks?state=held&limit=1", { headers: viewer });
  expect(list.status()).toBe(200);
  const { total } = (await list.json()) as { total: number };
  const metricHeld = await metric(request, 'lockscope_locks_held{state="held"}');
  const detail = await request.get(`/api/locks/${encodeURIComponent(resource)}`, { headers: viewer });
  const listed = detail.status() === 200 && ((await detail.json()) as { state: string }).state === "held";
  return { same: metricHeld === total, listed };
}

test.describe("what Prometheus sees of the console", () => {
  let clients: Redis[] = [];
  test.afterEach(() => {
    for (const c of clients) c.disconnect();
    clients = [];
  });

  test("an open Locks tab is one live stream, and a lock taken on the nodes is counted as held", async ({ page, request, signIn }) => {
    // The streams of earlier tests' tabs close within a heartbeat (15 s) of their pages, and no other client
    // streams from this console: this tab's is then the only one.
    test.setTimeout(120_000);
    await expect.poll(() => metric(request, "lockscope_sse_clients"), { timeout: 40_000 }).toBe(0);
    await signIn("viewer");
    await page.goto("/");
    await expect(page.getByRole("status", { name: "Live connection" })).toHaveText(/live/);
    await expect.poll(() => metric(request, "lockscope_sse_clients")).toBe(1);

    clients = await lockNodeClients(request);
    const resource = `lock:e2e/metrics-${randomBytes(3).toString("hex")}`;
    await Promise.all(clients.map((c) => c.set(resource, `e2e-${resource}`, "PX", 30_000)));
    await expect(page.getByRole("table", { name: "Locks" }).getByRole("row", { name: resource, exact: true })).toBeVisible();
    // Counted as held: the held count is the console's own, which has this lock held.
    await expect.poll(() => heldCounts(request, resource)).toEqual({ same: true, listed: true });
    // The key itself is never a label.
    expect(await (await request.get("/metrics")).text()).not.toContain(resource);

    await Promise.all(clients.map((c) => c.del(resource)));
    // And no longer counted once it is gone.
    await expect.poll(() => heldCounts(request, resource)).toEqual({ same: true, listed: false });
    await page.close();
    // The server notices the closed tab at once or at the latest on its next heartbeat write.
    await expect.poll(() => metric(request, "lockscope_sse_clients"), { timeout: 40_000 }).toBe(0);
  });
});
