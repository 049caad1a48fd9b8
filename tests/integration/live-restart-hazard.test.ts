import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeLockValue } from "@lockscope/redlock";
import type * as HealthModule from "@/app/api/health/route";
import { call, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

interface NodeHealth {
  id: string;
  restartRisk: boolean;
  restartedAt: number | null;
  uptimeSec: number | null;
}

/**
 * A node without persistence restarted before the console began watching (a deploy or a host reboot restarts
 * both): the console never saw its run id change, yet a lock held now was acquired before the node started, so
 * the node came up during that lock's life and may have forgotten it. The restart hazard shows; the nodes that
 * were up before the lock was taken show none.
 */
describe("a node restarted before the console started", () => {
  let cluster: TestCluster;
  let health: typeof HealthModule;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    // Node uptime is read in whole seconds: the lock is taken well after the nodes started, and node 2 restarted
    // well after the lock was taken.
    await new Promise((r) => setTimeout(r, 1_500));
    const value = encodeLockValue({ label: "billing", host: "worker-1", pid: 7, fence: null, acquiredAt: Date.now() });
    const clients = cluster.clients();
    await Promise.all(clients.map((c) => c.set("lock:before-restart", value, "PX", 600_000)));
    await new Promise((r) => setTimeout(r, 1_500));
    await cluster.restart(2);
    health = await import("@/app/api/health/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("flags the node that came up during a lock's life, and not the others", async () => {
    const nodes = await until("the nodes' uptimes and longest TTL read", async () => {
      const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: NodeHealth[] };
      return body.nodes.every((n) => n.uptimeSec !== null) && body.nodes.some((n) => n.restartRisk) ? body.nodes : null;
    });
    expect(nodes.map((n) => [n.id, n.restartRisk, n.restartedAt])).toEqual([
      ["node-0", false, null],
      ["node-1", false, null],
      ["node-2", true, null],
    ]);
  });
});
