import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keySlot } from "@lockscope/redlock";
import type { LockDetail } from "@/lib/locks/types";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { startRedisCluster, type RedisClusterSet } from "../support/redis-cluster";
import { until } from "../support/wait";

type Listed = { resource: string; state: string; token: string | null };

/**
 * A Redis Cluster whose nodes announce host names and prefer them as their endpoints (as on Kubernetes, where
 * pods' addresses change and their names do not): CLUSTER SLOTS, which the cluster client follows, names the nodes
 * by host name, and the console must reach and name every primary the same way.
 */
describe("a managed Redis Cluster whose nodes are reached by host name", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;
  let cluster: InstanceType<typeof Redis.Cluster>;
  const keyOn = (port: number, name: string) => set.keyOn(port, name);

  beforeAll(async () => {
    unused = await setUpConsole({ nodes: 0, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "500" } });
    // And managed, as a Kubernetes operator's or a cloud's cluster often is: CONFIG renamed away, the notification
    // flags given at start.
    set = await startRedisCluster({
      nodeTimeoutMs: 2_000,
      extraArgs: ["--cluster-announce-hostname", "localhost", "--cluster-preferred-endpoint-type", "hostname", "--notify-keyspace-events", "KEA", "--rename-command", "CONFIG", ""],
    });
    delete process.env.REDIS_URLS;
    process.env.REDIS_CLUSTER_URLS = set.urls.slice(0, 2).join(",");
    cluster = set.client();
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  it("watches every primary and names each by its host name", async () => {
    const primaries = [...new Set(await Promise.all([0, 8000, 15000].map(async (slot) => (await set.shardOf(slot)).primary)))];
    expect(primaries).toHaveLength(3);
    const keys = await Promise.all(primaries.map((port, i) => keyOn(port, `named-${i}`)));
    for (const key of keys) await cluster.set(key, `holder-${key}`, "PX", 60_000);

    const ready = await import("@/app/api/ready/route");
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000).catch(async (error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify((await call(ready.GET, "GET", "/api/ready")).body)}`);
    });
    const locks = await import("@/app/api/locks/route");
    const heldAs = async (resource: string, token: string) =>
      ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Listed[] }).locks.some((l) => l.resource === resource && l.state === "held" && l.token === token);
    await until("a lock on every primary", async () => (await Promise.all(keys.map((k) => heldAs(k, `holder-${k}`)))).every(Boolean), 30_000);
    // Taken while watched: each primary's notifications.
    const later = await Promise.all(primaries.map((port, i) => keyOn(port, `named-later-${i}`)));
    for (const key of later) await cluster.set(key, `holder-${key}`, "PX", 60_000);
    await until("the later locks", async () => (await Promise.all(later.map((k) => heldAs(k, `holder-${k}`)))).every(Boolean));

    const health = await import("@/app/api/health/route");
    const node = ((await call(health.GET, "GET", "/api/health")).body as { nodes: Array<{ up: boolean; notifications: string; cluster?: { shards: Array<{ primary: string }> } }> }).nodes[0];
    expect(node?.up).toBe(true);
    // CONFIG refused: the notifications were found on by probing every primary.
    expect(node?.notifications).toBe("on");
    for (const port of primaries) expect(await set.direct(port).keys("lockscope:probe:*")).toEqual([]);
    expect(node?.cluster?.shards.map((s) => s.primary).sort()).toEqual(primaries.map((p) => `localhost:${p}`).sort());
    const one = await import("@/app/api/locks/[resource]/route");
    const page = (await call(one.GET, "GET", `/api/locks/${encodeURIComponent(keys[0]!)}`, { token: VIEWER_TOKEN, params: { resource: keys[0]! } })).body as LockDetail;
    expect(page.replication).toMatchObject({ slot: keySlot(keys[0]!), primary: `localhost:${primaries[0]}` });
  });
});
