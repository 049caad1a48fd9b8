import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as StreamModule from "@/app/api/locks/stream/route";
import type { TestCluster } from "../support/redis";
import { streamsThrough, type StreamReader } from "../support/stream";
import { setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";

describe("resuming a live stream with an id of another filter's stream", () => {
  let cluster: TestCluster;
  let node: Redis;
  let stream: typeof StreamModule;
  const streams = streamsThrough(() => stream.GET);
  const openStream = streams.open;

  const snapshotOf = (s: StreamReader) => s.until("its snapshot", () => s.events.find((e) => e.event === "snapshot"));

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    node = cluster.clients()[0]!;
    stream = await import("@/app/api/locks/stream/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    streams.closeAll();
    await tearDownConsole(cluster);
  });

  it("sends a snapshot, never only the frames since, so the group's earlier locks are not missing", async () => {
    // A tab follows the orders group all along (its frames carry the group's changes from then on).
    const orders = await openStream({ query: "group=lock:orders" });
    await snapshotOf(orders);
    await node.set("lock:orders/1", "held-before", "PX", 120_000);
    await orders.until("the order lock on the orders stream", () => orders.lock("lock:orders/1")?.state === "held");

    // Three scripts hold streams of other filters, opened after that lock was taken; each takes its id.
    const billing = await openStream({ query: "group=lock:billing" });
    const none = await openStream({ query: "locks=none" });
    const changes = await openStream({ query: "group=lock:orders&locks=changes" });
    for (const s of [billing, none, changes]) await snapshotOf(s);
    const ids = { billing: billing.lastId!, none: none.lastId!, changes: changes.lastId! };

    // Each resumes the orders group, rows and all, with the id it holds.
    const resumed = Object.fromEntries(await Promise.all(Object.entries(ids).map(async ([from, id]) => [from, await openStream({ query: "group=lock:orders", lastEventId: id })] as const)));
    await node.set("lock:orders/2", "held-after", "PX", 120_000);
    for (const [from, s] of Object.entries(resumed)) {
      await s.until(`the new order lock on the stream resumed with the ${from} stream's id`, () => s.lock("lock:orders/2")?.state === "held");
      // The lock held since before that id is there too: it came in a snapshot.
      expect(s.lock("lock:orders/1"), `the stream resumed with the ${from} stream's id`).toMatchObject({ state: "held", token: "held-before" });
      expect(s.events.some((e) => e.event === "snapshot")).toBe(true);
    }

    // The orders stream's own id still resumes it without a snapshot.
    const ownId = orders.lastId!;
    orders.close();
    await node.set("lock:orders/3", "while-away", "PX", 120_000);
    const back = await openStream({ query: "group=lock:orders", lastEventId: ownId });
    await back.until("the lock taken while away", () => back.lock("lock:orders/3")?.state === "held");
    expect(back.events.some((e) => e.event === "snapshot")).toBe(false);
  });
});
