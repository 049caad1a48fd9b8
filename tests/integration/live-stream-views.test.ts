import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as StreamModule from "@/app/api/locks/stream/route";
import type { TestCluster } from "../support/redis";
import { streamsThrough, type StreamReader } from "../support/stream";
import { until } from "../support/wait";
import { ORIGIN, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";

describe("live streams of many group names", () => {
  let cluster: TestCluster;
  let node: Redis;
  let stream: typeof StreamModule;
  let hub: { readonly clientCount: number; readonly viewCount: number };
  let maxKeptViews: number;
  const streams = streamsThrough(() => stream.GET);
  const openStream = streams.open;

  const snapshotOf = (s: StreamReader) => s.until("its snapshot", () => s.events.find((e) => e.event === "snapshot"));

  beforeAll(async () => {
    // (The script's streams are closed one by one: the limits of streams open at once are not what is tested here.)
    cluster = await setUpConsole({ nodes: 1, env: { LOCKSCOPE_MAX_STREAMS_PER_ADDRESS: "1000", LOCKSCOPE_MAX_STREAMS_PER_TOKEN: "1000" } });
    node = cluster.clients()[0]!;
    stream = await import("@/app/api/locks/stream/route");
    await startLiveReconciled();
    const live = await import("@/server/live");
    hub = live.getStreamHub();
    maxKeptViews = (await import("@/server/live/hub")).MAX_KEPT_VIEWS;
  });

  afterAll(async () => {
    streams.closeAll();
    await tearDownConsole(cluster);
  });

  it("keeps a bounded number of views for a script that opens and closes a stream per invented group name, and loses no lock", async () => {
    // A tab follows the orders group throughout; another followed the billing group and went away.
    const orders = await openStream({ query: "group=lock:orders" });
    await snapshotOf(orders);
    const billing = await openStream({ query: "group=lock:billing" });
    await snapshotOf(billing);
    await node.set("lock:billing/1", "before", "PX", 120_000);
    await billing.until("the billing lock", () => billing.lock("lock:billing/1")?.state === "held");
    const billingId = billing.lastId!;
    billing.close();
    await until("the billing tab's stream closed", () => hub.clientCount === 1, 10_000);

    // A viewer's script asks for one made-up group after another, each stream closed at once.
    const names = maxKeptViews + 300;
    for (let i = 0; i < names; i++) {
      const headers = { authorization: `Bearer ${VIEWER_TOKEN}`, host: new URL(ORIGIN).host };
      const res = await stream.GET(new Request(`${ORIGIN}/api/locks/stream?group=${encodeURIComponent(`made-up-${i}`)}`, { headers }), { params: Promise.resolve({}) });
      expect(res.status).toBe(200);
      await res.body?.cancel();
    }
    await until("the script's streams closed", () => hub.clientCount === 1, 10_000);
    // Every changed lock is checked against each view kept: their number stays bounded, not one per name.
    expect(hub.viewCount).toBeLessThanOrEqual(maxKeptViews + 1);

    // The tab still open follows its group's changes.
    await node.set("lock:orders/1", "after", "PX", 120_000);
    await orders.until("the order lock on the open tab", () => orders.lock("lock:orders/1")?.state === "held");
    // The billing tab comes back with its id, its view forgotten meanwhile: a snapshot, with its lock and the ones taken since.
    await node.set("lock:billing/2", "while-away", "PX", 120_000);
    const back = await openStream({ query: "group=lock:billing", lastEventId: billingId });
    await back.until("the lock taken while away", () => back.lock("lock:billing/2")?.state === "held");
    expect(back.lock("lock:billing/1")).toMatchObject({ state: "held", token: "before" });
  });
});
