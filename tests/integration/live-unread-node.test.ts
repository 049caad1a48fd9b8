import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/**
 * A lock's page for a key the console has not seen: "no node holds it" is true only of nodes it has read. Here the
 * node answers but its watcher cannot come up (PSUBSCRIBE renamed away), and the lock is held there all along.
 */
describe("a lock's page while a node has not been read", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1, extraArgs: ["--rename-command", "PSUBSCRIBE", ""] });
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("says the node has not been read, with 503, rather than that no node holds the lock", async () => {
    await cluster.client(0).set("lock:unread", "holder-1", "PX", 600_000);
    (await import("@/server/live")).startLive();
    const route = await import("@/app/api/locks/[resource]/route");
    const res = await call(route.GET, "GET", "/api/locks/lock%3Aunread", { token: VIEWER_TOKEN, params: { resource: "lock:unread" } });
    const body = res.body as { error: { code: string; message: string; details?: { unread?: string[] } } };
    expect([res.status, body.error.code]).toEqual([503, "unavailable"]);
    expect(body.error.message).toMatch(/^No lock node has been read yet \(node-0: see \/api\/health for why\), so whether `lock:unread` is held cannot be said now/);
    expect(body.error.details?.unread).toEqual(["node-0"]);
  });
});
