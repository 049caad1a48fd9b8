import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HistoryModule from "@/app/api/history/route";
import type { HoldsAnswer } from "@/lib/history/types";
import { call, startLiveReconciled, VIEWER_TOKEN } from "../support/console";
import { setUpHistoryConsole, type HistoryConsole } from "../support/history";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A console that starts while its lock node is down has read none of the node's locks: the holds an earlier
 * console recorded, still held on that node, are not ones whose end nobody saw.
 */
describe("lock history's unseen holds while a lock node cannot be read", () => {
  let history: HistoryConsole | undefined;
  let url: string;
  let cluster: TestCluster;
  let db: pg.Client;
  let historyRoute: typeof HistoryModule;

  beforeAll(async () => {
    history = await setUpHistoryConsole();
    ({ cluster, url } = history);
    historyRoute = await import("@/app/api/history/route");
    db = new pg.Client(url);
    await db.connect();
    // Held since minutes ago, as an earlier console recorded it; the node then goes down before this console starts.
    await cluster.client(0).set("lock:down/held", "tok-held", "PX", 600_000);
    await db.query("INSERT INTO lock_holds_current (resource, deployment, token, acquired_at) VALUES ('lock:down/held', 'default', 'tok-held', now() - interval '10 minutes')");
    await cluster.kill(0);
    await startLiveReconciled();
  }, 60_000);

  afterAll(async () => {
    await db?.end();
    await history?.tearDown();
  });

  const holdsNow = async () => {
    const res = await call(historyRoute.GET, "GET", `/api/history?at=${Date.now()}&resource=lock%3Adown%2Fheld`, { token: VIEWER_TOKEN });
    return (res.body as HoldsAnswer).holds.map((h) => [h.token, h.endType]);
  };

  it("ends no hold as unseen until every node has been read, then ends only those no node holds", async () => {
    const { getDeploymentLives } = await import("@/server/live");
    const live = getDeploymentLives()[0]!;
    expect(live.watchers.every((w) => !w.status().up)).toBe(true);
    expect(await live.endUnseenHolds()).toBe(0);
    expect(await holdsNow()).toEqual([["tok-held", null]]);

    // The node back and read: the lock is held, its hold stays open; one no node holds is ended.
    await db.query("INSERT INTO lock_holds_current (resource, deployment, token, acquired_at) VALUES ('lock:down/gone', 'default', 'tok-gone', now() - interval '10 minutes')");
    await cluster.restart(0);
    // (It comes back empty: the holder writes its lock again, with the same value.)
    await cluster.client(0).set("lock:down/held", "tok-held", "PX", 600_000);
    await until("the node read again", () => Promise.resolve(live.watchers.every((w) => w.status().up) && live.store.holdsValue("lock:down/held", "tok-held")), 30_000);
    expect(await live.endUnseenHolds()).toBe(1);
    expect(await holdsNow()).toEqual([["tok-held", null]]);
    const gone = await db.query<{ end_type: string }>("SELECT end_type FROM lock_holds WHERE token = 'tok-gone'");
    expect(gone.rows.map((r) => r.end_type)).toEqual(["unseen"]);
  });
});
