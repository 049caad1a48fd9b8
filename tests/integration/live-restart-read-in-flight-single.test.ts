import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HealthRoute from "@/app/api/health/route";
import type * as MetricsRoute from "@/app/metrics/route";
import { call, listedLosses, lockDetail, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

const LOCKS = 20;

/**
 * A standalone node restarting empty while the console's read of its keys is out: the client sends the read again
 * once it has reconnected, and the restarted node says the keys are gone. Those locks were lost in the restart, not
 * released: a reading taken across the drop is not the node's word on them.
 */
describe("a standalone node restarting empty while a read of its keys is out", () => {
  let cluster: TestCluster;
  let health: typeof HealthRoute;
  let metrics: typeof MetricsRoute;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
    health = await import("@/app/api/health/route");
    metrics = await import("@/app/metrics/route");
    await startLiveReconciled({ metrics: true });
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  const watcher = async () => {
    const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ watcher: { reconnects: number; up: boolean } }> };
    return body.nodes[0]!.watcher;
  };

  it("lists the locks the node came back without as lost in the restart, not released", async () => {
    const [node] = cluster.clients();
    const keys = Array.from({ length: LOCKS }, (_, i) => `lock:in-flight/${i}`);
    for (const key of keys) await node!.set(key, `holder-${key}`, "PX", 600_000);
    await until("the console lists every lock held", async () => (await Promise.all(keys.map(lockDetail))).every((d) => d?.state === "held"), 30_000);
    const before = (await watcher()).reconnects;

    // Every holder extends its lock, and the node pauses writes right after: the notifications go out, and the
    // console's read of the keys (a script, which a write pause holds too) waits on the node.
    const pipeline = node!.pipeline();
    for (const key of keys) pipeline.pexpire(key, 600_000);
    pipeline.call("CLIENT", "PAUSE", "20000", "WRITE");
    await pipeline.exec();
    await until("the console's read of the keys waits on the node", async () => {
      const clients = String(await node!.call("CLIENT", "LIST"));
      return clients.split("\n").some((line) => line.includes("name=lockscope:watcher-reader") && /\bcmd=eval(sha)?\b/.test(line) && /\bflags=\S*b/.test(line));
    }, 10_000, 20);

    // The node restarts, empty, with that read still out; the client reconnects and sends the read again, answered
    // before the watcher has checked for a restart.
    await cluster.restart(0);
    await until("the watcher reconnected and reconciled", async () => {
      const w = await watcher();
      return w.reconnects > before && w.up;
    }, 60_000);
    await until("every lock ended", async () => (await Promise.all(keys.map(lockDetail))).every((d) => d !== null && d.state !== "held"), 30_000);

    expect((await Promise.all(keys.map(lockDetail))).map((d) => d?.state)).toEqual(keys.map(() => "lost"));
    expect((await listedLosses()).filter((l) => l.kind === "restart").map((l) => l.resource).sort()).toEqual([...keys].sort());
    const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
    expect(text).toMatch(new RegExp(`^lockscope_locks_lost_in_restart_total\\{[^}]*\\} ${LOCKS}$`, "m"));
  }, 120_000);
});
