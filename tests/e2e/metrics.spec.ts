import { randomBytes } from "node:crypto";
import type { APIRequestContext } from "@playwright/test";
import type Redis from "ioredis";
import { expect, lockNodeClients, test } from "./fixtures";

/** One sample of the console's /metrics (open here: the e2e console runs without METRICS_TOKEN). */
async function metric(request: APIRequestContext, series: string): Promise<number | null> {
  const response = await request.get("/metrics");
  expect(response.status()).toBe(200);
  const line = (await response.text()).split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? null : Number(line.slice(series.length + 1));
}

/**
 * The series' value once it holds still for a moment: locks an earlier test released or let expire may still be
 * leaving the count when this test starts.
 */
async function settled(request: APIRequestContext, series: string): Promise<number> {
  let last = (await metric(request, series)) ?? 0;
  for (let i = 0; i < 20; i++) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const now = (await metric(request, series)) ?? 0;
    if (now === last) return now;
    last = now;
  }
  return last;
}

test.describe("what Prometheus sees of the console", () => {
  let clients: Redis[] = [];
  test.afterEach(() => {
    for (const c of clients) c.disconnect();
    clients = [];
  });

  test("an open Locks tab is one live stream, and a lock taken on the nodes is counted as held", async ({ page, request, signIn }) => {
    await signIn("viewer");
    const before = (await metric(request, "lockscope_sse_clients")) ?? 0;
    await page.goto("/");
    await expect(page.getByRole("status", { name: "Live connection" })).toHaveText(/live/);
    await expect.poll(() => metric(request, "lockscope_sse_clients")).toBe(before + 1);

    clients = await lockNodeClients(request);
    const heldBefore = await settled(request, 'lockscope_locks_held{state="held"}');
    const resource = `lock:e2e/metrics-${randomBytes(3).toString("hex")}`;
    await Promise.all(clients.map((c) => c.set(resource, `e2e-${resource}`, "PX", 30_000)));
    await expect(page.getByRole("table", { name: "Locks" }).getByRole("row", { name: resource, exact: true })).toBeVisible();
    await expect.poll(() => metric(request, 'lockscope_locks_held{state="held"}')).toBe(heldBefore + 1);
    // The key itself is never a label.
    expect(await (await request.get("/metrics")).text()).not.toContain(resource);

    await Promise.all(clients.map((c) => c.del(resource)));
    await page.close();
    // The server notices the closed tab at once or at the latest on its next heartbeat write.
    await expect.poll(() => metric(request, "lockscope_sse_clients"), { timeout: 40_000 }).toBe(before);
  });
});
