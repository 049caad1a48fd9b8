import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as MetricsRoute from "@/app/metrics/route";
import type * as HealthRoute from "@/app/api/health/route";
import type { LockDetail } from "@/lib/locks/types";
import { call, listedLosses, lockDetail, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

const METRICS_TOKEN = "it-metrics-token-restart-lost-0123";

/**
 * A lock node without persistence restarts and comes back empty: the locks it held whose TTL had not run out
 * were lost, not released. Their pages say so (timeline: lost in restart), the metric counts them (those gone apart from those a quorum still holds), and neither
 * a lock whose TTL ran out before the node came back nor one released meanwhile on the other nodes is among them.
 */
describe("locks a restarted node came back without", () => {
  let cluster: TestCluster;
  let metrics: typeof MetricsRoute;
  let health: typeof HealthRoute;

  const lostEntries = (d: LockDetail | null) => (d?.timeline ?? []).filter((e) => e.type === "lost-in-restart");

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { METRICS_TOKEN } });
    metrics = await import("@/app/metrics/route");
    health = await import("@/app/api/health/route");
    await startLiveReconciled({ metrics: true });
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("marks the locks node-1 lost, counts them (not the lab's), and leaves out the one that expired and the one released meanwhile", async () => {
    const [n0, n1, n2] = cluster.clients();
    // A single-instance lock on node 1, a Redlock on all three, one on node 1 that expires before it comes back,
    // and one on node 0 only (node 1 never had it).
    await n1!.set("lock:restart/single", "holder-single", "PX", 600_000);
    await Promise.all([n0!, n1!, n2!].map((c) => c.set("lock:restart/quorum", "holder-quorum", "PX", 600_000)));
    const shortSetAt = Date.now();
    await n1!.set("lock:restart/short", "holder-short", "PX", 1_500);
    await n0!.set("lock:restart/elsewhere", "holder-elsewhere", "PX", 600_000);
    // A contention-lab run's lock (its fault kills node 1 on purpose): its page tells the loss, the metric
    // (and so the LockscopeLocksLostInRestart page) leaves it out, as every lock alert does.
    await n1!.set("lock:lab:rmx00000000abc:stock", "lab-holder", "PX", 600_000);
    // And a Redlock its holder releases while node 1 is down: released, not lost.
    await Promise.all([n0!, n1!, n2!].map((c) => c.set("lock:restart/released", "holder-released", "PX", 600_000)));
    await until("the console lists the five locks", async () => (await Promise.all(["single", "quorum", "short", "elsewhere", "released"].map((k) => lockDetail(`lock:restart/${k}`)))).every((d) => d !== null) && (await lockDetail("lock:lab:rmx00000000abc:stock")) !== null);

    const reconnects = async () => {
      const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ id: string; watcher: { reconnects: number; up: boolean } }> };
      return body.nodes.find((n) => n.id === "node-1")!.watcher;
    };
    const before = (await reconnects()).reconnects;
    await cluster.kill(1);
    await Promise.all([n0!, n2!].map((c) => c.del("lock:restart/released")));
    await until("the released Redlock ended", async () => (await lockDetail("lock:restart/released"))?.state === "released");
    // The short lock's TTL runs out while node 1 is down (the releases above took some of that time already).
    await new Promise((r) => setTimeout(r, Math.max(0, shortSetAt + 1_700 - Date.now())));
    await cluster.restart(1);
    await until("node 1's watcher reconnected", async () => {
      const w = await reconnects();
      return w.reconnects > before && w.up;
    });

    const single = await until("the single-instance lock's loss on its page", async () => {
      const d = await lockDetail("lock:restart/single");
      return lostEntries(d).length > 0 ? d : null;
    });
    // Nobody released it: it ended lost, and its end entry says what that means for its holder.
    expect(single.state).toBe("lost");
    expect(single.timeline.filter((e) => e.type === "released")).toEqual([]);
    expect(single.timeline).toContainEqual(expect.objectContaining({ type: "lost", detail: expect.stringContaining("its holder may still think it holds it") as unknown }));
    expect(lostEntries(single)).toEqual([
      expect.objectContaining({
        node: "node-1",
        detail: expect.stringMatching(/^node-1 restarted without an append-only file and came back without this lock \(at least \d+\.\d s of its TTL left\): its holder may still think it holds it$/) as unknown,
      }),
    ]);
    // The Redlock goes on with two nodes of three, and says what node 1 lost.
    const quorum = await lockDetail("lock:restart/quorum");
    expect(quorum).toMatchObject({ state: "held" });
    expect(lostEntries(quorum)).toHaveLength(1);
    const short = await lockDetail("lock:restart/short");
    expect(short).not.toBeNull();
    expect(lostEntries(short)).toEqual([]);
    expect(short!.state).toBe("expired");
    expect((await lockDetail("lock:restart/released"))!.state).toBe("released");
    for (const resource of ["lock:restart/elsewhere", "lock:restart/released"]) {
      const d = await lockDetail(resource);
      expect(d).not.toBeNull();
      expect(lostEntries(d)).toEqual([]);
    }

    expect(lostEntries(await lockDetail("lock:lab:rmx00000000abc:stock"))).toHaveLength(1);

    // The on-call's list of what was lost: the two locks node 1 came back without, the one that went on marked
    // so; not the lab's, not the one that expired first, not those released or never on node 1.
    const losses = await listedLosses();
    expect(losses.map((l) => l.resource).sort()).toEqual(["lock:restart/quorum", "lock:restart/single"]);
    expect(losses.find((l) => l.resource === "lock:restart/single")).toMatchObject({ node: "node-1", kind: "restart", token: "holder-single", wentOn: false, deployment: "default", detail: lostEntries(single)[0]!.detail });
    expect(losses.find((l) => l.resource === "lock:restart/quorum")).toMatchObject({ node: "node-1", kind: "restart", token: "holder-quorum", wentOn: true });

    const text = (await call(metrics.GET, "GET", "/metrics", { token: METRICS_TOKEN })).body as string;
    // Apart: the lock gone with it (its holder may think it holds what another can take: LockscopeLocksLostInRestart
    // pages) and the Redlock still held on a quorum of the other nodes (nobody else can take it: no page).
    expect(text).toMatch(/^lockscope_locks_lost_in_restart_total\{node="node-1",outcome="gone"\} 1$/m);
    expect(text).toMatch(/^lockscope_locks_lost_in_restart_total\{node="node-1",outcome="held_by_quorum"\} 1$/m);
    expect(text).toMatch(/^lockscope_locks_lost_in_restart_total\{node="node-0",outcome="gone"\} 0$/m);
    // Ended as lost: the single-instance lock and the lab's (the Redlock goes on); no release counted.
    expect(text).toMatch(/^lockscope_lock_events_total\{type="lost"\} 2$/m);
    expect(text).toMatch(/^lockscope_lock_events_total\{type="released"\} 1$/m);
  }, 60_000);
});
