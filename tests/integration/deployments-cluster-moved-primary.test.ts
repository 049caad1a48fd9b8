import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { setUpConsoleOverCluster, type RedisClusterSet } from "../support/redis-cluster";
import { until } from "../support/wait";

type LockBody = { resource: string; state: string };

/**
 * A Redis Cluster primary that comes back at another address with the same node id (a container restarted with
 * its volume, given a new IP): no failover happens, its slots stay its own, and only its address changes. The
 * console must follow it there, or every lock taken on it from then on goes unseen.
 */
describe("a Redis Cluster primary that comes back at a new address", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;

  beforeAll(async () => {
    // A node timeout long enough that the primary's replica never takes over while it moves.
    ({ unused, set } = await setUpConsoleOverCluster({ consoleNodeTimeoutMs: 2000, clusterNodeTimeoutMs: 60_000 }));
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  it("shows the locks taken on it after the move, as it did before", async () => {
    const ready = await import("@/app/api/ready/route");
    const lockRoute = await import("@/app/api/locks/[resource]/route");
    const stateOf = async (resource: string) => {
      const res = await call(lockRoute.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } });
      return res.status === 200 ? (res.body as LockBody).state : null;
    };
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000);
    const { primary } = await set.shardOf(100);
    const node = set.nodes.find((n) => n.port === primary)!;
    const client = set.client();
    const before = await set.keyOn(primary, "before-move");
    await client.set(before, "holder-before", "PX", 120_000);
    await until("the lock taken before the move shown held", async () => (await stateOf(before)) === "held", 15_000);

    const moved = await node.relocate();
    const witness = set.direct(set.nodes.find((n) => n !== node && n.port !== moved)!.port);
    await until("the cluster names the primary at its new address", async () => (await set.shardOf(100)).primary === moved, 30_000, 100);
    await until("the cluster serves again", async () => /cluster_state:ok/.test(String(await witness.call("CLUSTER", "INFO"))), 30_000, 100);

    // A lock taken on it now, through any cluster client: the console hears of it from the node's new address.
    const after = await set.keyOn(moved, "after-move");
    await until("the lock taken", async () => (await client.set(after, "holder-after", "PX", 120_000).catch(() => null)) === "OK", 15_000, 100);
    await until("the lock taken after the move shown held", async () => (await stateOf(after)) === "held", 15_000);
    expect(await stateOf(after)).toBe("held");
  }, 150_000);
});
