import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listedLosses, lockDetail, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import { holdLocks, type TestCluster } from "../support/redis";
import { firstWatcher, untilFirstWatcherReconnected, untilNotificationsSent } from "../support/restart";
import { until } from "../support/wait";

/** Enough releases that the console is still reading them when the restarted node is back. */
const BURST = 50_000;

/**
 * One lock node (no other node to ask): a burst of releases, and the node restarting right after it, while the
 * console is still reading the releases. The node's own notifications said each lock ended before it went away:
 * released, not lost in the restart.
 */
describe("a single node restarting right after a burst of releases", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    await startLiveReconciled();
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  const heldCount = async () => (await import("@/server/live")).getLockStore().counts().held;

  it("lists none of the released locks as lost, and still the one its holder kept", async () => {
    const [n0] = cluster.clients();
    await holdLocks(n0!, "lock:single-burst", BURST);
    await n0!.set("lock:single-kept", "holder-kept", "PX", 600_000);
    await until("the console lists every lock", async () => (await heldCount()) === BURST + 1, 60_000);
    const before = (await firstWatcher()).reconnects;
    const pipeline = n0!.pipeline();
    for (let j = 0; j < BURST; j++) pipeline.del(`lock:single-burst/${j}`);
    await pipeline.exec();
    // (On a busy machine the node may still hold some of them in its own buffers: killed then, it never said them.)
    await untilNotificationsSent(n0!);
    await cluster.restart(0);
    await untilFirstWatcherReconnected(before);
    await until("the console read every release", async () => (await heldCount()) === 0, 60_000);

    expect((await listedLosses()).map((l) => l.resource)).toEqual(["lock:single-kept"]);
    for (const j of [0, BURST / 2, BURST - 1]) {
      const d = await lockDetail(`lock:single-burst/${j}`);
      expect(d?.state).toBe("released");
      expect(d!.timeline.filter((e) => e.type === "lost-in-restart" || e.type === "lost")).toEqual([]);
    }
    expect((await lockDetail("lock:single-kept"))?.state).toBe("lost");
  }, 120_000);
});
