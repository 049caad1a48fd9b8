import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LiveModule from "@/server/live";
import type { TestCluster } from "../support/redis";
import { setUpConsole, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

/**
 * A SET NX lock on three Redis nodes whose value is a constant (`1`, as many scripts write): released and taken
 * again by another worker (with its own TTL) on every node, each in one transaction, before the console reads the
 * key. The nodes' notifications say it was deleted: that is a new lock, not the first one going on.
 */
describe("a Redlock taken again with the same value", () => {
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

  it("shows the first lock released and the next one acquired, with its own age", async () => {
    const resource = "lock:same-value-again-redlock";
    await Promise.all(clients.map((c) => c.set(resource, "1", "PX", 60_000)));
    const first = await until("the lock held on three nodes", () => {
      const l = shown(resource);
      return l?.state === "held" && l.quorumHeld === 3 && l.timeline.length > 0 ? l : null;
    });
    const entriesBefore = first.timeline.length;

    const before = Date.now();
    await Promise.all(clients.map((c) => c.multi().del(resource).set(resource, "1", "PX", 90_000).exec()));
    const lock = await until("the change on the lock's timeline", () => {
      const l = shown(resource);
      return l !== null && l.timeline.length > entriesBefore ? l : null;
    });

    expect(lock.timeline.slice(entriesBefore).map((t) => t.type)).toEqual(["released", "acquired"]);
    expect(lock.state).toBe("held");
    expect(lock.acquiredAt).toBeGreaterThanOrEqual(before);
  });

  it("does the same when the next worker's writes reach the nodes one after another, each read on its own", async () => {
    const resource = "lock:same-value-again-redlock/one-by-one";
    await Promise.all(clients.map((c) => c.set(resource, "1", "PX", 60_000)));
    const first = await until("the lock held on three nodes", () => {
      const l = shown(resource);
      return l?.state === "held" && l.quorumHeld === 3 && l.timeline.length > 0 ? l : null;
    });
    const entriesBefore = first.timeline.length;

    const before = Date.now();
    // A worker on the far side of a network: a few milliseconds between one node and the next.
    for (const c of clients) {
      await c.multi().del(resource).set(resource, "1", "PX", 90_000).exec();
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
    const lock = await until("the change on the lock's timeline", () => {
      const l = shown(resource);
      return l !== null && l.timeline.length > entriesBefore ? l : null;
    });

    expect(lock.timeline.slice(entriesBefore).map((t) => t.type)).toEqual(["released", "acquired"]);
    expect(lock.state).toBe("held");
    expect(lock.acquiredAt).toBeGreaterThanOrEqual(before);
  });
});
