import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as LocksModule from "@/app/api/locks/route";
import type { WatcherStatus } from "@/lib/locks/types";
import { holdLocks, type TestCluster } from "../support/redis";
import { openStream, type StreamReader } from "../support/stream";
import { until } from "../support/wait";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/** Locks held before the console starts: enough that reading them takes a visible while. */
const HELD = 150_000;

describe("start-up with many locks held", () => {
  let cluster: TestCluster;
  let locks: typeof LocksModule;
  let stream: StreamReader | null = null;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    await holdLocks(cluster.client(0), "lock:startup", HELD);
    locks = await import("@/app/api/locks/route");
  }, 120_000);

  afterAll(async () => {
    stream?.close();
    await tearDownConsole(cluster);
  });

  const page = async () => (await call(locks.GET, "GET", "/api/locks?limit=1", { token: VIEWER_TOKEN })).body as { nodes: WatcherStatus[]; total: number };

  it("answers while it reads the node's locks, says it is reading them and how far it got, then lists them all", async () => {
    // The first answer comes at once, with the node marked as being read, not as down.
    const first = await until("the node marked as being read", async () => {
      const body = await page();
      return body.nodes[0]?.reading && body.nodes[0].reading.keysRead > 0 ? body : null;
    }, 30_000, 20);
    expect(first.nodes[0]).toMatchObject({ nodeId: "node-0", up: false });
    expect(first.nodes[0]?.reading?.since).toBeGreaterThan(Date.now() - 60_000);
    // What it has read so far is listed already: a partial list, said to be partial.
    expect(first.total).toBeGreaterThan(0);
    expect(first.total).toBeLessThan(HELD);

    // The live stream's node events carry the same marking (a stream of node events only: `locks=none`).
    const { GET } = await import("@/app/api/locks/stream/route");
    stream = await openStream(GET, { query: "locks=none" });
    const reader = stream;
    const nodeEvents = () => reader.events.filter((e) => e.event === "node").map((e) => (JSON.parse(e.data) as { nodes: WatcherStatus[] }).nodes[0]);
    const opened = await until("the stream's first node event", () => nodeEvents()[0]);
    const done = await until("every lock read and the node up", async () => {
      const body = await page();
      return body.nodes[0]?.up && body.nodes[0].reading === undefined ? body : null;
    }, 90_000, 100);
    expect(done.total).toBe(HELD);
    // Opened while the node was still being read, the stream said so, and then that the reading ended.
    if (opened.reading) {
      expect(opened.reading?.keysRead).toBeGreaterThan(0);
      await until("a node event saying the reading ended", () => nodeEvents().some((n) => n?.up === true && n.reading === undefined));
    }
  }, 150_000);
});
