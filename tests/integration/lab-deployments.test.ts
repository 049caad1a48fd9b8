import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCluster, type TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, useDeployments, VIEWER_TOKEN } from "../support/console";

/** The lab on a console watching two deployments: it runs on one of them, and says which and how many nodes it has. */
describe("the contention lab beside another deployment", () => {
  let orders: TestCluster;
  let cache: TestCluster;

  beforeAll(async () => {
    orders = await setUpConsole({ nodes: 3 });
    cache = await startCluster(1);
    useDeployments([
      { name: "orders", kind: "redlock", urls: orders.urls },
      { name: "cache", kind: "standalone", url: cache.urls[0] },
    ]);
  });
  afterAll(async () => {
    await tearDownConsole(orders);
    await cache?.close();
  });

  it("offers faults on the nodes the lab runs on, not on every deployment's", async () => {
    const health = await call((await import("@/app/api/health/route")).GET, "GET", "/api/health", { token: VIEWER_TOKEN });
    expect((health.body as { nodes: unknown[] }).nodes).toHaveLength(4);
    const runs = await import("@/app/api/demo/runs/route");
    const listed = await call(runs.GET, "GET", "/api/demo/runs", { token: VIEWER_TOKEN });
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    expect((listed.body as { lab: unknown }).lab).toEqual({ deployment: "orders", nodes: 3, faultMode: "connections" });
    // What the page would have offered from the health's four nodes: node-3, which the lab does not have.
    const res = await call(runs.POST, "POST", "/api/demo/runs", { body: { strategy: "redlock", stock: 10, workers: 1, ttlMs: 1000, workMs: 0, fault: { node: 3, kind: "kill", atMs: 0 } } });
    expect(res.status).toBe(422);
    expect((res.body as { error: { message: string } }).error.message).toBe("Invalid body: fault.node: the lab runs on 3 lock nodes (deployment orders); choose a node from 1 to 2 (node 0 holds the stock and cannot be faulted).");
  });
});
