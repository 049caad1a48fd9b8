import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { setUpConsoleOverSentinels, type SentinelSet } from "../support/sentinel";
import { until } from "../support/wait";

type HealthBody = { status: string; nodes: Array<{ up: boolean; sentinels?: { answering: number; total: number } }> };

/**
 * Every sentinel of a Sentinel deployment gone while its primary serves on: the console still reads and releases
 * locks on the primary, but would not hear a failover (nor could it find the primary again after a reconnect), and
 * no failover can happen. The health must say so rather than report the deployment fine.
 */
describe("a Sentinel deployment whose sentinels are all gone", () => {
  let cluster: TestCluster;
  let set: SentinelSet;

  beforeAll(async () => {
    ({ cluster, set } = await setUpConsoleOverSentinels("lockscope-sentinel-unreachable-"));
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(cluster);
    await set?.close();
  });

  it("is degraded in the health, naming how many sentinels answer, while the primary stays up", async () => {
    const { startLive } = await import("@/server/live");
    startLive();
    const health = await import("@/app/api/health/route");
    const read = async () => (await call(health.GET, "GET", "/api/health", { token: null })).body as HealthBody;
    await until("every sentinel answering and the deployment ok", async () => {
      const b = await read();
      return b.status === "ok" && b.nodes[0]?.sentinels?.answering === 3;
    }, 30_000);

    // (The set's close kills the sentinels, and stops the replicas; the primary, the console's node, serves on.)
    await set.close();
    const body = await until("the sentinels seen gone", async () => {
      const b = await read();
      return b.nodes[0]?.sentinels?.answering === 0 ? b : null;
    }, 20_000);
    expect(body.nodes[0]).toMatchObject({ up: true, sentinels: { answering: 0, total: 3 } });
    expect(body.status).toBe("degraded");
  }, 120_000);
});
