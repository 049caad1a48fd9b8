import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as MetricsRoute from "@/app/metrics/route";
import { call, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import { samples } from "../support/prometheus";
import type { TestCluster } from "../support/redis";

/**
 * LOCKSCOPE_NODE_TIMEOUT_MS is how long the console waits for a lock node before it takes it for not answering
 * (raised for nodes far away or busy). /metrics says a node is up by the same measure: a node that answers in 2 s
 * under a 6 s timeout is up, or LockscopeLockNodeDown and the quorum alerts page for nodes the console works with.
 * A scrape still answers within Prometheus's scrape timeout: a node that has not answered by then is down.
 */
describe("/metrics for a lock node slower to answer than a second, within LOCKSCOPE_NODE_TIMEOUT_MS", () => {
  let cluster: TestCluster;
  let route: typeof MetricsRoute;
  const scrape = async (headers: Record<string, string> = {}) => samples(String((await call(route.GET, "GET", "/metrics", { token: null, headers })).body));
  /** A scrape that starts while node `i` is paused, the node going on after `ms`. */
  const scrapeWhilePaused = async (i: number, ms: number, headers: Record<string, string> = {}) => {
    cluster.pause(i);
    const resumed = new Promise<void>((resolve) =>
      setTimeout(() => {
        cluster.resume(i);
        resolve();
      }, ms),
    );
    try {
      return await scrape(headers);
    } finally {
      await resumed;
    }
  };

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "6000" } });
    route = await import("@/app/metrics/route");
    await startLiveReconciled({ metrics: true });
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("says up a node that answers after 2 s under a 6 s node timeout", async () => {
    expect((await scrape()).get('lockscope_node_up{node="node-1"}')).toBe(1);
    const s = await scrapeWhilePaused(1, 2_000);
    expect(s.get('lockscope_node_up{node="node-1"}')).toBe(1);
    expect(s.get('lockscope_node_up{node="node-0"}')).toBe(1);
  });

  it("says down a node that has not answered within Prometheus's scrape timeout, and answers the scrape in it", async () => {
    // Prometheus says how long it waits for the scrape (X-Prometheus-Scrape-Timeout-Seconds): the nodes are waited
    // for a second less, so the answer comes in time and says which node did not.
    const s = await scrapeWhilePaused(2, 4_500, { "x-prometheus-scrape-timeout-seconds": "3" });
    expect(s.get('lockscope_node_up{node="node-2"}')).toBe(0);
    expect(s.get('lockscope_node_up{node="node-0"}')).toBe(1);
  });
});
