import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REVOKE_CHANNEL } from "@lockscope/redlock";
import type * as MetricsRoute from "@/app/metrics/route";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import { samples } from "../support/prometheus";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * Another console force-releases a lock: this one sees its keys deleted (a release), then the revocation notice
 * that says it was an operator, and shows the lock force-released. The lock ended once: lockscope_lock_events_total
 * counts one end, as force-released, not a release and a force release.
 */
describe("lockscope_lock_events_total for a lock whose end is told after it was seen", () => {
  let cluster: TestCluster;
  let route: typeof MetricsRoute;
  const resource = "lock:orders/7";
  const scrape = async () => samples(String((await call(route.GET, "GET", "/metrics", { token: null })).body));
  const state = async () => {
    const lockRoute = await import("@/app/api/locks/[resource]/route");
    const res = await call(lockRoute.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } });
    return res.status === 200 ? (res.body as { state: string }).state : null;
  };

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    route = await import("@/app/metrics/route");
    const { startLive, waitUntilReconciled } = await import("@/server/live");
    (await import("@/server/console-metrics")).startConsoleMetrics();
    startLive();
    expect(await waitUntilReconciled(30_000)).toBe(true);
  }, 60_000);

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("counts a lock force-released by another console once, as force-released", async () => {
    for (let i = 0; i < 3; i++) await cluster.client(i).set(resource, "holder-7", "PX", 60_000);
    await until("the lock read held", async () => ((await scrape()).get('lockscope_lock_events_total{type="acquired"}') === 1 ? true : null), 30_000, 50);
    // What the other console's release does on the nodes: the keys deleted, then the revocation notice.
    for (let i = 0; i < 3; i++) await cluster.client(i).del(resource);
    await until("the lock read released", async () => ((await state()) === "released" ? true : null), 30_000, 20);
    for (let i = 0; i < 3; i++) await cluster.client(i).publish(REVOKE_CHANNEL, JSON.stringify({ v: 1, resource, value: "holder-7" }));
    await until("the lock read force-released", async () => ((await state()) === "force-released" ? true : null), 30_000, 20);
    const s = await scrape();
    expect(s.get('lockscope_lock_events_total{type="force-released"}')).toBe(1);
    expect(s.get('lockscope_lock_events_total{type="released"}')).toBe(0);
  });
});
