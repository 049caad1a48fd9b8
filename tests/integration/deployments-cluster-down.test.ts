import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { setUpConsoleOverCluster, type RedisClusterSet } from "../support/redis-cluster";
import { until } from "../support/wait";

type NodeRow = { id: string; up: boolean };
type HealthBody = { status: string; quorum: { up: number; ok: boolean }; nodes: NodeRow[] };

/**
 * A Redis Cluster that loses a primary with no replica to take over stops serving (cluster_state:fail: every
 * command on a key is refused with CLUSTERDOWN, with full coverage required, Redis's default), though each
 * node still answers PING. The console must say the cluster is down, and say it is back once it serves again.
 */
describe("a Redis Cluster that stops serving", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;

  beforeAll(async () => {
    // (A timeout long enough for a PING that the cluster client first sends to the dead node, then to another.)
    ({ unused, set } = await setUpConsoleOverCluster({ consoleNodeTimeoutMs: 2000, clusterNodeTimeoutMs: 1_000 }));
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  it("is shown down in the health, /metrics and readiness while the cluster refuses commands, and up again once it serves", async () => {
    const health = await import("@/app/api/health/route");
    const ready = await import("@/app/api/ready/route");
    const metrics = await import("@/app/metrics/route");
    const locks = await import("@/app/api/locks/route");
    const read = async () => (await call(health.GET, "GET", "/api/health", { token: null })).body as HealthBody;
    const nodeUp = async () => /^lockscope_node_up\{node="node-0"\} (\d)$/m.exec((await call(metrics.GET, "GET", "/metrics")).body as string)?.[1];
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000);
    const shard = await set.shardOf(8000);
    const key = await set.keyOn((await set.shardOf(100)).primary, "served");
    await set.client().set(key, "holder-served", "PX", 120_000);
    await until("the lock listed", async () => ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Array<{ resource: string; state: string }> }).locks.some((l) => l.resource === key && l.state === "held"));
    expect((await read()).nodes[0]).toMatchObject({ id: "node-0", up: true });

    // The primary of slot 8000 dies and its replica is told never to take over: the cluster marks the slots
    // uncovered and refuses commands on every node.
    await set.direct(shard.replicas[0]!).config("SET", "cluster-replica-no-failover", "yes");
    const primary = set.nodes.find((n) => n.port === shard.primary)!;
    await primary.kill();
    const witness = set.direct((await set.shardOf(100)).primary);
    await until("the cluster refuses commands", async () => /cluster_state:fail/.test(String(await witness.call("CLUSTER", "INFO"))), 30_000, 100);

    const down = await until("the cluster shown down", async () => {
      const body = await read();
      return body.nodes[0]?.up === false ? body : null;
    }, 15_000);
    expect(down).toMatchObject({ status: "down", quorum: { up: 0, ok: false } });
    // And it stays so, whichever node of the cluster answers the console's probe.
    for (let i = 0; i < 5; i++) expect((await read()).nodes[0]?.up).toBe(false);
    expect(await nodeUp()).toBe("0");
    expect((await call(ready.GET, "GET", "/api/ready")).status).toBe(503);

    // Back (empty, without persistence): the cluster serves again, and so says the console.
    await primary.restart();
    // (Each node of the cluster finds its slots covered again on its own, a moment apart: the health probe and the
    // /metrics one may ask different nodes, so each is waited for.)
    await until("the cluster shown up again", async () => (await read()).nodes[0]?.up === true, 30_000);
    await until("lockscope_node_up 1 again", async () => (await nodeUp()) === "1", 30_000);
    await until("ready again", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000);
  }, 120_000);
});
