import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as HealthRoute from "@/app/api/health/route";
import type * as MetricsRoute from "@/app/metrics/route";
import { call, listedLosses, lockDetail, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import { holdLocks, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

const METRICS_TOKEN = "it-metrics-token-restart-burst-0123";
/** Enough releases that the console is still reading them when the restarted node is back. */
const BURST = 50_000;

/** Releases `count` locks `<prefix>/<j>` on one node as their holders would: one DEL each, all sent at once. */
async function releaseLocks(client: Redis, prefix: string, count: number): Promise<void> {
  const pipeline = client.pipeline();
  for (let j = 0; j < count; j++) pipeline.del(`${prefix}/${j}`);
  await pipeline.exec();
}

/**
 * A burst of releases, and a lock node restarting while the console is still reading them: locks their holders
 * released before the console had read the releases were released, not lost in the restart. Neither the losses
 * list, nor the metric, nor any lock's page may say otherwise.
 */
describe("a node restarting while the console reads a burst of releases", () => {
  let cluster: TestCluster;
  let health: typeof HealthRoute;
  let metrics: typeof MetricsRoute;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { METRICS_TOKEN } });
    health = await import("@/app/api/health/route");
    metrics = await import("@/app/metrics/route");
    await startLiveReconciled({ metrics: true });
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  const node1 = async () => {
    const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ id: string; watcher: { reconnects: number; up: boolean } }> };
    return body.nodes.find((n) => n.id === "node-1")!.watcher;
  };
  const heldCount = async () => (await import("@/server/live")).getLockStore().counts().held;
  const restartNode1 = async (before: number) => {
    await cluster.restart(1);
    await until("node 1's watcher reconnected and reconciled", async () => {
      const w = await node1();
      return w.reconnects > before && w.up;
    });
  };

  it("counts no lock released on every node in the burst as lost when node 1 restarts right after it", async () => {
    const clients = cluster.clients();
    await Promise.all(clients.map((c) => holdLocks(c, "lock:burst/a", BURST)));
    // A lock its holder keeps: node 1 does lose it (the Redlock goes on with the two others).
    await Promise.all(clients.map((c) => c.set("lock:burst/kept", "holder-kept", "PX", 600_000)));
    await until("the console lists every lock", async () => (await heldCount()) === BURST + 1, 60_000);
    const before = (await node1()).reconnects;
    // Every holder releases on every node; node 1 restarts as soon as its releases are done.
    await Promise.all(clients.map((c) => releaseLocks(c, "lock:burst/a", BURST)));
    await restartNode1(before);
    await until("the console read every release", async () => (await heldCount()) === 1, 60_000);

    const losses = await listedLosses();
    expect(losses.map((l) => l.resource)).toEqual(["lock:burst/kept"]);
    for (const j of [0, BURST / 2, BURST - 1]) {
      const d = await lockDetail(`lock:burst/a/${j}`);
      expect(d?.state).toBe("released");
      expect(d!.timeline.filter((e) => e.type === "lost-in-restart" || e.type === "lost")).toEqual([]);
    }
    const text = (await call(metrics.GET, "GET", "/metrics", { token: METRICS_TOKEN })).body as string;
    // The kept lock goes on on the two other nodes: counted apart from the locks gone with a restart, which page.
    expect(text).toMatch(/^lockscope_locks_lost_in_restart_total\{node="node-1",outcome="held_by_quorum"\} 1$/m);
    expect(text).toMatch(/^lockscope_locks_lost_in_restart_total\{node="node-1",outcome="gone"\} 0$/m);
  }, 120_000);

  it("counts no lock as lost that its holders released on the other nodes as node 1 died and came back", async () => {
    const clients = cluster.clients();
    const [n0, , n2] = clients;
    await Promise.all(clients.map((c) => holdLocks(c, "lock:burst/b", BURST)));
    await until("the console lists every lock", async () => (await heldCount()) === BURST + 1, 60_000);
    const lostBefore = (await listedLosses()).length;
    const before = (await node1()).reconnects;
    // The holders release on nodes 0 and 2 (a quorum) while node 1 restarts: its releases never reach it, and it
    // comes back without the locks. Nobody lost anything: every lock was released.
    const released = Promise.all([n0!, n2!].map((c) => releaseLocks(c, "lock:burst/b", BURST)));
    await restartNode1(before);
    await released;
    await until("the console read every release", async () => (await heldCount()) === 1, 60_000);

    const all = await listedLosses();
    expect(all.slice(0, all.length - lostBefore).map((l) => l.resource)).toEqual([]);
    for (const j of [0, BURST / 2, BURST - 1]) {
      const d = await lockDetail(`lock:burst/b/${j}`);
      expect(d?.state).toBe("released");
      expect(d!.timeline.filter((e) => e.type === "lost-in-restart" || e.type === "lost")).toEqual([]);
    }
  }, 120_000);
});
