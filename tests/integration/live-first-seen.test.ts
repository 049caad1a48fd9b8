import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockDetail, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A foreign lock (its value carries no acquisition time) is held since the consoles first saw it, a time shared
 * on node 0. A lock made again of the same value after the first one ended (a Redisson holder is its client and
 * thread, so a job that locks the same resource again writes the same field) is a new lock: held since then.
 */
describe("held-since of a foreign lock made again of the same value", () => {
  let cluster: TestCluster;
  let clients: Redis[];

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    clients = cluster.clients();
    await startLiveReconciled();
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("counts from the new acquisition, on this console and in the record the others read", async () => {
    const { firstSeenKey } = await import("@/server/live/first-seen");
    const resource = "lock:{nightly}:report";
    const holder = "8743c9c0-0795-4907-87fd-6c719a6b4586:91";
    const take = () => Promise.all(clients.map((c) => c.multi().hset(resource, holder, "1").pexpire(resource, 60_000).exec()));
    const record = async () => Number(await clients[0]!.get(firstSeenKey(resource, holder)));

    await take();
    const first = await until("the first lock held, its first sighting shared", async () => {
      const d = await lockDetail(resource);
      const shared = await record();
      return d?.state === "held" && d.acquiredAt !== null && shared === d.acquiredAt ? d.acquiredAt : null;
    });
    await new Promise((r) => setTimeout(r, 1_500));
    await Promise.all(clients.map((c) => c.del(resource)));
    await until("the first lock released", async () => (await lockDetail(resource))?.state === "released");
    await new Promise((r) => setTimeout(r, 500));
    const retakenAt = Date.now();
    await take();
    const again = await until("the second lock held, its first sighting shared", async () => {
      const d = await lockDetail(resource);
      const shared = await record();
      return d?.state === "held" && d.acquiredAt !== null && d.acquiredAt !== first && shared === d.acquiredAt ? d.acquiredAt : null;
    }, 5_000).catch(async () => (await lockDetail(resource))?.acquiredAt);
    expect(again).toBeGreaterThanOrEqual(retakenAt - 50);
    // (Given a moment for a late adoption of the old record to show.)
    await new Promise((r) => setTimeout(r, 300));
    expect((await lockDetail(resource))?.acquiredAt).toBe(again);
    expect(await record()).toBe(again);
  });
});
