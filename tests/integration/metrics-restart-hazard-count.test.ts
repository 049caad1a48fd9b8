import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HealthRoute from "@/app/api/health/route";
import type * as MetricsRoute from "@/app/metrics/route";
import { call, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import { samples } from "../support/prometheus";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A restart hazard shorter than the scrape interval: the lock's TTL is a few seconds, the node (without
 * persistence) restarts within it, and by the next scrape the hazard gauge is 0 again. The hazard is counted
 * (`lockscope_node_restart_hazards_total`) when the console sees the restart, so Prometheus sees it whenever it
 * scrapes next.
 */
describe("a restart hazard over before the next scrape", () => {
  let cluster: TestCluster;
  let route: typeof MetricsRoute;
  let health: typeof HealthRoute;
  const scrape = async () => samples(String((await call(route.GET, "GET", "/metrics", { token: null })).body));

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    route = await import("@/app/metrics/route");
    health = await import("@/app/api/health/route");
    await startLiveReconciled({ metrics: true });
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("counts the restart within the longest TTL, and the count stays once the hazard is over", async () => {
    const before = await until("the nodes' facts read", async () => {
      const s = await scrape();
      return s.has('lockscope_node_restart_hazard{node="node-1"}') ? s : null;
    });
    // Initialised at 0 for every node, so that rate() and increase() see the first hazard.
    for (const node of ["node-0", "node-1", "node-2"]) expect(before.get(`lockscope_node_restart_hazards_total{node="${node}"}`)).toBe(0);

    await Promise.all(cluster.clients().map((c) => c.set("lock:short/1", "holder", "PX", 8_000)));
    await until("the 8 s TTL seen on node-1", async () => ((await scrape()).get('lockscope_node_longest_ttl_seconds{node="node-1"}') ?? 0) > 5);
    const restartAt = Date.now();
    await cluster.restart(1);
    // The console saw the restart (the nodes panel says when). Until it reads the new server, /metrics counts the
    // old server's uptime on, which is past 9 s already on a console that took long to start.
    await until("node-1's restart seen", async () => {
      const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ id: string; restartedAt: number | null }> };
      return (body.nodes.find((n) => n.id === "node-1")?.restartedAt ?? 0) >= restartAt - 1_000;
    });
    // Nothing scraped while the hazard lasted: the next scrape comes after it is over.
    const after = await until(
      "node-1 back, up longer than the longest TTL",
      async () => {
        const s = await scrape();
        return (s.get('lockscope_node_uptime_seconds{node="node-1"}') ?? 0) >= 9 && s.get('lockscope_node_restart_hazard{node="node-1"}') === 0 ? s : null;
      },
      30_000,
      500,
    );
    expect(after.get('lockscope_node_restart_hazards_total{node="node-1"}')).toBe(1);
    expect(after.get('lockscope_node_restart_hazards_total{node="node-0"}')).toBe(0);
  }, 60_000);
});
