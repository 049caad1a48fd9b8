import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { startRedisCluster, type RedisClusterSet } from "../support/redis-cluster";
import { until } from "../support/wait";

type HealthBody = { status: string; nodes: Array<{ id: string; up: boolean; clusterNode?: true }> };

/**
 * REDIS_URL naming one node of a Redis Cluster (a standalone deployment where a cluster deployment was meant): the
 * console sees only the keys of the slots that node serves, and must say so rather than look healthy.
 */
describe("a standalone deployment whose URL names a Redis Cluster node", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;

  beforeAll(async () => {
    unused = await setUpConsole({ nodes: 0, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "500" } });
    set = await startRedisCluster({ nodeTimeoutMs: 2_000 });
    delete process.env.REDIS_URLS;
    process.env.REDIS_URL = set.urls[0]!;
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  it("is degraded in the health, the node marked as a cluster node", async () => {
    const { startLive } = await import("@/server/live");
    startLive();
    const health = await import("@/app/api/health/route");
    const body = await until("the node read", async () => {
      const b = (await call(health.GET, "GET", "/api/health", { token: null })).body as HealthBody;
      return b.nodes[0]?.up && b.nodes[0].clusterNode ? b : null;
    }, 20_000);
    expect(body.status).toBe("degraded");
  });
});
