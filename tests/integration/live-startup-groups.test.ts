import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as GroupsModule from "@/app/api/locks/groups/route";
import type { LockGroupsPage } from "@/lib/locks/groups";
import type { WatcherStatus } from "@/lib/locks/types";
import { holdLocks, type TestCluster } from "../support/redis";
import { until } from "../support/wait";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/** Locks held before the console starts: enough that reading them takes a visible while. */
const HELD = 150_000;

/**
 * A script polling the grouped view while the console starts: the counts it gets cover the keys read so far, and
 * the answer says so (the node is still being read), as `GET /api/locks` does.
 */
describe("the grouped view during start-up", () => {
  let cluster: TestCluster;
  let groups: typeof GroupsModule;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    await holdLocks(cluster.client(0), "lock:startup", HELD);
    groups = await import("@/app/api/locks/groups/route");
  }, 120_000);

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  const grouped = async () => (await call(groups.GET, "GET", "/api/locks/groups", { token: VIEWER_TOKEN })).body as LockGroupsPage & { nodes?: WatcherStatus[] };

  it("says which nodes are still being read beside counts that lack their locks, then counts every lock", async () => {
    const partial = await until(
      "a count taken while the node is read, said to be so",
      async () => {
        const body = await grouped();
        return body.nodes?.[0]?.reading && body.locks > 0 && body.locks < HELD ? body : null;
      },
      30_000,
      20,
    );
    expect(partial.nodes?.[0]).toMatchObject({ nodeId: "node-0", up: false });
    expect(partial.nodes?.[0]?.reading?.keysRead).toBeGreaterThan(0);

    const done = await until(
      "every lock counted, the node read",
      async () => {
        const body = await grouped();
        return body.locks === HELD && body.nodes?.[0]?.up && body.nodes[0].reading === undefined ? body : null;
      },
      90_000,
      100,
    );
    expect(done.groups.find((g) => g.group === "lock:startup")).toMatchObject({ locks: HELD, held: HELD });
  }, 150_000);
});
