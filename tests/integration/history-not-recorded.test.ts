import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as LockHistoryModule from "@/app/api/locks/[resource]/history/route";
import type { EventsAnswer, HoldsAnswer } from "@/lib/history/types";
import { call, setUpConsole, tearDownConsole, useDeployments, VIEWER_TOKEN } from "../support/console";
import { startCluster, type TestCluster } from "../support/redis";

type ErrorBody = { error?: { code: string; message: string } };

/** A console watching two deployments and keeping no lock history (no AUDIT_DATABASE_URL). */
describe("a lock's history where none is recorded, with several deployments", () => {
  let orders: TestCluster;
  let cache: TestCluster;
  let lockHistoryRoute: typeof LockHistoryModule;

  beforeAll(async () => {
    orders = await setUpConsole({ nodes: 1 });
    cache = await startCluster(1);
    useDeployments([
      { name: "orders", kind: "standalone", url: orders.urls[0] },
      { name: "cache", kind: "standalone", url: cache.urls[0] },
    ]);
    lockHistoryRoute = await import("@/app/api/locks/[resource]/history/route");
    const { waitUntilReconciled } = await import("@/server/live");
    expect(await waitUntilReconciled(20_000)).toBe(true);
  }, 60_000);

  afterAll(async () => {
    await tearDownConsole(orders);
    await cache?.close();
  });

  const lockHistory = async <T>(resource: string, query = "") => {
    const res = await call(lockHistoryRoute.GET, "GET", `/api/locks/${encodeURIComponent(resource)}/history${query}`, { token: VIEWER_TOKEN, params: { resource } });
    return { status: res.status, body: res.body as T & ErrorBody };
  };

  it("answers that history is not recorded, not which deployment to choose, for a lock on none or on both", async () => {
    await orders.client(0).set("lock:both", "v1", "PX", 60_000);
    await cache.client(0).set("lock:both", "v2", "PX", 60_000);
    const { getDeploymentLives } = await import("@/server/live");
    const lives = getDeploymentLives();
    const { until } = await import("../support/wait");
    await until("the lock held on both deployments", () => Promise.resolve(lives.every((l) => l.store.get("lock:both", Date.now()) !== null)));
    for (const resource of ["lock:both", "lock:never-held"]) {
      const events = await lockHistory<EventsAnswer>(resource);
      expect(events.status, JSON.stringify(events.body)).toBe(200);
      expect(events.body).toEqual({ events: [], next: null, recording: false, deployments: ["orders", "cache"] });
      const holds = await lockHistory<HoldsAnswer>(resource, "?at=2026-03-01T03:12:00Z");
      expect(holds.status, JSON.stringify(holds.body)).toBe(200);
      expect(holds.body).toMatchObject({ holds: [], next: null, recording: false });
    }
    // A deployment it does not watch is still a mistake to say.
    const unknown = await lockHistory<EventsAnswer>("lock:both", "?deployment=billing");
    expect(unknown.status).toBe(400);
  });
});
