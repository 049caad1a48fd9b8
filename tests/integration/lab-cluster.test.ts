import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { setUpConsoleOverCluster, type RedisClusterSet } from "../support/redis-cluster";

/** The contention lab on a console that watches a Redis Cluster alone: refused, saying so, whatever the settings. */
describe("the contention lab on a Redis Cluster", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;

  beforeAll(async () => {
    ({ unused, set } = await setUpConsoleOverCluster({ consoleNodeTimeoutMs: 300, clusterNodeTimeoutMs: 2_000 }));
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  it("refuses a run because the console watches a Redis Cluster, not because of the run's fault or a Sentinel, TLS or password file", async () => {
    const runs = await import("@/app/api/demo/runs/route");
    const settings = { strategy: "redlock", stock: 30, workers: 3, ttlMs: 500, workMs: 1 };
    for (const body of [settings, { ...settings, fault: { node: 1, kind: "kill", atMs: 0 } }]) {
      const res = await call(runs.POST, "POST", "/api/demo/runs", { body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect((res.body as { error: { message: string } }).error.message).toBe(
        "The lab runs on independent lock nodes (a Redlock set or a standalone instance); this console watches a Redis Cluster.",
      );
    }
  });

  it("answers the list and a run's page with a refusal that says the lab does not run on a Cluster, not 503 \"try later\"", async () => {
    const runs = await import("@/app/api/demo/runs/route");
    const one = await import("@/app/api/demo/runs/[id]/route");
    const message = "The lab runs on independent lock nodes (a Redlock set or a standalone instance); this console watches a Redis Cluster.";
    const answers = [
      await call(runs.GET, "GET", "/api/demo/runs"),
      await call(one.GET, "GET", "/api/demo/runs/rmx1wokthvsb3i5", { params: { id: "rmx1wokthvsb3i5" } }),
      await call(one.DELETE, "DELETE", "/api/demo/runs/rmx1wokthvsb3i5", { params: { id: "rmx1wokthvsb3i5" } }),
    ];
    for (const res of answers) {
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      expect(res.body).toEqual({ error: { code: "unprocessable", message } });
      expect(res.headers.get("retry-after")).toBeNull();
    }
  });
});
