import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as MetricsRoute from "@/app/metrics/route";
import type { Redlock as RedlockClass } from "@lockscope/redlock";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import { samples } from "../support/prometheus";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A lock group seen for the first time gets its series when its first count comes. Prometheus takes a series'
 * first sample as its start: were it above 0, rate() and increase() would never see those counts (a first burst
 * of contention on a group, the engine's first attempts on it). Each such series is first scraped at 0, and its
 * counts follow at the next scrape.
 */
describe("/metrics series made for a group seen for the first time", () => {
  let cluster: TestCluster;
  let route: typeof MetricsRoute;
  let redlock: RedlockClass;
  /** The value each series had in the first scrape that showed it. */
  const firstShown = new Map<string, number>();
  const scrape = async () => {
    const s = samples(String((await call(route.GET, "GET", "/metrics", { token: null })).body));
    for (const [series, value] of s) if (!firstShown.has(series)) firstShown.set(series, value);
    return s;
  };

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    route = await import("@/app/metrics/route");
    const { startLive, waitUntilReconciled } = await import("@/server/live");
    (await import("@/server/console-metrics")).startConsoleMetrics();
    const { instrumentRedlock } = await import("@/server/engine-metrics");
    const { Redlock } = await import("@lockscope/redlock");
    startLive();
    expect(await waitUntilReconciled(30_000)).toBe(true);
    redlock = new Redlock(cluster.clients(), { retryCount: 0, label: "new-series-test", nodeTimeoutMs: 1_000 });
    instrumentRedlock(redlock);
  }, 60_000);

  afterAll(async () => {
    await redlock?.quit();
    await tearDownConsole(cluster);
  });

  it("first shows a new group's contention and engine attempts at 0, then counts them", async () => {
    const contention = 'lockscope_lock_contention_events_total{group="lock:fresh",traffic="production"}';
    const conflicts = 'lockscope_redlock_acquire_attempts_total{group="lock:fresh",result="conflict"}';
    const acquired = 'lockscope_redlock_acquire_attempts_total{group="lock:fresh",result="acquired"}';
    expect((await scrape()).has(contention)).toBe(false);
    const held = await redlock.acquire(["lock:fresh/1"], 30_000);
    await expect(redlock.acquire(["lock:fresh/1"], 30_000)).rejects.toThrow();
    // The engine's attempts are counted as they happen: the next scrape is the first to show their series.
    const first = await scrape();
    expect(first.get(acquired)).toBe(0);
    expect(first.get(conflicts)).toBe(0);
    const next = await scrape();
    expect(next.get(acquired)).toBe(1);
    expect(next.get(conflicts)).toBe(1);
    // From then on a count shows at the next scrape.
    await expect(redlock.acquire(["lock:fresh/1"], 30_000)).rejects.toThrow();
    expect((await scrape()).get(conflicts)).toBe(2);
    // The contention telemetry comes through the nodes, in its own time: whichever scrape first showed its series
    // showed it at 0.
    await until("the group's contention counted", async () => (((await scrape()).get(contention) ?? 0) >= 1 ? true : null), 30_000, 50);
    expect(firstShown.get(contention)).toBe(0);
    await held.release();
  });
});
