import { Semaphore } from "redis-semaphore";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as LockHistoryModule from "@/app/api/locks/[resource]/history/route";
import type * as LockModule from "@/app/api/locks/[resource]/route";
import type { HoldsAnswer } from "@/lib/history/types";
import type { LockDetail } from "@/lib/locks/types";
import { call, startLiveReconciled, VIEWER_TOKEN } from "../support/console";
import { setUpHistoryConsole, type HistoryConsole } from "../support/history";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A semaphore is one lock whose holders join and leave. "Who held it at T" names the holders of that moment, and
 * once the last one leaves, the history says it is no longer held (not "still held" until an hourly check).
 */
describe("lock history of a lock whose holders join and leave (redis-semaphore)", () => {
  let history: HistoryConsole | undefined;
  let cluster: TestCluster;
  let lockRoute: typeof LockModule;
  let historyRoute: typeof LockHistoryModule;
  const resource = "semaphore:reports";

  beforeAll(async () => {
    history = await setUpHistoryConsole();
    ({ cluster } = history);
    lockRoute = await import("@/app/api/locks/[resource]/route");
    historyRoute = await import("@/app/api/locks/[resource]/history/route");
    await startLiveReconciled();
  }, 60_000);

  afterAll(async () => {
    await history?.tearDown();
  });

  const live = (check: (l: LockDetail | null) => boolean) =>
    until(`${resource} as expected`, async () => {
      const res = await call(lockRoute.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } });
      const l = res.status === 200 ? (res.body as LockDetail) : null;
      return check(l) ? true : null;
    });
  const heldAt = async (at: number) => {
    const { getHistory } = await import("@/server/history/service");
    expect(await getHistory()!.recorder.flush()).toBe(true);
    const res = await call(historyRoute.GET, "GET", `/api/locks/${encodeURIComponent(resource)}/history?at=${at}`, { token: VIEWER_TOKEN, params: { resource } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return (res.body as HoldsAnswer).holds;
  };
  const holderIds = (token: string) => token.split("\n").filter(Boolean).sort();

  it("names the holders of each moment, and ends the hold when the last holder leaves", async () => {
    const options = { lockTimeout: 30_000, acquireTimeout: 1_000, refreshInterval: 0 };
    const a = new Semaphore(cluster.client(0), "reports", 3, options);
    const b = new Semaphore(cluster.client(0), "reports", 3, options);
    await a.acquire();
    await live((l) => l?.state === "held" && l.holders.length === 1);
    await b.acquire();
    await live((l) => l?.holders.length === 2);
    await a.release();
    await live((l) => l?.holders.length === 1);
    const onlyB = Date.now();
    await b.release();
    await live((l) => l === null || l.state !== "held");
    const after = Date.now() + 1;

    // While B alone held it, the hold of that moment names B alone.
    const then = await heldAt(onlyB);
    expect(then.map((h) => holderIds(h.token))).toEqual([[b.identifier]]);
    expect(then[0]?.endType).toBe("released");
    // Once B left too, nothing is held (the hold ended with it).
    expect(await heldAt(after)).toEqual([]);
  });
});
