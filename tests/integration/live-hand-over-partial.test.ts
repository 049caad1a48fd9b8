import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LiveModule from "@/server/live";
import type { TestCluster } from "../support/redis";
import { setUpConsole, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

/**
 * A Redlock whose release reached two of its three nodes, then, on the node left holding it, deleted and taken by
 * another client within one notification batch (that client got no other node): the first lock ended there and the
 * one left is another holder's, on fewer nodes than a quorum.
 */
describe("a partial lock replaced by another holder's value", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let live: typeof LiveModule;
  const shown = (resource: string) => live.getLockStore().get(resource, Date.now());
  const tokens = (resource: string) => shown(resource)?.nodes.map((n) => n.token);

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

  it("ends the first holder's lock and shows the next one's acquisition, holder and age", async () => {
    const resource = "lock:hand-over-partial";
    await Promise.all(clients.map((c) => c.set(resource, "first-holder", "PX", 60_000)));
    await until("the lock held on three nodes", () => shown(resource)?.quorumHeld === 3);
    const firstAcquiredAt = shown(resource)?.acquiredAt;

    // The release reaches nodes 1 and 2 only.
    await clients[1]!.del(resource);
    await clients[2]!.del(resource);
    await until("the lock partial on node 0", () => shown(resource)?.state === "partial" && tokens(resource)?.join() === "first-holder,,");

    expect(shown(resource)?.timeline.at(-1)?.type).toBe("partial");
    const entriesBefore = shown(resource)?.timeline.length ?? 0;

    // On node 0, one transaction: the key deleted and another client's value written.
    const before = Date.now();
    await clients[0]!.multi().del(resource).set(resource, "next-holder", "PX", 60_000).exec();
    // (While the nodes disagree the view waits a moment before it counts: node 0's value shows first.)
    const lock = await until("the next value's arrival on the lock's timeline", () => {
      const l = shown(resource);
      return l?.nodes[0]?.token === "next-holder" && l.timeline.length > entriesBefore ? l : null;
    });

    const entries = lock.timeline.slice(entriesBefore);
    expect(entries.map((t) => t.type)).toEqual(["released", "acquired"]);
    expect(entries.at(-1)?.detail).toBe("by a foreign client, on 1 of 3 nodes (no quorum)");
    expect(lock.acquiredAt).not.toBe(firstAcquiredAt);
    expect(lock.acquiredAt).toBeGreaterThanOrEqual(before);
  });

  it("does the same when the next value arrives on another node than the one the first holder's value left", async () => {
    const resource = "lock:hand-over-partial-elsewhere";
    await Promise.all(clients.map((c) => c.set(resource, "first-holder", "PX", 60_000)));
    await until("the lock held on three nodes", () => shown(resource)?.quorumHeld === 3);

    // The release reaches nodes 1 and 2 only.
    await clients[1]!.del(resource);
    await clients[2]!.del(resource);
    await until("the lock partial on node 0", () => shown(resource)?.state === "partial" && tokens(resource)?.join() === "first-holder,,");
    const entriesBefore = shown(resource)?.timeline.length ?? 0;

    // Node 0's copy goes as another client takes node 1, both before the console reads them.
    const before = Date.now();
    await Promise.all([clients[0]!.del(resource), clients[1]!.set(resource, "next-holder", "PX", 60_000)]);
    const lock = await until("the next value on node 1 alone", () => {
      const l = shown(resource);
      return l?.nodes.map((n) => n.token).join() === ",next-holder," && l.timeline.length > entriesBefore ? l : null;
    });

    expect(lock.timeline.slice(entriesBefore).map((t) => t.type)).toEqual(["released", "acquired"]);
    expect(lock).toMatchObject({ state: "partial", leading: "next-holder" });
    expect(lock.acquiredAt).toBeGreaterThanOrEqual(before);
  });
});
