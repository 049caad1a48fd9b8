import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keySlot } from "@lockscope/redlock";
import { primaryAddresses, slotIn } from "@/lib/locks/cluster";
import { ClusterTopology, clusterDiscovery } from "@/server/deployments/cluster";
import { Discovery } from "@/server/discovery";
import { startRedisCluster, type RedisClusterSet } from "../support/redis-cluster";
import { until } from "../support/wait";

/**
 * Discovery walks a cluster's primaries one after another. A failover in the middle of a pass changes which
 * primaries there are: a pass that then reads complete must still have read every key of every shard.
 */
describe("lock discovery on a cluster whose primary fails over mid-pass", () => {
  let set: RedisClusterSet;

  beforeAll(async () => {
    set = await startRedisCluster({ nodeTimeoutMs: 2_000 });
  }, 60_000);
  afterAll(async () => {
    await set?.close();
  });

  it("reads a pass complete only when every key of every shard was scanned", async () => {
    const client = set.client();
    const topology = new ClusterTopology(client);
    try {
      expect(await topology.known(10_000)).toBe(true);
      const locks = Array.from({ length: 600 }, (_, i) => `app:lock:order-${i}`);
      const others = Array.from({ length: 3_000 }, (_, i) => `cache:item-${i}`);
      for (let i = 0; i < locks.length; i += 100) await Promise.all(locks.slice(i, i + 100).map((key) => client.set(key, "0123456789abcdef0123456789abcdef", "PX", 600_000)));
      for (let i = 0; i < others.length; i += 200) await Promise.all(others.slice(i, i + 200).map((key) => client.set(key, "cached")));

      // The primary to fail over: the first one walked. Once its replica is promoted, the primary at its place in
      // the walk (primaries in address order) is either that replica or another primary, and a SCAN cursor means
      // nothing on another node (each hashes keys with its own seed).
      const first = primaryAddresses(topology.shards)[0];
      const shard = topology.shards.find((s) => s.primary?.address === first);
      const replica = shard?.replicas[0];
      expect(shard && replica).toBeTruthy();
      if (!shard || !replica || !first) return;
      const target = { address: first, replica, slots: shard.slots };
      const keysOnTarget = [...locks, ...others].filter((key) => slotIn(target.slots, keySlot(key))).length;

      const walk = clusterDiscovery(client, topology);
      let seenOnTarget = 0;
      let failedOver = false;
      const discovery = new Discovery(
        [
          {
            id: "cluster",
            client,
            read: walk.read,
            scan: async (cursor, count) => {
              // Halfway through the target's keys, its replica takes over (a manual failover: no key is lost).
              if (!failedOver && seenOnTarget >= keysOnTarget / 2) {
                failedOver = true;
                await set.direct(target.replica.port).call("CLUSTER", "FAILOVER");
                await until("the topology shows the replica promoted", async () => {
                  await topology.read();
                  const now = primaryAddresses(topology.shards);
                  return now.includes(target.replica.address) && !now.includes(target.address);
                }, 20_000, 100);
              }
              const [next, keys] = await walk.scan(cursor, count);
              seenOnTarget += keys.filter((key) => slotIn(target.slots, keySlot(key))).length;
              return [next, keys];
            },
          },
        ],
        { patterns: () => ["lock:*"], count: 20, stepsPerSecond: 1_000, retryMs: 50 },
      );
      for (let pass = 0; pass < 3 && !discovery.result().complete; pass++) await discovery.runPass();

      expect(failedOver).toBe(true);
      const result = discovery.result();
      expect(result.complete).toBe(true);
      expect(result.candidates.map((c) => [c.pattern, c.keys])).toEqual([["app:lock:*", locks.length]]);
    } finally {
      topology.stop();
    }
  }, 120_000);
});
