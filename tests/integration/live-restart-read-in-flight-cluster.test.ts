import { afterAll, beforeAll, describe, it } from "vitest";
import { lockDetail, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { setUpConsoleOverCluster, type RedisClusterSet } from "../support/redis-cluster";
import { expectLostInRestart, firstWatcher, holdConsoleReadOn, untilBackAndEnded } from "../support/restart";
import { until } from "../support/wait";

const LOCKS = 20;

/**
 * A Redis Cluster primary restarting empty while the console's read of keys in its slots is out: the cluster client
 * sends the read again once the primary answers, and the restarted primary says the keys are gone. Those locks were
 * lost in the restart, not released: a reading taken across the drop is not the primary's word on them.
 */
describe("a cluster primary restarting empty while a read of its keys is out", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;

  beforeAll(async () => {
    // (A node timeout long enough that a primary stopped for a few seconds is not failed over.)
    ({ unused, set } = await setUpConsoleOverCluster({ consoleNodeTimeoutMs: 300, clusterNodeTimeoutMs: 10_000 }));
    await startLiveReconciled({ metrics: true });
  }, 90_000);

  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  it("lists the locks the primary came back without as lost in the restart, not released", async () => {
    const shard = await set.shardOf(3000);
    const primaryNode = set.nodes.find((n) => n.port === shard.primary)!;
    const primary = set.direct(shard.primary);
    // (In one hash slot: one read command for them all.)
    const tag = await set.keyOn(shard.primary, "in-flight");
    const keys = Array.from({ length: LOCKS }, (_, i) => `${tag}/${i}`);
    for (const key of keys) await primary.set(key, `holder-${key}`, "PX", 600_000);
    await until("the console lists every lock held", async () => (await Promise.all(keys.map(lockDetail))).every((d) => d?.state === "held"), 30_000);
    const before = (await firstWatcher()).reconnects;

    await holdConsoleReadOn(primary, keys);

    // The primary restarts with that read still out, and comes back as the primary of its slots, empty (nothing fails
    // over). The cluster client sends the read again. A restarted primary refuses commands on keys for its first 2 s
    // (CLUSTERDOWN), and the console's client gives up after 16 tries about 200 ms apart (about 1.9 s here): the
    // restarted primary is stopped past those 2 s (a host slow to give it the CPU), so that the read waits on it rather
    // than using its tries up, and is answered once the primary serves, before the watcher has checked for a restart.
    await primaryNode.restart();
    primaryNode.pause();
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    primaryNode.resume();
    await untilBackAndEnded(before, keys);

    await expectLostInRestart(keys);
  }, 120_000);
});
