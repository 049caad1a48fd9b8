import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LockDetail } from "@/lib/locks/types";
import { call, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { setUpConsoleOverSentinels, type SentinelSet } from "../support/sentinel";
import { until } from "../support/wait";

/**
 * Sentinels that announce the instances by host name (`announce-hostnames yes`, as in Kubernetes or Compose): the
 * `+switch-master` names the promoted replica `localhost:<port>`, while the console's connection reaches it at
 * `127.0.0.1:<port>`. One failover is one failover: compared once, its lost lock counted once.
 */
describe("a Sentinel deployment whose sentinels announce host names", () => {
  let cluster: TestCluster;
  let set: SentinelSet;
  let before: { reconnects: number; gaps: number };
  const watcher = async () => {
    const health = await import("@/app/api/health/route");
    return ((await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ watcher: { reconnects: number; gaps: number } }> }).nodes[0]!.watcher;
  };

  beforeAll(async () => {
    ({ cluster, set } = await setUpConsoleOverSentinels("lockscope-sentinel-hostnames-", { hostnames: true }));
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(cluster);
    await set?.close();
  });

  it("counts one failover and one lost lock", async () => {
    const one = await import("@/app/api/locks/[resource]/route");
    const ready = await import("@/app/api/ready/route");
    const metrics = await import("@/app/metrics/route");
    const detail = async (resource: string) => (await call(one.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } })).body as LockDetail;
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000);
    before = await watcher();

    const primary = new Redis(set.primary.port, "127.0.0.1", { maxRetriesPerRequest: 0, retryStrategy: () => null });
    primary.on("error", () => undefined);
    for (const r of set.replicas) r.pause();
    await primary.client("KILL", "TYPE", "replica");
    await primary.set("lock:hostnames/lost", "holder-a", "PX", 60_000);
    await until("the console saw the lock", async () => (await detail("lock:hostnames/lost")).state === "held");
    primary.disconnect();
    await set.primary.kill();
    for (const r of set.replicas) r.resume();

    await until("the lost lock on its timeline", async () => (await detail("lock:hostnames/lost")).timeline?.some((t) => t.type === "lost-in-failover"), 60_000);
    // Both ways of seeing the failover (the watcher reaching the promoted replica, the sentinels' announcement) have
    // come by now: the watcher is on the new primary and the announcement follows within moments.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const text = (await call(metrics.GET, "GET", "/metrics")).body as string;

    expect(text).toMatch(/^lockscope_failovers_total\{deployment="default"\} 1$/m);
    expect(text).toMatch(/^lockscope_locks_lost_in_failover_total\{deployment="default"\} 1$/m);
    expect((await detail("lock:hostnames/lost")).timeline.filter((t) => t.type === "lost-in-failover")).toHaveLength(1);
  }, 120_000);

  it("follows the failover with one reconnect and one gap, as where the sentinels announce addresses", async () => {
    // (The failover of the test above: the watcher moved to the promoted replica once, not again on the announcement.)
    const after = await watcher();
    expect(after.reconnects - before.reconnects).toBe(1);
    expect(after.gaps - before.gaps).toBe(1);
  });
});
