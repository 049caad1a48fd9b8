import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LocksModule from "@/app/api/locks/route";
import type * as LockModule from "@/app/api/locks/[resource]/route";
import type * as StreamModule from "@/app/api/locks/stream/route";
import type * as HealthModule from "@/app/api/health/route";
import type { Lock, LockDetail } from "@/lib/locks/types";
import type { TestCluster } from "../support/redis";
import { streamsThrough, type StreamReader } from "../support/stream";
import { until } from "../support/wait";
import { call, ORIGIN, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";

// node-redlock's package.json "exports" hides its type declarations; the part used here, via require.
interface NodeRedlockLock {
  readonly value: string;
  release(): Promise<unknown>;
}
type NodeRedlockClass = new (clients: Iterable<unknown>, settings?: { retryCount?: number }) => { acquire(resources: string[], ms: number): Promise<NodeRedlockLock> };
const NodeRedlock = (createRequire(import.meta.url)("redlock") as { default: NodeRedlockClass }).default;

describe("live lock view", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let locks: typeof LocksModule;
  let lock: typeof LockModule;
  let stream: typeof StreamModule;
  let health: typeof HealthModule;
  const streams = streamsThrough(() => stream.GET);
  const openStream = streams.open;


  async function detail(resource: string) {
    return call(lock.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } });
  }

  /** The contention figures of `resource` in the stream's messages so far, oldest first. */
  function contentionOf(s: StreamReader, resource: string): Array<{ attemptsPerMin: number | null; waiters: number | null }> {
    return s.events
      .filter((e) => e.event === "contention" || e.event === "lock")
      .map((e) => JSON.parse(e.data) as { resource: string; attemptsPerMin?: number; waiters?: number; contention?: Lock["contention"] })
      .filter((e) => e.resource === resource)
      .map((e) => e.contention ?? { attemptsPerMin: e.attemptsPerMin ?? 0, waiters: e.waiters ?? 0 });
  }

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    clients = cluster.clients();
    locks = await import("@/app/api/locks/route");
    lock = await import("@/app/api/locks/[resource]/route");
    stream = await import("@/app/api/locks/stream/route");
    health = await import("@/app/api/health/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    streams.closeAll();
    await tearDownConsole(cluster);
  });

  it("streams the right headers and a snapshot first", async () => {
    await Promise.all(clients.map((c) => c.set("lock:before-open", "seed-token", "PX", 60_000)));
    await until("the lock in the REST snapshot", async () => {
      const res = await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN });
      return (res.body as { locks: Lock[] }).locks.some((l) => l.resource === "lock:before-open");
    });
    const s = await openStream();
    const snapshot = await s.until("snapshot", () => s.events.find((e) => e.event === "snapshot"));
    const body = JSON.parse(snapshot.data) as { serverTime: number; nodes: Array<{ nodeId: string; up: boolean }>; locks: Lock[] };
    expect(body.nodes.map((n) => [n.nodeId, n.up])).toEqual([
      ["node-0", true],
      ["node-1", true],
      ["node-2", true],
    ]);
    expect(body.locks.find((l) => l.resource === "lock:before-open")).toMatchObject({ state: "held", token: "seed-token", quorumHeld: 3 });
    expect(snapshot.id).toMatch(/^[0-9a-f]{8}:\d+:[0-9a-f]{12}$/);

    const abort = new AbortController();
    const raw = await stream.GET(
      new Request(`${ORIGIN}/api/locks/stream`, { headers: { authorization: `Bearer ${VIEWER_TOKEN}`, host: new URL(ORIGIN).host }, signal: abort.signal }),
      { params: Promise.resolve({}) },
    );
    expect(raw.headers.get("content-type")).toMatch(/^text\/event-stream/);
    expect(raw.headers.get("cache-control")).toBe("no-cache, no-transform");
    expect(raw.headers.get("x-accel-buffering")).toBe("no");
    abort.abort();
    await raw.body?.cancel().catch(() => undefined);
  });

  it("turns keyspace notifications on where they were off, keeping the node's own flags", async () => {
    const h = (await call(health.GET, "GET", "/api/health", { token: null })).body as { status: string; nodes: Array<{ notifications: string }> };
    expect(h.nodes.map((n) => n.notifications)).toEqual(["enabled-by-console", "enabled-by-console", "enabled-by-console"]);
    expect(h.status).toBe("ok");
    const flags = (await clients[0]!.config("GET", "notify-keyspace-events")) as string[];
    for (const flag of ["K", "g", "$", "x", "e"]) expect(flags[1]).toContain(flag);
  });

  it("refuses the stream and the list without a token", async () => {
    const res = await call(locks.GET, "GET", "/api/locks", { token: null });
    expect(res.status).toBe(401);
    const streamRes = await call(stream.GET, "GET", "/api/locks/stream", { token: null });
    expect(streamRes.status).toBe(401);
  });

  it("shows a lock taken by the engine with its holder, TTL and fence, then its release", async () => {
    const { Redlock } = await import("@lockscope/redlock");
    const s = await openStream();
    const redlock = new Redlock(clients, { label: "billing-worker", fenced: true });
    const taken = await redlock.acquire(["lock:engine"], 30_000);
    // A fenced acquisition writes its value, then rewrites it with the fence: wait for the final value.
    const shown = await s.until("engine lock held with its fenced value", () => {
      const l = s.lock("lock:engine");
      return l?.state === "held" && l.token === taken.value ? l : null;
    });
    expect(shown.holder).toMatchObject({ label: "billing-worker", pid: process.pid });
    expect(shown.fence).toBe(taken.fence);
    expect(shown.quorumHeld).toBe(3);
    expect(shown.nodes.every((n) => n.token === taken.value && n.pttlMs !== null && n.pttlMs <= 30_000 && n.pttlMs > 10_000)).toBe(true);
    // Engine-internal keys (the fence counter) are not locks.
    const list = (await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Lock[] };
    expect(list.locks.map((l) => l.resource).filter((r) => r.includes("engine"))).toEqual(["lock:engine"]);

    await redlock.release(taken);
    const released = await s.until("engine lock released", () => {
      const l = s.lock("lock:engine");
      return l?.state === "released" ? l : null;
    });
    expect(released.endedToken).toBe(taken.value);
    const page = await detail("lock:engine");
    expect(page.status).toBe(200);
    expect((page.body as LockDetail).timeline.map((t) => t.type)).toEqual(["acquired", "released"]);
    await redlock.quit();
  });

  it("shows a node-redlock lock raw (no holder) and its release", async () => {
    const s = await openStream();
    const nodeRedlock = new NodeRedlock(clients, { retryCount: 0 });
    const taken = await nodeRedlock.acquire(["lock:node-redlock"], 20_000);
    const shown = await s.until("node-redlock lock held", () => {
      const l = s.lock("lock:node-redlock");
      return l?.state === "held" ? l : null;
    });
    expect(shown).toMatchObject({ token: taken.value, holder: null, fence: null, quorumHeld: 3 });
    expect(shown.expiresAt).toBeGreaterThan(Date.now() + 5_000);
    await taken.release();
    await s.until("node-redlock lock released", () => s.lock("lock:node-redlock")?.state === "released");
  });

  it("shows a bare SET NX PX lock, then reports its expiry as such", async () => {
    const s = await openStream();
    await Promise.all(clients.map((c) => c.set("lock:bare", "bare-token", "PX", 4_000, "NX")));
    const shown = await s.until("bare lock held", () => {
      const l = s.lock("lock:bare");
      return l?.state === "held" ? l : null;
    });
    expect(shown).toMatchObject({ token: "bare-token", holder: null, quorumHeld: 3 });
    expect(shown.ttlMs).toBeLessThanOrEqual(4_000);
    const ended = await s.until("bare lock expired", () => {
      const l = s.lock("lock:bare");
      return l && l.state !== "held" && l.state !== "elapsed" ? l : null;
    });
    expect(ended.state).toBe("expired");
    const page = (await detail("lock:bare")).body as LockDetail;
    expect(page.timeline.map((t) => t.type)).toContain("expired");
  });

  it("shows a key whose vote is split over two nodes as partial", async () => {
    const s = await openStream();
    await clients[0]!.set("lock:split", "here", "PX", 20_000);
    await clients[1]!.set("lock:split", "there", "PX", 20_000);
    const shown = await s.until("partial lock", () => {
      const l = s.lock("lock:split");
      return l?.state === "partial" ? l : null;
    });
    expect(shown).toMatchObject({ token: null, quorumHeld: 1, scope: "quorum" });
    expect(shown.nodes.map((n) => n.token)).toEqual(["here", "there", null]);
    await Promise.all([clients[0]!.del("lock:split"), clients[1]!.del("lock:split")]);
    await s.until("partial lock released", () => s.lock("lock:split")?.state === "released");
  });

  it("ends a force-released lock as force-released, from the revocation on the nodes", async () => {
    const { forceRelease, Redlock } = await import("@lockscope/redlock");
    const s = await openStream();
    const redlock = new Redlock(clients, { label: "evicted-holder" });
    await redlock.acquire(["lock:forced"], 30_000);
    await s.until("forced lock held", () => s.lock("lock:forced")?.state === "held");
    await forceRelease(clients, "lock:forced");
    await s.until("force-released", () => s.lock("lock:forced")?.state === "force-released");
    const page = (await detail("lock:forced")).body as LockDetail;
    expect(page.timeline.map((t) => t.type)).toEqual(["acquired", "force-released"]);
    await redlock.quit();
  });

  it("counts failed attempts and waiters from the engine's telemetry", async () => {
    const { Redlock } = await import("@lockscope/redlock");
    const s = await openStream();
    const holder = new Redlock(clients, { label: "holder" });
    const waiter = new Redlock(clients, { label: "waiter", retryCount: 3, retryDelayMs: 50, retryJitterMs: 10 });
    const held = await holder.acquire(["lock:contended"], 30_000);
    await s.until("contended lock held", () => s.lock("lock:contended")?.state === "held");
    await expect(waiter.acquire(["lock:contended"], 5_000)).rejects.toThrow();
    const figures = await s.until("contention", () => contentionOf(s, "lock:contended").find((c) => (c.attemptsPerMin ?? 0) >= 4));
    expect(figures.attemptsPerMin).toBe(4);
    const page = (await detail("lock:contended")).body as LockDetail;
    expect(page.contention.attemptsPerMin).toBe(4);
    expect(page.contentionHistory.attempts.reduce((a, b) => a + b, 0)).toBe(4);
    expect(page.timeline.some((t) => t.type === "attempts" && t.detail?.startsWith("4 failed attempts"))).toBe(true);
    await holder.release(held);
    await Promise.all([holder.quit(), waiter.quit()]);
  });

  it("counts as waiting the clients that still wait, not every try that gave up in the last seconds", async () => {
    const { Redlock } = await import("@lockscope/redlock");
    const s = await openStream();
    const holder = new Redlock(clients, { label: "holder" });
    const held = await holder.acquire(["lock:polled"], 30_000);
    await s.until("polled lock held", () => s.lock("lock:polled")?.state === "held");
    // One client waits all along, retrying often enough to stay counted.
    const controller = new AbortController();
    const patient = new Redlock(clients, { label: "patient", retryCount: -1, retryDelayMs: 100, retryJitterMs: 0 });
    const waiting = patient.acquire(["lock:polled"], 5_000, { signal: controller.signal }).catch((e: unknown) => e);
    await s.until("the patient waiter counted", () => contentionOf(s, "lock:polled").some((c) => c.waiters === 1));
    // Five tries in a row that each give up at once (a job that polls with tryLock): each has a waiter id of
    // its own. Counted for their retry window, they made "6 waiting" where two clients ever waited at once.
    const poller = new Redlock(clients, { label: "poller", retryCount: 0 });
    for (let i = 0; i < 5; i++) await expect(poller.acquire(["lock:polled"], 5_000)).rejects.toThrow();
    await until("one client waiting again", async () => ((await detail("lock:polled")).body as LockDetail).contention.waiters === 1);
    // Messages from three nodes interleave: at most one try besides the patient one was counted at a time,
    // or two where one node's report of a try came before another's give-up of the one before.
    expect(Math.max(...contentionOf(s, "lock:polled").map((c) => c.waiters ?? 0))).toBeLessThanOrEqual(3);
    controller.abort();
    await waiting;
    await holder.release(held);
    await Promise.all([holder.quit(), patient.quit(), poller.quit()]);
  });

  it("shows the engine's hand-over as the holder's release and the waiter's acquisition", async () => {
    const { Redlock } = await import("@lockscope/redlock");
    const s = await openStream();
    const holder = new Redlock(clients, { label: "first" });
    const waiter = new Redlock(clients, { label: "second", retryCount: -1, retryDelayMs: 30_000, retryJitterMs: 0 });
    const held = await holder.acquire(["lock:handed"], 30_000);
    await s.until("first holder shown", () => s.lock("lock:handed")?.holder?.label === "first");
    const waiting = waiter.acquire(["lock:handed"], 30_000);
    await until("the waiter queued on every node", async () => (await Promise.all(clients.map((c) => c.exists("waitq:lock:handed")))).every((n) => n === 1));
    // The release writes the waiter's value in the same script: no read ever sees the lock free.
    await holder.release(held);
    const next = await waiting;
    const shown = await s.until("second holder shown", () => {
      const l = s.lock("lock:handed");
      return l?.state === "held" && l.token === next.value ? l : null;
    });
    expect(shown.holder).toMatchObject({ label: "second" });
    const page = (await detail("lock:handed")).body as LockDetail;
    // (Between them, an "attempts" entry counts the waiter's refused attempts.)
    const ends = page.timeline.filter((t) => t.type !== "attempts");
    expect(ends.map((t) => [t.type, t.detail?.split(",")[0] ?? ""])).toEqual([
      ["acquired", "by first"],
      ["released", "handed straight to the next holder"],
      ["acquired", "by second"],
    ]);
    await waiter.release(next);
    await Promise.all([holder.quit(), waiter.quit()]);
  });

  it("resumes a stream from Last-Event-ID without a new snapshot", async () => {
    const first = await openStream();
    await first.until("snapshot", () => first.events.some((e) => e.event === "snapshot"));
    await Promise.all(clients.map((c) => c.set("lock:resume-a", "a", "PX", 30_000)));
    await first.until("resume-a", () => first.lock("lock:resume-a")?.state === "held");
    const lastId = first.lastId!;
    first.close();
    await Promise.all(clients.map((c) => c.set("lock:resume-b", "b", "PX", 30_000)));
    const resumed = await openStream({ lastEventId: lastId });
    await resumed.until("resume-b", () => resumed.lock("lock:resume-b")?.state === "held");
    expect(resumed.events.some((e) => e.event === "snapshot")).toBe(false);
    // An id from another process (or garbage) gets a fresh snapshot.
    const stranger = await openStream({ lastEventId: "deadbeef:12" });
    await stranger.until("snapshot for an unknown id", () => stranger.events.some((e) => e.event === "snapshot"));
  });

  it("frees everything a closed tab held", async () => {
    const { getStreamHub } = await import("@/server/live");
    const before = getStreamHub().clientCount;
    const tab = await openStream();
    await tab.until("snapshot", () => tab.events.some((e) => e.event === "snapshot"));
    expect(getStreamHub().clientCount).toBe(before + 1);
    tab.close();
    await until("stream released", () => Promise.resolve(getStreamHub().clientCount === before));
    await until("stream ended", () => Promise.resolve(tab.ended));
  });

  it("lists a key under the patterns that no format knows with its Redis type, and ignores keys outside them", async () => {
    await clients[0]!.hset("lock:a-hash", "owner", "x");
    await Promise.all(clients.map((c) => c.set("session:not-a-lock", "v", "PX", 30_000)));
    await Promise.all(clients.map((c) => c.set("lock:after-hash", "v", "PX", 30_000)));
    const s = await openStream();
    await s.until("lock after the hash", () => s.lock("lock:after-hash")?.state === "held");
    // On one node only, the hash shows once its reading has settled: as an unknown layout, never as a string lock.
    await s.until("the hash, as an unknown layout", () => s.lock("lock:a-hash")?.format === "unknown");
    expect(s.lock("lock:a-hash")).toMatchObject({ format: "unknown", redisType: "hash", holders: [] });
    const list = (await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Lock[] };
    const names = list.locks.map((l) => l.resource);
    expect(names).toContain("lock:a-hash");
    expect(names).not.toContain("session:not-a-lock");
    expect((await detail("session:not-a-lock")).status).toBe(404);
  });

  it("answers bad requests with a 4xx that says what was wrong", async () => {
    const notALock = await detail("session:abc");
    expect(notALock.status).toBe(404);
    expect(JSON.stringify(notALock.body)).toContain("lock patterns");
    // A key the patterns would match but that is kept beside a lock is said to be that.
    const beside = await detail("lock:orders:{o1}:57:rwlock_timeout:1");
    expect(beside.status).toBe(404);
    expect(JSON.stringify(beside.body)).toContain("kept beside a lock");
    const unknown = await detail("lock:never-seen");
    expect(unknown.status).toBe(404);
    expect(JSON.stringify(unknown.body)).toContain("no recent history");
    const badState = await call(locks.GET, "GET", "/api/locks?state=stuck", { token: VIEWER_TOKEN });
    expect(badState.status).toBe(400);
    expect(JSON.stringify(badState.body)).toContain("state");
    const unknownParam = await call(locks.GET, "GET", "/api/locks?page=2", { token: VIEWER_TOKEN });
    expect(unknownParam.status).toBe(400);
    expect(JSON.stringify(unknownParam.body)).toContain("page");
  });

  it("re-establishes a subscriber killed with CLIENT KILL and reconciles what it missed", async () => {
    const s = await openStream();
    await Promise.all(clients.map((c) => c.set("lock:stale", "old", "PX", 60_000)));
    await s.until("stale held", () => s.lock("lock:stale")?.state === "held");
    const before = ((await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ watcher: { reconnects: number } }> }).nodes[0]!.watcher.reconnects;
    // Kill the watcher's subscriber on node 0, and change locks on that node at once: its notifications are lost.
    const killed = await clients[0]!.client("KILL", "TYPE", "pubsub");
    expect(Number(killed)).toBeGreaterThanOrEqual(1);
    await clients[0]!.del("lock:stale");
    await clients[0]!.set("lock:during-gap", "gap-token", "PX", 60_000);
    await Promise.all(clients.slice(1).map((c) => Promise.all([c.del("lock:stale"), c.set("lock:during-gap", "gap-token", "PX", 60_000)])));
    await until("node-0 watcher reconnected", async () => {
      const h = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ watcher: { reconnects: number; up: boolean } }> };
      return h.nodes[0]!.watcher.reconnects > before && h.nodes[0]!.watcher.up;
    });
    const gap = await s.until("gap lock held on every node", () => {
      const l = s.lock("lock:during-gap");
      return l?.state === "held" && l.quorumHeld === 3 ? l : null;
    });
    expect(gap.nodes.map((n) => n.token)).toEqual(["gap-token", "gap-token", "gap-token"]);
    await s.until("stale released", () => s.lock("lock:stale")?.state === "released");
    const page = (await detail("lock:during-gap")).body as LockDetail;
    expect(page.timeline.some((t) => t.type === "gap" && t.node === "node-0")).toBe(true);
    // Still live after the reconnect: a new change on node 0 arrives by notification.
    await Promise.all(clients.map((c) => c.set("lock:after-gap", "t", "PX", 60_000)));
    await s.until("after-gap held", () => s.lock("lock:after-gap")?.quorumHeld === 3);
  });

  it("with one node down shows the lock held by 2 of 3", async () => {
    const s = await openStream();
    await Promise.all(clients.map((c) => c.set("lock:quorum", "q", "PX", 60_000)));
    await s.until("quorum lock on 3", () => s.lock("lock:quorum")?.quorumHeld === 3);
    await cluster.kill(2);
    const shown = await s.until("quorum lock on 2", () => {
      const l = s.lock("lock:quorum");
      return l?.quorumHeld === 2 ? l : null;
    });
    expect(shown.state).toBe("held");
    expect(shown.nodes.map((n) => n.up)).toEqual([true, true, false]);
    const h = (await call(health.GET, "GET", "/api/health", { token: null })).body as { status: string; nodes: Array<{ up: boolean }> };
    expect(h.status).toBe("degraded");
    expect(h.nodes[2]!.up).toBe(false);
  });
});
