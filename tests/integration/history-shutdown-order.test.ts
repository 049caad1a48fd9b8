import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setUpConsole, startLiveReconciled } from "../support/console";
import { startPostgres, type TestPostgres } from "../support/postgres";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * The console's shutdown runs its steps in order (as the launcher does). Until the live view's watchers stop, the
 * live view goes on seeing locks end: those ends belong in the lock history, or the hold stays open until some
 * console later ends it as `unseen`, at a time that is not its end.
 */
describe("lock history during the console's shutdown", () => {
  let postgres: TestPostgres;
  let url: string;
  let cluster: TestCluster;

  beforeAll(async () => {
    postgres = await startPostgres();
    url = await postgres.createDatabase("console");
    cluster = await setUpConsole({ nodes: 1, env: { AUDIT_DATABASE_URL: url, LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
    await (await import("@/server/postgres/pool")).getDatabase()!.ready(0);
    (await import("@/server/history/service")).getHistory();
    await startLiveReconciled();
  }, 60_000);

  afterAll(async () => {
    await cluster?.close();
    await postgres?.close();
  });

  it("records a release the live view saw before its watchers stopped", async () => {
    const { getDeploymentLives } = await import("@/server/live");
    const { getHistory } = await import("@/server/history/service");
    const live = getDeploymentLives()[0]!;
    const resource = "lock:shutdown/released";
    await cluster.client(0).set(resource, "tok-1", "PX", 600_000);
    await until("the lock in the live view", () => Promise.resolve(live.store.holdsValue(resource, "tok-1")), 20_000);
    expect(await getHistory()!.recorder.flush()).toBe(true);

    const { getShutdownHooks } = await import("@/server/shutdown");
    let released = false;
    for (const hook of [...getShutdownHooks()]) {
      // The lock is released while the console is shutting down, before its watchers stop: the live view sees it.
      if (!released && hook.name.startsWith("live-watchers:")) {
        await cluster.client(0).del(resource);
        await until("the release in the live view", () => Promise.resolve(!live.store.holdsValue(resource, "tok-1")), 20_000);
        released = true;
      }
      await hook.run();
    }
    expect(released).toBe(true);

    const db = new pg.Client(url);
    await db.connect();
    try {
      const open = await db.query("SELECT token FROM lock_holds_current WHERE resource = $1", [resource]);
      const ended = await db.query("SELECT token, end_type FROM lock_holds WHERE resource = $1", [resource]);
      expect(open.rows).toEqual([]);
      expect(ended.rows).toEqual([{ token: "tok-1", end_type: "released" }]);
    } finally {
      await db.end();
    }
  });
});
