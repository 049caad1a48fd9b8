import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HistoryModule from "@/app/api/history/route";
import type * as LockHistoryModule from "@/app/api/locks/[resource]/history/route";
import { call, startLiveReconciled, VIEWER_TOKEN } from "../support/console";
import { setUpHistoryConsole, type HistoryConsole } from "../support/history";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A lock key longer than 2,000 bytes is shown live but never recorded (PostgreSQL cannot index it). Its history
 * must say so, not "nothing recorded yet" as if its events were still to come.
 */
describe("lock history of a key too long to record", () => {
  let history: HistoryConsole | undefined;
  let cluster: TestCluster;
  let historyRoute: typeof HistoryModule;
  let lockHistoryRoute: typeof LockHistoryModule;
  // 800 characters of three bytes each: within what the console opens (1,024 characters), past what it records.
  const resource = `lock:${"鍵".repeat(800)}`;

  beforeAll(async () => {
    history = await setUpHistoryConsole();
    ({ cluster } = history);
    historyRoute = await import("@/app/api/history/route");
    lockHistoryRoute = await import("@/app/api/locks/[resource]/history/route");
    await startLiveReconciled();
  }, 60_000);

  afterAll(async () => {
    await history?.tearDown();
  });

  it("answers that its history is not recorded, naming the limit, for its events and for who held it", async () => {
    await cluster.client(0).set(resource, "tok-long", "PX", 60_000);
    const { getDeploymentLives } = await import("@/server/live");
    await until("the lock in the live view", () => Promise.resolve(getDeploymentLives()[0]!.store.holdsValue(resource, "tok-long")), 20_000);
    const path = `/api/locks/${encodeURIComponent(resource)}/history`;
    for (const query of ["", `?at=${Date.now()}`]) {
      const res = await call(lockHistoryRoute.GET, "GET", `${path}${query}`, { token: VIEWER_TOKEN, params: { resource } });
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      expect((res.body as { error: { message: string } }).error.message).toMatch(/not recorded for a key longer than 2,000 bytes/);
    }
    const all = await call(historyRoute.GET, "GET", `/api/history?resource=${encodeURIComponent(resource)}&at=${Date.now()}`, { token: VIEWER_TOKEN });
    expect(all.status, JSON.stringify(all.body)).toBe(422);
  });
});
