import type Redis from "ioredis";
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

  it("waits for the restarted server's last notifications on the subscriber connection before it counts a lock lost", async () => {
    // The console reads notifications more slowly than the node sends them (a busy console): when the node dies,
    // the last ones still sit in the subscriber connection's socket, and its reader connection is back first.
    const COUNT = 3_000;
    const [n0] = cluster.clients();
    await holdLocks(n0!, "lock:slow-reader", COUNT);
    await n0!.set("lock:slow-reader-kept", "holder-kept", "PX", 600_000);
    await until("the console lists every lock", async () => (await heldCount()) === COUNT + 1, 60_000);
    const before = (await firstWatcher()).reconnects;
    const watcher = (await import("@/server/live")).getDeploymentLives()[0]!.watchers[0]!;
    const socket = (watcher.sub as Redis).stream;
    socket.pause();
    try {
      const pipeline = n0!.pipeline();
      for (let j = 0; j < COUNT; j++) pipeline.del(`lock:slow-reader/${j}`);
      await pipeline.exec();
      await untilNotificationsSent(n0!);
      await cluster.restart(0);
      await until("the watcher saw its node go", async () => !(await firstWatcher()).up, 10_000);
      await until("the watcher's reader is connected to the restarted node", () => watcher.readable, 10_000);
      // Longer than a bring-up of these few thousand locks takes, and than its retry after a second.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
    } finally {
      socket.resume();
    }
    await untilFirstWatcherReconnected(before);
    await until("the console read every release", async () => (await heldCount()) === 0, 60_000);

    expect((await listedLosses()).map((l) => l.resource).filter((r) => r.startsWith("lock:slow-reader"))).toEqual(["lock:slow-reader-kept"]);
    expect((await lockDetail(`lock:slow-reader/${COUNT - 1}`))?.state).toBe("released");
  }, 120_000);
});
