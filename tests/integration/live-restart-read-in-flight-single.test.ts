import { afterAll, beforeAll, describe, it } from "vitest";
import { lockDetail, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { expectLostInRestart, firstWatcher, holdConsoleReadOn, untilBackAndEnded } from "../support/restart";
import { until } from "../support/wait";

const LOCKS = 20;

/**
 * A standalone node restarting empty while the console's read of its keys is out: the client sends the read again
 * once it has reconnected, and the restarted node says the keys are gone. Those locks were lost in the restart, not
 * released: a reading taken across the drop is not the node's word on them.
 */
describe("a standalone node restarting empty while a read of its keys is out", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
    await startLiveReconciled({ metrics: true });
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("lists the locks the node came back without as lost in the restart, not released", async () => {
    const [node] = cluster.clients();
    const keys = Array.from({ length: LOCKS }, (_, i) => `lock:in-flight/${i}`);
    for (const key of keys) await node!.set(key, `holder-${key}`, "PX", 600_000);
    await until("the console lists every lock held", async () => (await Promise.all(keys.map(lockDetail))).every((d) => d?.state === "held"), 30_000);
    const before = (await firstWatcher()).reconnects;

    await holdConsoleReadOn(node!, keys);
    // The node restarts, empty, with that read still out; the client reconnects and sends the read again, answered
    // before the watcher has checked for a restart.
    await cluster.restart(0);
    await untilBackAndEnded(before, keys);

    await expectLostInRestart(keys);
  }, 120_000);
});
