import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HistoryModule from "@/app/api/history/route";
import type { HoldsAnswer } from "@/lib/history/types";
import { call, startLiveReconciled, VIEWER_TOKEN } from "../support/console";
import { setUpHistoryConsole, type HistoryConsole } from "../support/history";

const HOUR = 60 * 60_000;

/**
 * A console once watched a deployment named `billing` too; it was taken out of the configuration two days ago, with
 * a lock still held there as far as the history knows. This console watches `default` only.
 */
describe("lock history of a deployment no console watches any more", () => {
  let history: HistoryConsole | undefined;
  let url: string;
  let db: pg.Client;
  let historyRoute: typeof HistoryModule;

  beforeAll(async () => {
    history = await setUpHistoryConsole();
    ({ url } = history);
    historyRoute = await import("@/app/api/history/route");
    db = new pg.Client(url);
    await db.connect();
    await startLiveReconciled();
  }, 60_000);

  afterAll(async () => {
    await db?.end();
    await history?.tearDown();
  });

  const holdsAt = async (at: number) => {
    const res = await call(historyRoute.GET, "GET", `/api/history?at=${at}`, { token: VIEWER_TOKEN });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return (res.body as HoldsAnswer).holds.map((h) => [h.deployment, h.resource, h.endedAt, h.endType]);
  };

  it("ends its open holds as no longer watched, from when it was last watched, and leaves a watched deployment's alone", async () => {
    const { keepWatched } = await import("@/server/history/service");
    const now = Date.now();
    // The hold `billing` left open; and one of `default`'s, whose lock this console's live view has not read yet.
    await db.query(
      `INSERT INTO lock_holds_current (resource, deployment, token, acquired_at) VALUES
         ('lock:invoices', 'billing', 'tok-billing', to_timestamp($1 / 1000.0)),
         ('lock:here', 'default', 'tok-here', to_timestamp($1 / 1000.0))`,
      [now - 3 * 24 * HOUR],
    );
    // Until it is ended, "what was held now" lists it as held.
    expect(await holdsAt(now)).toEqual([
      ["default", "lock:here", null, null],
      ["billing", "lock:invoices", null, null],
    ]);
    // The last time a console watched `billing`: two days ago.
    await keepWatched(["billing"], now - 2 * 24 * HOUR);

    expect(await keepWatched(["default"], now)).toBe(1);
    expect(await holdsAt(now)).toEqual([["default", "lock:here", null, null]]);
    // Held, as far as anyone knows, until it was last watched.
    expect(await holdsAt(now - 2 * 24 * HOUR - 60_000)).toEqual([
      ["default", "lock:here", null, null],
      ["billing", "lock:invoices", now - 2 * 24 * HOUR, "unwatched"],
    ]);
    // Watched an hour ago: within the day a console may be down for, nothing of it is ended.
    await db.query("INSERT INTO lock_holds_current (resource, deployment, token, acquired_at) VALUES ('lock:batch', 'reports', 'tok-r', now() - interval '2 days')");
    await keepWatched(["reports"], now - HOUR);
    expect(await keepWatched(["default"], now)).toBe(0);
    expect((await holdsAt(now)).map((h) => h[0])).toEqual(["reports", "default"]);
  });
});
