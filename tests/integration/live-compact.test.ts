import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as StreamModule from "@/app/api/locks/stream/route";
import type { Lock } from "@/lib/locks/types";
import type { TestCluster } from "../support/redis";
import { streamsThrough, type StreamReader } from "../support/stream";
import { call, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";

describe("the live stream's compact locks (?encoding=compact)", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let stream: typeof StreamModule;
  const streams = streamsThrough(() => stream.GET);
  const openStream = streams.open;

  /** Each lock as a tab sees it, its nodes' TTLs left out (each stream reads them when it writes). */
  const seen = (s: StreamReader, resource: string) => {
    const lock = s.lock(resource);
    return lock && { ...lock, nodes: lock.nodes.map((n) => ({ ...n, pttlMs: n.pttlMs === null ? null : "some" })) };
  };

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    clients = cluster.clients();
    stream = await import("@/app/api/locks/stream/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    streams.closeAll();
    await tearDownConsole(cluster);
  });

  it("tells the same locks as the whole stream, in arrays, snapshot, changes and a resume alike", async () => {
    // Held before the streams open (in their snapshots): on every node, and on one node of three.
    await Promise.all(clients.map((c) => c.set("lock:compact/before", "tok-before", "PX", 120_000)));
    await clients[0]!.set("lock:compact/partial", "tok-partial", "PX", 120_000);
    const whole = await openStream();
    const compact = await openStream({ query: "encoding=compact" });
    for (const s of [whole, compact]) await s.until("the lock of one node", () => s.lock("lock:compact/partial")?.nodes.filter((n) => n.token !== null).length === 1);
    const snapshot = compact.events.find((e) => e.event === "snapshot")!;
    expect((JSON.parse(snapshot.data) as { locks: unknown[] }).locks.every((l) => Array.isArray(l))).toBe(true);
    for (const resource of ["lock:compact/before", "lock:compact/partial"]) expect(seen(compact, resource)).toEqual(seen(whole, resource));

    // Taken, then released: each stream tells both, the compact one in arrays.
    await Promise.all(clients.map((c) => c.set("lock:compact/churn", "tok-churn", "PX", 120_000)));
    for (const s of [whole, compact]) await s.until("the new lock", () => s.lock("lock:compact/churn")?.state === "held");
    expect(seen(compact, "lock:compact/churn")).toEqual(seen(whole, "lock:compact/churn"));
    await Promise.all(clients.map((c) => c.del("lock:compact/churn")));
    for (const s of [whole, compact]) await s.until("the release", () => s.lock("lock:compact/churn")?.state === "released");
    const released = seen(compact, "lock:compact/churn") as Lock;
    expect(released).toEqual(seen(whole, "lock:compact/churn"));
    expect(released).toMatchObject({ token: null, endedToken: "tok-churn" });
    const changes = compact.events.filter((e) => e.event === "lock");
    expect(changes.length).toBeGreaterThan(0);
    for (const e of changes) expect(e.data.startsWith('["')).toBe(true);

    // The compact tab reconnects with its last id and gets what it missed, compact.
    const lastId = compact.lastId!;
    compact.close();
    await Promise.all(clients.map((c) => c.del("lock:compact/before")));
    await whole.until("the release while away", () => whole.lock("lock:compact/before")?.state === "released");
    const back = await openStream({ query: "encoding=compact", lastEventId: lastId });
    await back.until("the release it missed", () => back.lock("lock:compact/before")?.state === "released");
    expect(back.events.some((e) => e.event === "snapshot")).toBe(false);
    expect(seen(back, "lock:compact/before")).toEqual(seen(whole, "lock:compact/before"));
  });

  it("refuses an encoding it does not know, saying which it knows", async () => {
    for (const query of ["encoding=xml", "encoding=", "encoding=COMPACT"]) {
      const res = await call(stream.GET, "GET", `/api/locks/stream?${query}`, { token: VIEWER_TOKEN });
      expect(res.status, query).toBe(400);
      expect(JSON.stringify(res.body), query).toContain("full or compact");
    }
    const whole = await call(stream.HEAD, "HEAD", "/api/locks/stream?encoding=full", { token: VIEWER_TOKEN });
    expect(whole.status).toBe(200);
  });
});
