import { describe, expect, it } from "vitest";
import { keySlot } from "@lockscope/redlock";
import { clusterFailovers, parseClusterShards, parseClusterSlots, primaryAddresses, readInSlots, shardOfSlot, topologySignature } from "@/lib/locks/cluster";

/** One node as CLUSTER SHARDS (Redis 7) lists it. */
const node = (id: string, port: number, role: "master" | "replica", health = "online", offset = 100) => [
  "id", id, "port", port, "ip", "127.0.0.1", "endpoint", "127.0.0.1", "role", role, "replication-offset", offset, "health", health,
];
const shard = (slots: number[], ...nodes: unknown[][]) => ["slots", slots, "nodes", nodes];

describe("a cluster's topology", () => {
  const before = parseClusterShards([
    shard([0, 5460], node("a", 7000, "master"), node("a1", 7003, "replica")),
    shard([5461, 10922], node("b", 7001, "master"), node("b1", 7004, "replica", "online", 90)),
    shard([10923, 16383], node("c", 7002, "master"), node("c1", 7005, "replica")),
  ]);

  it("reads CLUSTER SHARDS: the primaries to watch, the slot's shard, its replicas and their offsets", () => {
    expect(primaryAddresses(before)).toEqual(["127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"]);
    const s = shardOfSlot(before, 6000);
    expect(s?.primary?.address).toBe("127.0.0.1:7001");
    expect(s?.replicas).toEqual([{ id: "b1", host: "127.0.0.1", port: 7004, address: "127.0.0.1:7004", role: "replica", health: "online", offset: 90 }]);
    // A primary without slots (just added) is not watched yet.
    expect(primaryAddresses(parseClusterShards([shard([], node("d", 7006, "master"))]))).toEqual([]);
    expect(parseClusterShards("not a reply")).toEqual([]);
  });

  it("takes a node's TLS port when the console connects with TLS and the node lists both, its plain port otherwise", () => {
    const both = [shard([0, 16383], ["id", "a", "port", 7000, "tls-port", 17000, "ip", "127.0.0.1", "role", "master", "health", "online"])];
    expect(primaryAddresses(parseClusterShards(both, { tls: true }))).toEqual(["127.0.0.1:17000"]);
    expect(primaryAddresses(parseClusterShards(both))).toEqual(["127.0.0.1:7000"]);
    // A node on TLS alone lists only its TLS port; one on plain TCP alone only its port.
    const tlsOnly = [shard([0, 16383], ["id", "a", "tls-port", 17000, "ip", "127.0.0.1", "role", "master", "health", "online"])];
    expect(primaryAddresses(parseClusterShards(tlsOnly))).toEqual(["127.0.0.1:17000"]);
    expect(primaryAddresses(parseClusterShards([shard([0, 16383], node("a", 7000, "master"))], { tls: true }))).toEqual(["127.0.0.1:7000"]);
  });

  it("names a node by its preferred endpoint (a host name where the cluster prefers them), by its IP address where that is unknown", () => {
    const named = (endpoint: string) => [shard([0, 16383], ["id", "a", "port", 7000, "ip", "10.0.0.5", "endpoint", endpoint, "hostname", "redis-0.redis", "role", "master", "health", "online"])];
    expect(primaryAddresses(parseClusterShards(named("redis-0.redis")))).toEqual(["redis-0.redis:7000"]);
    expect(primaryAddresses(parseClusterShards(named("?")))).toEqual(["10.0.0.5:7000"]);
    expect(primaryAddresses(parseClusterShards(named("10.0.0.5")))).toEqual(["10.0.0.5:7000"]);
  });

  it("reads CLUSTER SLOTS where CLUSTER SHARDS is refused: ranges grouped by primary, its replicas, no health or offsets known", () => {
    const shards = parseClusterSlots([
      [0, 100, ["127.0.0.1", 7000, "a"], ["127.0.0.1", 7003, "a1"]],
      [5461, 10922, ["127.0.0.1", 7001, "b"], ["127.0.0.1", 7004, "b1"]],
      // A primary serving two ranges is one shard; a member whose endpoint is unknown ("?") is left out.
      [101, 5460, ["127.0.0.1", 7000, "a"], ["127.0.0.1", 7003, "a1"], ["?", 7009, "x1"]],
      [10923, 16383, ["::1", 7002, "c"]],
      ["not", "a range"],
    ]);
    expect(primaryAddresses(shards)).toEqual(["127.0.0.1:7000", "127.0.0.1:7001", "[::1]:7002"]);
    expect(shardOfSlot(shards, 3000)).toMatchObject({ slots: [[0, 100], [101, 5460]], primary: { id: "a", role: "primary", health: "online" }, replicas: [{ id: "a1", address: "127.0.0.1:7003", role: "replica" }] });
    expect(shardOfSlot(shards, 3000)?.replicas).toHaveLength(1);
    expect(Number.isNaN(shardOfSlot(shards, 6000)?.replicas[0]?.offset)).toBe(true);
    expect(parseClusterSlots("not a reply")).toEqual([]);
    // The failover comparison works on what it gives: b1 now serves b's slots.
    const after = parseClusterSlots([[5461, 10922, ["127.0.0.1", 7004, "b1"]]]);
    expect(clusterFailovers(shards, after)).toMatchObject([{ from: { id: "b" }, to: { id: "b1" }, slots: [[5461, 10922]] }]);
  });

  it("tells a failover (a replica now serves its primary's slots) from a resharding (slots moved between primaries)", () => {
    const failedOver = parseClusterShards([
      shard([0, 5460], node("a", 7000, "master"), node("a1", 7003, "replica")),
      // The failed primary stays listed until forgotten: the healthy one serves.
      shard([5461, 10922], node("b", 7001, "master", "failed"), node("b1", 7004, "master")),
      shard([10923, 16383], node("c", 7002, "master"), node("c1", 7005, "replica")),
    ]);
    expect(primaryAddresses(failedOver)).toEqual(["127.0.0.1:7000", "127.0.0.1:7002", "127.0.0.1:7004"]);
    const failovers = clusterFailovers(before, failedOver);
    expect(failovers.map((f) => [f.from.address, f.to.address, f.slots])).toEqual([["127.0.0.1:7001", "127.0.0.1:7004", [[5461, 10922]]]]);
    const resharded = parseClusterShards([
      shard([1, 5460], node("a", 7000, "master"), node("a1", 7003, "replica")),
      shard([0, 0, 5461, 10922], node("b", 7001, "master"), node("b1", 7004, "replica")),
      shard([10923, 16383], node("c", 7002, "master"), node("c1", 7005, "replica")),
    ]);
    expect(clusterFailovers(before, resharded)).toEqual([]);
  });

  it("tells a primary back at a new address with its id as a change, and shards listed in another order as none", () => {
    const moved = parseClusterShards([
      shard([0, 5460], node("a", 7000, "master"), node("a1", 7003, "replica")),
      shard([5461, 10922], node("b", 7101, "master"), node("b1", 7004, "replica", "online", 90)),
      shard([10923, 16383], node("c", 7002, "master"), node("c1", 7005, "replica")),
    ]);
    expect(topologySignature(moved)).not.toBe(topologySignature(before));
    expect(clusterFailovers(before, moved)).toEqual([]);
    const reordered = parseClusterShards([
      shard([10923, 16383], node("c", 7002, "master"), node("c1", 7005, "replica")),
      shard([0, 5460], node("a", 7000, "master"), node("a1", 7003, "replica")),
      shard([5461, 10922], node("b", 7001, "master"), node("b1", 7004, "replica", "online", 90)),
    ]);
    expect(topologySignature(reordered)).toBe(topologySignature(before));
    // A primary failed (its health), or slots moved, is a change.
    const failed = parseClusterShards([
      shard([0, 5460], node("a", 7000, "master", "failed"), node("a1", 7003, "replica")),
      shard([5461, 10922], node("b", 7001, "master"), node("b1", 7004, "replica", "online", 90)),
      shard([10923, 16383], node("c", 7002, "master"), node("c1", 7005, "replica")),
    ]);
    expect(topologySignature(failed)).not.toBe(topologySignature(before));
  });

  it("reads keys one hash slot at a time and returns the readings in the keys' order", async () => {
    const keys = ["lock:{a}1", "lock:b", "lock:{a}2", "lock:c"];
    const batches: string[][] = [];
    const readings = await readInSlots(keys, (batch) => {
      batches.push(batch);
      return Promise.resolve(batch.map((k) => `read ${k}`));
    });
    expect(readings).toEqual(keys.map((k) => `read ${k}`));
    for (const batch of batches) expect(new Set(batch.map(keySlot)).size).toBe(1);
    expect(batches).toContainEqual(["lock:{a}1", "lock:{a}2"]);
  });
});
