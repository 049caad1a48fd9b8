import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HistoryModule from "@/app/api/history/route";
import type * as LockHistoryModule from "@/app/api/locks/[resource]/history/route";
import type * as ServiceModule from "@/server/history/service";
import type { HoldsAnswer } from "@/lib/history/types";
import { call, VIEWER_TOKEN } from "../support/console";
import { setUpHistoryConsole, type HistoryConsole } from "../support/history";

/** "Who held it at…" of a busy lock, asked of the lock and of every lock at that instant. */
describe("lock history: who held a busy lock at an instant", () => {
  let history: HistoryConsole | undefined;
  let historyRoute: typeof HistoryModule;
  let lockHistoryRoute: typeof LockHistoryModule;
  let service: typeof ServiceModule;

  beforeAll(async () => {
    history = await setUpHistoryConsole();
    historyRoute = await import("@/app/api/history/route");
    lockHistoryRoute = await import("@/app/api/locks/[resource]/history/route");
    service = await import("@/server/history/service");
  }, 60_000);

  afterAll(async () => {
    await history?.tearDown();
  });

  const heldOfLock = async (resource: string, at: number) => {
    const res = await call(lockHistoryRoute.GET, "GET", `/api/locks/${encodeURIComponent(resource)}/history?at=${at}`, { token: VIEWER_TOKEN, params: { resource } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return (res.body as HoldsAnswer).holds.map((h) => [h.token, h.acquiredAt, h.endedAt]);
  };
  const heldOfAll = async (resource: string, at: number) => {
    const res = await call(historyRoute.GET, "GET", `/api/history?at=${at}`, { token: VIEWER_TOKEN });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return (res.body as HoldsAnswer).holds.filter((h) => h.resource === resource).map((h) => [h.token, h.acquiredAt, h.endedAt]);
  };

  it("finds a hold acquired before the lock's last hundred holds, as the instant's list of every lock does", async () => {
    const sink = service.getHistory()!.recorder;
    const resource = "lock:busy";
    const t0 = Date.parse("2026-03-01T03:00:00Z");
    const min = 60_000;
    const sec = 1_000;
    // A long hold (a semaphore's permit kept, say, or a hold whose end was learnt late) while 150 short ones came and went.
    sink.record({ at: t0, resource, deployment: "default", type: "acquired", token: "tok-long" });
    for (let i = 0; i < 150; i++) {
      sink.record({ at: t0 + (i + 1) * 10 * sec, resource, deployment: "default", type: "acquired", token: `tok-${i}` });
      sink.record({ at: t0 + (i + 1) * 10 * sec + 5 * sec, resource, deployment: "default", type: "released", token: `tok-${i}` });
    }
    sink.record({ at: t0 + 30 * min, resource, deployment: "default", type: "expired", token: "tok-long" });
    expect(await sink.flush()).toBe(true);

    const at = t0 + 28 * min;
    expect(await heldOfAll(resource, at)).toEqual([["tok-long", t0, t0 + 30 * min]]);
    expect(await heldOfLock(resource, at)).toEqual([["tok-long", t0, t0 + 30 * min]]);
    // While a short one was held too: both, newest acquisition first, a page at a time as well.
    const during = t0 + 100 * sec + 2 * sec;
    const both = [
      ["tok-9", t0 + 100 * sec, t0 + 105 * sec],
      ["tok-long", t0, t0 + 30 * min],
    ];
    expect(await heldOfLock(resource, during)).toEqual(both);
    const paged: unknown[] = [];
    let query = `?at=${during}&limit=1`;
    for (;;) {
      const res = await call(lockHistoryRoute.GET, "GET", `/api/locks/${encodeURIComponent(resource)}/history${query}`, { token: VIEWER_TOKEN, params: { resource } });
      const body = res.body as HoldsAnswer;
      paged.push(...body.holds.map((h) => [h.token, h.acquiredAt, h.endedAt]));
      if (!body.next) break;
      query = `?at=${during}&limit=1&before=${body.next}`;
    }
    expect(paged).toEqual(both);
  });

  it("records a value taken again seconds after its release as a hold of its own (a Redisson thread's next job)", async () => {
    const sink = service.getHistory()!.recorder;
    const resource = "lock:again";
    // Redisson's value is its client and thread: the same thread's next job takes the lock with the same value.
    const token = "1b3e4a1c-7f00-4c2e-9a7e-3c5d7e9f1a2b:57";
    const t0 = Date.parse("2026-03-02T03:00:00Z");
    const sec = 1_000;
    const holds: Array<[number, number]> = [
      [t0, t0 + 2 * sec],
      [t0 + 3 * sec, t0 + 4 * sec],
      [t0 + 6 * sec, t0 + 9 * sec],
    ];
    // Each event written on its own, as events seconds apart are.
    for (const [from, to] of holds) {
      sink.record({ at: from, resource, deployment: "default", type: "acquired", token });
      expect(await sink.flush()).toBe(true);
      sink.record({ at: to, resource, deployment: "default", type: "released", token });
      expect(await sink.flush()).toBe(true);
    }
    for (const [from, to] of holds) expect(await heldOfLock(resource, from + 500)).toEqual([[token, from, to]]);
    // Between two of them, nobody held it.
    expect(await heldOfLock(resource, t0 + 5 * sec)).toEqual([]);
    expect(await heldOfAll(resource, t0 + 7 * sec)).toEqual([[token, t0 + 6 * sec, t0 + 9 * sec]]);
  });
});
