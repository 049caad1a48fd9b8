import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keySlot } from "@lockscope/redlock";
import type * as LiveModule from "@/server/live";
import { setUpConsole, tearDownConsole, useDeployments } from "../support/console";
import type { TestCluster } from "../support/redis";
import { startRedisCluster, type RedisClusterSet } from "../support/redis-cluster";
import { until } from "../support/wait";

/**
 * FLUSHALL, FLUSHDB and SWAPDB send no keyspace notification: the console notices them at its periodic check of
 * each node (every 5 s) and reconciles the node, so the locks they removed end (released, not left held until
 * their TTL and then shown expired, nor held forever without one). Two deployments: a Redlock set of three
 * nodes (`orders`) and a Redis Cluster (`sessions`), where one primary is flushed alone.
 */
describe("a lock node flushed", () => {
  let orders: TestCluster;
  let sessions: RedisClusterSet;
  let clients: Redis[];
  let live: typeof LiveModule;
  const shown = (resource: string, deployment = "orders") => live.getLockStore().get(resource, Date.now(), deployment);
  const tokens = (resource: string) => shown(resource)?.nodes.map((n) => n.token);

  beforeAll(async () => {
    orders = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: "lock:*" } });
    sessions = await startRedisCluster({ nodeTimeoutMs: 2_000 });
    useDeployments([
      { name: "orders", kind: "redlock", urls: orders.urls },
      { name: "sessions", kind: "cluster", seeds: sessions.urls.slice(0, 2) },
    ]);
    clients = orders.clients();
    live = await import("@/server/live");
    live.startLive();
    expect(await live.waitUntilReconciled(30_000)).toBe(true);
  }, 90_000);

  afterAll(async () => {
    await tearDownConsole(orders);
    await sessions?.close();
  });

  it("ends the locks the flushes removed, and keeps them as held by the nodes that still hold them", async () => {
    await Promise.all(clients.map((c) => c.set("lock:ttl", "ttl-token", "PX", 120_000)));
    await Promise.all(clients.map((c) => c.set("lock:forever", "forever-token")));
    await clients[0]!.set("lock:solo", "solo-token");
    await until("the locks held", () => shown("lock:ttl")?.quorumHeld === 3 && shown("lock:forever")?.quorumHeld === 3 && shown("lock:solo")?.quorumHeld === 1, 10_000);

    await clients[0]!.flushall();
    const ttl = await until(
      "node 0's keys gone from the view",
      () => {
        const lock = shown("lock:ttl");
        return lock?.quorumHeld === 2 && shown("lock:forever")?.quorumHeld === 2 && shown("lock:solo")?.state === "released" ? lock : null;
      },
      20_000,
    );
    expect(ttl.state).toBe("held");
    expect(tokens("lock:ttl")).toEqual([null, "ttl-token", "ttl-token"]);
    expect(shown("lock:forever")).toMatchObject({ state: "held" });
    expect(tokens("lock:forever")).toEqual([null, "forever-token", "forever-token"]);

    // Node 1's counts reset first (the flush is counted from 0 again); node 2's database 0 swapped with an empty one.
    await clients[1]!.config("RESETSTAT");
    await clients[1]!.flushdb();
    await clients[2]!.swapdb(0, 1);
    // (Each node's flush is noticed at its own 5 s check: until both are, the locks read partial.)
    const ended = (resource: string) => !["held", "partial"].includes(shown(resource)?.state ?? "held");
    await until("both locks ended", () => ended("lock:ttl") && ended("lock:forever"), 20_000);
    // Gone long before the TTL: released, not expired.
    expect(shown("lock:ttl")).toMatchObject({ state: "released", quorumHeld: 0 });
    expect(shown("lock:forever")).toMatchObject({ state: "released", quorumHeld: 0 });

    // Node 1 has run one FLUSHDB, and the console has counted it (it ended the locks above): its counts reset
    // and one FLUSHDB again leave that count as it was.
    await Promise.all(clients.map((c) => c.set("lock:again", "again-token")));
    await until("lock:again held on every node", () => shown("lock:again")?.quorumHeld === 3, 10_000);
    await clients[1]!.config("RESETSTAT");
    await clients[1]!.flushdb();
    await until("node 1's flush noticed", () => shown("lock:again")?.quorumHeld === 2, 20_000);
    expect(tokens("lock:again")).toEqual(["again-token", null, "again-token"]);
  });

  it("on a cluster, ends the locks of the primary flushed, and only those", async () => {
    const cluster = sessions.client();
    /** A lock key in the slots of the primary on `port`: the same name with the first tag that lands there. */
    const keyOn = async (port: number, name: string) => {
      for (let i = 0; ; i++) {
        const key = `lock:{${name}-${i}}`;
        if ((await sessions.shardOf(keySlot(key))).primary === port) return key;
      }
    };
    const primaries = [...new Set(await Promise.all([0, 8000, 15000].map(async (slot) => (await sessions.shardOf(slot)).primary)))];
    const [flushed, kept] = await Promise.all([keyOn(primaries[0]!, "flushed"), keyOn(primaries[1]!, "kept")]);
    await cluster.set(flushed, "flushed-token");
    await cluster.set(kept, "kept-token", "PX", 120_000);
    await until("both cluster locks held", () => shown(flushed, "sessions")?.state === "held" && shown(kept, "sessions")?.state === "held", 10_000);

    const primary = new Redis(primaries[0]!, "127.0.0.1", { maxRetriesPerRequest: 1 });
    try {
      await primary.flushall();
    } finally {
      primary.disconnect();
    }
    await until("the flushed primary's lock ended", () => shown(flushed, "sessions")?.state === "released", 20_000);
    expect(shown(kept, "sessions")).toMatchObject({ state: "held", token: "kept-token" });
  });
});
