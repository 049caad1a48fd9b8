import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as ServiceModule from "@/server/history/service";
import { call, VIEWER_TOKEN } from "../support/console";
import { setUpHistoryConsole, type HistoryConsole } from "../support/history";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A lock value of raw bytes (redlock-rs writes 20 random ones): one in about thirteen holds a NUL byte, which the
 * history stores as U+FFFD (PostgreSQL's text takes no NUL). The check for holds whose end no console saw asks the
 * live view about the hold as stored: a lock still held with such a value must not be ended as unseen.
 */
describe("lock history: a lock value with a NUL byte", () => {
  let history: HistoryConsole | undefined;
  let url: string;
  let cluster: TestCluster;
  let service: typeof ServiceModule;

  beforeAll(async () => {
    history = await setUpHistoryConsole();
    ({ cluster, url } = history);
    service = await import("@/server/history/service");
  }, 60_000);

  afterAll(async () => {
    await history?.tearDown();
  });

  it("keeps the hold of a lock still held with it open, and ends one of a value it no longer has", async () => {
    const resource = "lock:binary/nul";
    const value = "\u0007\u0000\u0011rs-token\u0000";
    // Its hold, opened ten minutes ago (past the check's grace) by this console or another.
    const sink = service.getHistory()!.recorder;
    sink.record({ at: Date.now() - 10 * 60_000, resource, deployment: "default", type: "acquired", token: value });
    expect(await sink.flush()).toBe(true);
    const node = cluster.client(0);
    await node.set(resource, value, "PX", 600_000);
    const locks = await import("@/app/api/locks/route");
    await until("the lock shown held", async () =>
      ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Array<{ resource: string; state: string }> }).locks.some((l) => l.resource === resource && l.state === "held"),
    );
    expect(await sink.flush()).toBe(true);
    const { getDeploymentLives } = await import("@/server/live");
    // The check as the live view runs it.
    const check = () => service.endUnseenHolds("default", (r, token) => getDeploymentLives()[0]!.store.holdsAcquisition(r, token));

    const db = new pg.Client(url);
    await db.connect();
    try {
      const open = async () => (await db.query("SELECT 1 FROM lock_holds_current WHERE resource = $1", [resource])).rowCount;
      const opened = async () => Number((await db.query<{ ms: string }>("SELECT (extract(epoch FROM acquired_at) * 1000)::bigint AS ms FROM lock_holds_current WHERE resource = $1", [resource])).rows[0]?.ms);
      expect(Date.now() - (await opened())).toBeGreaterThan(9 * 60_000);
      expect(await check()).toBe(0);
      expect(await open()).toBe(1);

      // A hold of another such value, which the lock no longer has (its end happened while no console watched): that
      // one is ended as unseen, the live one kept.
      sink.record({ at: Date.now() - 9 * 60_000, resource, deployment: "default", type: "acquired", token: "\u0007\u0000\u0011earlier\u0000" });
      expect(await sink.flush()).toBe(true);
      expect(await check()).toBe(1);
      expect(await open()).toBe(1);
      const ended = await db.query<{ token: string; end_type: string }>("SELECT token, end_type FROM lock_holds WHERE resource = $1", [resource]);
      expect(ended.rows).toEqual([{ token: "\u0007\uFFFD\u0011earlier\uFFFD", end_type: "unseen" }]);
    } finally {
      await db.end();
    }
  });
});
