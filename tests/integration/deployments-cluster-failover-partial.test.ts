import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { setUpConsoleOverCluster, type RedisClusterSet } from "../support/redis-cluster";
import { until } from "../support/wait";

type HealthBody = { nodes: Array<{ id: string; unservedSlots?: unknown; watcher: { reconnects: number; gaps: number; up: boolean } }> };
type Detail = { state: string; unreadable?: true; timeline: Array<{ type: string }> };

/**
 * A Redis Cluster that serves the slots it still covers (`cluster-require-full-coverage no`) fails a primary over
 * to its replica: one failover, one gap in the console's watch of the cluster.
 */
describe("a failover on a Redis Cluster that serves the slots it still covers", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;

  beforeAll(async () => {
    ({ unused, set } = await setUpConsoleOverCluster({ consoleNodeTimeoutMs: 2000, clusterNodeTimeoutMs: 1_000, partialCoverage: true }));
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  it("counts one reconnect and one gap for one failover", async () => {
    const health = await import("@/app/api/health/route");
    const ready = await import("@/app/api/ready/route");
    const lockRoute = await import("@/app/api/locks/[resource]/route");
    const watcher = async () => ((await call(health.GET, "GET", "/api/health", { token: null })).body as HealthBody).nodes[0]!;
    const detail = async (resource: string) => (await call(lockRoute.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } })).body as Detail;
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000);
    const shard = await set.shardOf(8000);
    const moved = await set.keyOn(shard.primary, "moved");
    const primary = set.direct(shard.primary);
    await primary.set(moved, "holder-moved", "PX", 120_000);
    expect(await primary.wait(1, 5_000)).toBe(1);
    await until("the lock listed", async () => (await detail(moved)).state === "held");
    const before = (await watcher()).watcher;
    await set.nodes.find((n) => n.port === shard.primary)!.kill();
    await until("the replica promoted and watched", async () => {
      const w = await watcher();
      return w.watcher.up && w.unservedSlots === undefined && (await set.shardOf(8000)).primary !== shard.primary && w.watcher.reconnects > before.reconnects;
    }, 30_000);
    // The lock, on the promoted replica, is read there and followed: its release is seen.
    await until("the lock read on the promoted replica", async () => {
      const d = await detail(moved);
      return d.state === "held" && d.unreadable === undefined && d.timeline.some((t) => t.type === "failover");
    }, 15_000);
    const after = (await watcher()).watcher;
    expect(after.reconnects - before.reconnects).toBe(1);
    expect(after.gaps - before.gaps).toBe(1);
    expect((await detail(moved)).timeline.filter((t) => t.type === "gap")).toHaveLength(1);
    await set.client().del(moved);
    await until("its release followed", async () => (await detail(moved)).state === "released", 15_000);
  }, 120_000);
});
