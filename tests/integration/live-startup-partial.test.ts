import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as MetricsRoute from "@/app/metrics/route";
import type * as LockModule from "@/app/api/locks/[resource]/route";
import type { LockDetail } from "@/lib/locks/types";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import { holdLocks, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

/** Locks held on two nodes of three before the console starts: enough that some are read as its start-up ends. */
const HELD = 5_000;

/**
 * A console starting over locks that some nodes hold and one does not (a Redlock that reached two nodes of
 * three, or a node restarted empty): the nodes disagree, and the lock is counted once that has lasted a moment.
 * Found held at start, it is no acquisition, whenever that moment comes: the lock events /metrics exports
 * (and the Grafana panel of lock events a second) show no burst of acquisitions at every restart.
 */
describe("start-up over locks held on some nodes", () => {
  let cluster: TestCluster;
  let metrics: typeof MetricsRoute;
  let lock: typeof LockModule;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    await holdLocks(cluster.client(0), "lock:two-of-three", HELD);
    await holdLocks(cluster.client(1), "lock:two-of-three", HELD);
    metrics = await import("@/app/metrics/route");
    lock = await import("@/app/api/locks/[resource]/route");
    const { startLive, waitUntilReconciled } = await import("@/server/live");
    (await import("@/server/console-metrics")).startConsoleMetrics();
    startLive();
    expect(await waitUntilReconciled(60_000)).toBe(true);
  }, 120_000);

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("lists them held on two nodes of three, found at start, and counts no acquisition", async () => {
    const scrape = async () => String((await call(metrics.GET, "GET", "/metrics", { token: null })).body);
    const value = (text: string, series: string) => Number(text.split("\n").find((l) => l.startsWith(`${series} `))?.split(" ")[1] ?? Number.NaN);
    const text = await until("every lock counted held", async () => {
      const t = await scrape();
      return value(t, 'lockscope_locks_held{state="held"}') === HELD ? t : null;
    }, 30_000, 100);
    // (Every lock waited out the nodes' disagreement before it was counted.)
    expect(value(text, 'lockscope_lock_events_total{type="acquired"}')).toBe(0);
    const resource = "lock:two-of-three/4999";
    const shown = (await call(lock.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } })).body as LockDetail;
    expect(shown).toMatchObject({ state: "held", quorumHeld: 2 });
    expect(shown.timeline.map((t) => [t.type, t.detail])).toEqual([["acquired", "already held when the console started watching"]]);
  });
});
