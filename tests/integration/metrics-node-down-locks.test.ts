import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as MetricsRoute from "@/app/metrics/route";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import { samples } from "../support/prometheus";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * The only lock node goes down while a lock with a short TTL is held on it. Its TTL runs out while the console
 * cannot read the node: Redis reclaims such a key by itself, so nothing says it is still there. The lock-safety
 * gauges must not claim a lock stuck past its TTL (LockscopeLockStuckPastTtl: "still on a node", an operator
 * force-releasing it) or held for ever longer (LockscopeLockHeldTooLong): the node being down is the incident, and
 * LockscopeQuorumLost says so.
 */
describe("/metrics while the node holding a lock is down past the lock's TTL", () => {
  let cluster: TestCluster;
  let route: typeof MetricsRoute;
  const scrape = async () => samples(String((await call(route.GET, "GET", "/metrics", { token: null })).body));

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    route = await import("@/app/metrics/route");
    const { startLive, waitUntilReconciled } = await import("@/server/live");
    (await import("@/server/console-metrics")).startConsoleMetrics();
    startLive();
    expect(await waitUntilReconciled(30_000)).toBe(true);
  }, 60_000);

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("counts no lock past its TTL and no oldest lock for a lock it can no longer read, and says nothing of the node's role", async () => {
    await cluster.client(0).set("lock:orders/1", "holder-1", "PX", 1_500);
    await until("the lock read held", async () => ((await scrape()).get('lockscope_locks_held{state="held"}') === 1 ? true : null), 30_000, 50);
    await cluster.kill(0);
    // The console's own view: the TTL has run out, and the node that held the key cannot be read.
    const s = await until("the lock's TTL run out on the down node", async () => {
      const m = await scrape();
      return m.get('lockscope_locks_held{state="elapsed"}') === 1 ? m : null;
    }, 30_000, 100);
    expect(s.get('lockscope_node_up{node="node-0"}')).toBe(0);
    // Nor whether it is a writable primary or a read-only replica: 0 ("writable" in green on the dashboard's Node up
    // panel) would be a claim about a node nobody can read.
    expect(s.has('lockscope_node_read_only{node="node-0"}')).toBe(false);
    expect(s.get("lockscope_locks_past_ttl")).toBe(0);
    expect(s.get("lockscope_lock_oldest_past_ttl_expiry_timestamp_seconds")).toBe(0);
    expect(s.get("lockscope_lock_oldest_acquired_timestamp_seconds")).toBe(0);
    expect(s.get("lockscope_lock_oldest_held_acquired_timestamp_seconds")).toBe(0);
  });
});
