import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keySlot } from "@lockscope/redlock";
import { call, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { samples } from "../support/prometheus";
import { setUpConsoleOverCluster, type RedisClusterSet } from "../support/redis-cluster";
import { until } from "../support/wait";

type HealthBody = { status: string; quorum: { up: number; ok: boolean }; nodes: HealthNode[] };
type ListBody = { locks: Array<{ resource: string; state: string; unreadable?: true }> };
type HealthNode = { id: string; up: boolean; unservedSlots?: Array<[number, number]> };

/**
 * A Redis Cluster set to serve what it still covers (`cluster-require-full-coverage no`) keeps answering for
 * the slots of its live primaries when one primary is lost with no replica to take over. The console must go
 * on showing and following the locks in those slots, and say the cluster is degraded, not down.
 */
describe("a Redis Cluster that serves the slots it still covers", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;

  beforeAll(async () => {
    ({ unused, set } = await setUpConsoleOverCluster({ consoleNodeTimeoutMs: 2000, clusterNodeTimeoutMs: 1_000, partialCoverage: true }));
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  it("keeps the served shards' locks live and says degraded while one shard is lost", async () => {
    const health = await import("@/app/api/health/route");
    const ready = await import("@/app/api/ready/route");
    const locks = await import("@/app/api/locks/route");
    const metrics = await import("@/app/metrics/route");
    const read = async () => (await call(health.GET, "GET", "/api/health", { token: null })).body as HealthBody;
    const scrape = async () => samples(String((await call(metrics.GET, "GET", "/metrics", { token: null })).body));
    const list = async () => ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as ListBody).locks;
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000);
    const lost = await set.shardOf(8000);
    const served = await set.keyOn((await set.shardOf(100)).primary, "served");
    const gone = await set.keyOn(lost.primary, "gone");
    await set.client().set(served, "holder-served", "PX", 120_000);
    await set.client().set(gone, "holder-gone", "PX", 120_000);
    await until("both locks listed", async () => (await list()).filter((l) => (l.resource === served || l.resource === gone) && l.state === "held").length === 2);

    await set.direct(lost.replicas[0]!).config("SET", "cluster-replica-no-failover", "yes");
    const primary = set.nodes.find((n) => n.port === lost.primary)!;
    await primary.kill();
    const witness = set.direct((await set.shardOf(100)).primary);
    await until("the cluster marks the slots uncovered", async () => /cluster_slots_fail:[1-9]/.test(String(await witness.call("CLUSTER", "INFO"))), 30_000, 100);

    // The served shard goes on: its lock stays held, and a lock taken and released there now is followed.
    const later = await set.keyOn((await set.shardOf(100)).primary, "later");
    await witness.set(later, "holder-later", "PX", 120_000);
    await until("a lock taken in a served slot after the loss listed", async () => (await list()).some((l) => l.resource === later && l.state === "held"), 15_000);
    expect((await list()).find((l) => l.resource === served)?.state).toBe("held");
    await witness.del(later);
    await until("its release followed", async () => !(await list()).some((l) => l.resource === later && l.state === "held"), 15_000);

    // The lost shard's lock cannot be read: kept as last read, marked so, not ended.
    await until("the lost shard's lock unreadable", async () => (await list()).some((l) => l.resource === gone && l.state === "held" && l.unreadable === true), 15_000);
    await until("the served shard's lock readable", async () => (await list()).some((l) => l.resource === served && l.state === "held" && l.unreadable === undefined), 15_000);
    // The lost shard's lock probed (as one is once its TTL runs out, or after a force-release): the served
    // slots' changes are still followed.
    const { startLive } = await import("@/server/live");
    startLive().runtimes[0]!.store.onProbe([gone]);
    const afterProbe = await set.keyOn((await set.shardOf(100)).primary, "after-probe");
    await witness.set(afterProbe, "holder-after-probe", "PX", 120_000);
    await until("a lock taken in a served slot after the probe listed", async () => (await list()).some((l) => l.resource === afterProbe && l.state === "held"), 15_000);
    expect((await list()).find((l) => l.resource === gone)).toMatchObject({ state: "held", unreadable: true });
    // A force release of it is refused, saying why: no primary serves its slot (the cluster itself answers).
    const releaseRoute = await import("@/app/api/locks/[resource]/release/route");
    const refused = await call(releaseRoute.POST, "POST", `/api/locks/${encodeURIComponent(gone)}/release`, { body: { reason: "shard lost", token: "holder-gone" }, params: { resource: gone } });
    expect(refused.status).toBe(503);
    expect((refused.body as { error: { message: string } }).error.message).toBe(
      `\`${gone}\` is in hash slot ${keySlot(gone)}, which no primary of the cluster serves now (its primary failed, and no replica was promoted): it cannot be read or released until one serves it; nothing was touched.`,
    );

    const body = await until("the cluster shown degraded, its unserved slots named", async () => {
      const b = await read();
      return b.nodes[0]?.unservedSlots ? b : undefined;
    }, 15_000);
    expect(body).toMatchObject({ status: "degraded", quorum: { up: 1, ok: true } });
    expect(body.nodes[0]?.up).toBe(true);
    // Exactly the lost shard's slots (slot 8000's range).
    expect(body.nodes[0]?.unservedSlots).toHaveLength(1);
    const [from, to] = body.nodes[0]!.unservedSlots![0]!;
    expect(from <= 8000 && 8000 <= to && from > 0 && to < 16383).toBe(true);
    expect((await call(ready.GET, "GET", "/api/ready")).status).toBe(200);
    // The cluster answers and serves (node up, quorum ok): what pages the on-call is the count of slots no primary serves.
    const scraped = await scrape();
    expect(scraped.get('lockscope_node_up{node="node-0"}')).toBe(1);
    expect(scraped.get('lockscope_node_unserved_slots{node="node-0"}')).toBe(to - from + 1);

    // The primary back (empty, without persistence): its slots are read again, and the lock it forgot ends lost.
    // (Lost for longer than the console's periodic read of the primaries' run facts, every 30 s: its restart must be
    // noted by the reading that follows its return, which reads its slots at once, not by that periodic read.)
    await new Promise((resolve) => setTimeout(resolve, 31_000));
    await primary.restart();
    await until("every slot served again", async () => (await read()).nodes[0]?.unservedSlots === undefined, 30_000);
    expect((await scrape()).get('lockscope_node_unserved_slots{node="node-0"}')).toBe(0);
    await until("the lost shard's lock read again, and ended lost", async () => (await list()).some((l) => l.resource === gone && l.state === "lost" && l.unreadable === undefined), 30_000);
    expect((await list()).find((l) => l.resource === served)?.state).toBe("held");
  }, 150_000);
});
