import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as MetricsRoute from "@/app/metrics/route";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A node the console has never reached: what it would know of it (its uptime, the longest TTL on it, whether a
 * restart of it endangers a lock) is unknown, and /metrics leaves those series out rather than claim 0.
 */
describe("/metrics for a lock node the console never reached", () => {
  let cluster: TestCluster;
  let route: typeof MetricsRoute;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    // Down before the console starts, and never back.
    await cluster.kill(2);
    route = await import("@/app/metrics/route");
    const { startLive } = await import("@/server/live");
    (await import("@/server/console-metrics")).startConsoleMetrics();
    startLive();
  }, 60_000);

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("exports no restart hazard and no longest TTL for it, while it does for the nodes it reads", async () => {
    await cluster.client(0).set("lock:known/1", "holder", "PX", 60_000);
    const text = await until(
      "the reachable nodes' facts read",
      async () => {
        const t = String((await call(route.GET, "GET", "/metrics", { token: null })).body);
        return t.includes('lockscope_node_restart_hazard{node="node-0"} 0') && /lockscope_node_longest_ttl_seconds\{node="node-0"\} [1-9]/.test(t) ? t : null;
      },
      30_000,
      100,
    );
    expect(text).toContain('lockscope_node_up{node="node-2"} 0');
    expect(text).toContain('lockscope_node_longest_ttl_seconds{node="node-1"} ');
    expect(text).not.toContain('lockscope_node_restart_hazard{node="node-2"}');
    expect(text).not.toContain('lockscope_node_longest_ttl_seconds{node="node-2"}');
    expect(text).not.toContain('lockscope_node_uptime_seconds{node="node-2"}');
    await cluster.client(0).del("lock:known/1");
  });
});
