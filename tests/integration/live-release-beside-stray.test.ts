import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LiveModule from "@/server/live";
import type { TestCluster } from "../support/redis";
import { setUpConsole, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

/**
 * A Redlock held on two of three nodes, a contender's value left on the third (it took no other node), released by
 * its holder: the release is a release, not a hand-over to the value that was there all along.
 */
describe("a Redlock released beside a value another client left on one node", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let live: typeof LiveModule;
  const shown = (resource: string) => live.getLockStore().get(resource, Date.now());

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: "lock:*" } });
    clients = cluster.clients();
    live = await import("@/server/live");
    live.startLive();
    expect(await live.waitUntilReconciled(30_000)).toBe(true);
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("says the lock was released, then the value left on one node as a lock of its own", async () => {
    const resource = "lock:beside-stray";
    await clients[2]!.set(resource, "contender", "PX", 60_000);
    await Promise.all([clients[0]!.set(resource, "holder", "PX", 60_000), clients[1]!.set(resource, "holder", "PX", 60_000)]);
    await until("the lock held by its quorum", () => shown(resource)?.token === "holder");
    const entriesBefore = shown(resource)?.timeline.length ?? 0;

    await Promise.all([clients[0]!.del(resource), clients[1]!.del(resource)]);
    const lock = await until("the release on the timeline", () => {
      const l = shown(resource);
      return l !== null && l.timeline.length >= entriesBefore + 2 ? l : null;
    });

    expect(lock.timeline.slice(entriesBefore).map((t) => `${t.type}${t.detail ? `: ${t.detail}` : ""}`)).toEqual([
      "released",
      "acquired: by a foreign client, on 1 of 3 nodes (no quorum)",
    ]);
    expect(lock).toMatchObject({ state: "partial", leading: "contender" });
  });
});
