import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keySlot } from "@lockscope/redlock";
import type * as MetricsRoute from "@/app/metrics/route";
import { call, listedLosses, lockDetail, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { readShards, setUpConsoleOverCluster, type RedisClusterSet } from "../support/redis-cluster";
import { firstWatcher, untilFirstWatcherReconnected } from "../support/restart";
import { until } from "../support/wait";
import { RECENT_CAP } from "@/server/live/retention";

/** Enough releases that the console is still reading them when their primary goes away. */
const BURST = 50_000;

/**
 * A Redis Cluster: a burst of releases in one primary's slots, and that primary going away right after it (restarting
 * empty before any failover, or failed over to its replica), while the console is still reading the releases. The
 * primary's own notifications said each lock ended before it went away: released, not lost in the restart or the
 * failover. Only a lock its holder kept there and the primary came back without was lost; a lock on another primary
 * is no part of it.
 */
describe("a cluster primary going away right after a burst of releases in its slots", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;
  let metrics: typeof MetricsRoute;

  beforeAll(async () => {
    ({ unused, set } = await setUpConsoleOverCluster({ consoleNodeTimeoutMs: 300, clusterNodeTimeoutMs: 2_000 }));
    metrics = await import("@/app/metrics/route");
    await startLiveReconciled({ metrics: true });
  }, 90_000);

  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  const heldCount = async () => (await import("@/server/live")).getLockStore().counts().held;
  /** The `del` notifications the console's watcher has received so far (counted as each arrives). */
  const delsReceived = async () => {
    let total = 0;
    for (const { counts } of (await import("@/server/live")).getKeyspaceEventCounts()) total += counts.get("del") ?? 0;
    return total;
  };

  /** `count` lock keys `lock:<name>/<j>` spread over the slots of the primary on `port` (as a service's locks would be). */
  const keysOn = async (port: number, name: string, count: number) => {
    const ranges = (await readShards(set.direct(port))).find((s) => s.nodes.some((n) => n.port === port && n.role === "master"))!.slots;
    const mine = (slot: number) => ranges.some((bound, i) => i % 2 === 0 && slot >= bound && slot <= ranges[i + 1]!);
    const keys: string[] = [];
    for (let j = 0; keys.length < count; j++) if (mine(keySlot(`lock:${name}/${j}`))) keys.push(`lock:${name}/${j}`);
    return keys;
  };
  const hold = async (node: Redis, keys: readonly string[]) => {
    for (let i = 0; i < keys.length; i += 5_000) {
      const pipeline = node.pipeline();
      for (const key of keys.slice(i, i + 5_000)) pipeline.set(key, `token-${key}`, "PX", 600_000);
      await pipeline.exec();
    }
  };
  /**
   * The burst's locks that still have a page say they were released, none lost. The pages kept are those ended in
   * the last few seconds and the latest 10,000 before them, and which of the burst's locks those are depends on how
   * many releases the console had read back before the primary went away (the rest are settled after it, in no set
   * order): every 25th lock is read, and at least half of 10,000's share must have a page (nothing else ends after
   * the burst).
   */
  const expectReleasedPages = async (keys: readonly string[], lostTypes: readonly string[]) => {
    let pages = 0;
    for (let j = 0; j < keys.length; j += 25) {
      const d = await lockDetail(keys[j]!);
      if (d === null) continue;
      pages += 1;
      expect({ resource: keys[j], state: d.state }).toEqual({ resource: keys[j], state: "released" });
      expect(d.timeline.filter((e) => lostTypes.includes(e.type))).toEqual([]);
    }
    expect(pages).toBeGreaterThanOrEqual(Math.floor(RECENT_CAP / 25 / 2));
  };
  /**
   * Every holder releases (one DEL each, all sent at once), and the console has received the primary's word of each
   * (read as they come, not yet all read back from the node): a release the primary carried out but whose word never
   * reached the console before it died cannot be told from a loss.
   */
  const releaseAll = async (node: Redis, keys: readonly string[]) => {
    const before = await delsReceived();
    const pipeline = node.pipeline();
    for (const key of keys) pipeline.del(key);
    await pipeline.exec();
    await until("the console received every release's notification", async () => (await delsReceived()) >= before + keys.length, 30_000, 2);
  };

  it("lists none of the released locks as lost in a restart, only the one its holder kept on that primary", async () => {
    const shard = await set.shardOf(3000);
    const primaryNode = set.nodes.find((n) => n.port === shard.primary)!;
    const replicaNode = set.nodes.find((n) => n.port === shard.replicas[0])!;
    const primary = set.direct(shard.primary);
    const burst = await keysOn(shard.primary, "cluster-burst", BURST);
    const kept = await set.keyOn(shard.primary, "cluster-burst-kept");
    const elsewhere = await set.keyOn((await set.shardOf(15000)).primary, "cluster-burst-elsewhere");
    await hold(primary, burst);
    await primary.set(kept, "holder-kept", "PX", 600_000);
    await set.direct((await set.shardOf(15000)).primary).set(elsewhere, "holder-elsewhere", "PX", 600_000);
    await until("the console lists every lock", async () => (await heldCount()) === BURST + 2, 60_000);
    const before = (await firstWatcher()).reconnects;

    // The primary restarts as soon as its releases are done and announced. Its replica is frozen meanwhile, so
    // nothing fails over: it comes back as the primary of its slots, empty.
    await releaseAll(primary, burst);
    replicaNode.pause();
    await primaryNode.restart();
    replicaNode.resume();
    await untilFirstWatcherReconnected(before, 60_000);
    await until("the console read every release", async () => (await heldCount()) === 1, 60_000);

    expect((await listedLosses()).map((l) => l.resource)).toEqual([kept]);
    await expectReleasedPages(burst, ["lost-in-restart", "lost"]);
    expect((await lockDetail(kept))?.state).toBe("lost");
    expect((await lockDetail(elsewhere))?.state).toBe("held");
    const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
    expect(text).toMatch(/^lockscope_locks_lost_in_restart_total\{[^}]*outcome="gone"[^}]*\} 1$/m);
  }, 180_000);

  it("lists none of the released locks as lost in a failover, and the lock its holder kept there stays held", async () => {
    const shard = await set.shardOf(8000);
    const primaryNode = set.nodes.find((n) => n.port === shard.primary)!;
    const primary = set.direct(shard.primary);
    const burst = await keysOn(shard.primary, "cluster-failover-burst", BURST);
    const kept = await set.keyOn(shard.primary, "cluster-failover-kept");
    // (Locks the test before left held on other primaries.)
    const heldBefore = await heldCount();
    await hold(primary, burst);
    await primary.set(kept, "holder-kept", "PX", 600_000);
    await until("the console lists every lock", async () => (await heldCount()) === heldBefore + BURST + 1, 60_000);
    const before = (await firstWatcher()).reconnects;

    // The primary dies as soon as its releases are done and announced, and its replica has every one of them: the
    // cluster promotes it.
    await releaseAll(primary, burst);
    expect(await primary.wait(1, 10_000)).toBe(1);
    await primaryNode.kill();
    // (The harness's own connection may be to the node that died: a question it fails is asked again.)
    await until("the replica promoted", () => set.shardOf(8000).then((s) => s.primary === shard.replicas[0], () => false), 60_000, 200);
    await untilFirstWatcherReconnected(before, 60_000);
    await until("the console read every release", async () => (await heldCount()) === heldBefore + 1, 60_000);
    // The failover's comparison (its promoted replica read for the locks last seen in the slots) has told its findings.
    await until("the kept lock's page says it went on across the failover", async () => (await lockDetail(kept))?.timeline.some((e) => e.type === "failover"), 30_000);

    expect((await listedLosses()).filter((l) => l.kind === "failover").map((l) => l.resource)).toEqual([]);
    await expectReleasedPages(burst, ["lost-in-failover", "lost"]);
    expect((await lockDetail(kept))?.state).toBe("held");
    const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
    expect(text).toMatch(/^lockscope_locks_lost_in_failover_total\{[^}]*\} 0$/m);
  }, 180_000);
});
