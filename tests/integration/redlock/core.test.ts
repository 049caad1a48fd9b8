import IORedis from "ioredis";
import type Redis from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ACQUIRE_LUA } from "@/lib/redlock/acquire.lua";
import {
  AcquireAbortedError,
  CONTENTION_CHANNEL,
  RELEASE_CHANNEL,
  decodeLockValue,
  encodeLockValue,
  forceRelease,
  Lock,
  LockExpiredError,
  LockLostError,
  LockRevokedError,
  lockValueId,
  parseContentionMessage,
  parseReleaseMessage,
  Redlock,
  ResourceHeldError,
  type ContentionEvent,
  type RedlockEvents,
} from "@/lib/redlock";
import { until } from "../../support/wait";
import { startCluster, type TestCluster } from "../../support/redis";
import { freePort } from "@/lib/redis-node";
import { aborted, sleep } from "./support";

describe("Redlock on three nodes", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  const engines: Redlock[] = [];
  const engine = (settings?: ConstructorParameters<typeof Redlock>[1]) => {
    const redlock = new Redlock(clients, settings);
    engines.push(redlock);
    return redlock;
  };

  beforeAll(async () => {
    cluster = await startCluster(3);
    clients = cluster.clients();
  });
  afterAll(async () => {
    await Promise.all(engines.map((e) => e.quit()));
    await cluster.close();
  });
  beforeEach(async () => {
    await cluster.flushAll();
  });

  it("acquires atomically on every node, writes the holder's identity, and releases", async () => {
    const redlock = engine({ label: "orders worker" });
    const before = Date.now();
    const lock = await redlock.acquire(["lock:a", "lock:b"], 5000);
    expect(lock).toBeInstanceOf(Lock);
    expect(lock.resources).toEqual(["lock:a", "lock:b"]);
    expect(lock.fence).toBeNull();
    // Validity is the TTL less the time taken and the clock drift allowance (1 % of 5000 + 2 ms).
    expect(lock.validityMs).toBeGreaterThan(0);
    expect(lock.validityMs).toBeLessThanOrEqual(5000 - 52);
    expect(lock.expiresAt).toBeGreaterThanOrEqual(before + lock.validityMs);
    // acquire() resolves once a quorum granted; the last node's SET may land a moment later.
    await until("every node holds both resources", async () => {
      const held = await Promise.all(clients.map((c) => c.mget("lock:a", "lock:b")));
      return held.every((pair) => pair[0] === lock.value && pair[1] === lock.value);
    });
    expect(decodeLockValue(lock.value)).toMatchObject({ label: "orders worker", pid: process.pid, fence: null });

    const result = await redlock.release(lock);
    expect(result.released).toBe(true);
    // Likewise release() resolves at a quorum.
    await until("no node holds either resource", async () => {
      const counts = await Promise.all(clients.map((c) => c.exists("lock:a", "lock:b")));
      return counts.every((n) => n === 0);
    });
    // Releasing again changes nothing and still resolves.
    expect((await lock.release()).released).toBe(true);
  });

  it("keeps 100 concurrent contenders mutually exclusive", async () => {
    const redlocks = Array.from({ length: 5 }, () => engine({ retryCount: -1, retryDelayMs: 50, retryJitterMs: 25 }));
    let inside = 0;
    let overlaps = 0;
    const counter = clients[0]!;
    await counter.set("counter", "0");
    await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        const lock = await redlocks[i % redlocks.length]!.acquire(["lock:mutex"], 5000);
        inside += 1;
        if (inside > 1) overlaps += 1;
        // A read-modify-write that loses updates if two holders ever overlap.
        const seen = Number(await counter.get("counter"));
        await sleep(1);
        await counter.set("counter", String(seen + 1));
        inside -= 1;
        await redlocks[i % redlocks.length]!.release(lock);
      }),
    );
    expect(overlaps).toBe(0);
    expect(await counter.get("counter")).toBe("100");
  });

  it("tells 'taken' apart from 'broken': a held resource rejects with the holder's identity", async () => {
    const holder = engine({ label: "holder" });
    const waiter = engine({ label: "waiter", retryCount: 2, retryDelayMs: 20, retryJitterMs: 0 });
    const lock = await holder.acquire(["lock:held"], 5000);
    const error: unknown = await waiter.acquire(["lock:other", "lock:held"], 1000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResourceHeldError);
    const held = error as ResourceHeldError;
    expect(held.attempts).toBe(3);
    expect(held.heldBy).toHaveLength(3);
    expect(held.heldBy[0]).toMatchObject({ resource: "lock:held", value: lock.value, holder: { label: "holder", pid: process.pid } });
    expect(held.votes.map((v) => v.vote)).toEqual(["against", "against", "against"]);
    // All or nothing on each node: the free resource was not left locked.
    for (const client of clients) expect(await client.exists("lock:other")).toBe(0);
    await lock.release();
  });

  it("takes a free lock with a plain SET NX PX, no script on the nodes; a refusal still names the holder", async () => {
    const redlock = engine({ label: "fast path" });
    await Promise.all(clients.map((c) => c.config("RESETSTAT")));
    const lock = await redlock.acquire(["lock:plain"], 5000);
    // Each node ran one SET and nothing else for it (the same connection answers INFO after the SET).
    for (const client of clients) {
      const stats = String(await client.info("commandstats"));
      expect(stats).toMatch(/cmdstat_set:calls=1,/);
      expect(stats).not.toMatch(/cmdstat_(evalsha|eval):/);
    }
    // Refused by every node's SET: the acquire script runs there next and says who holds the lock.
    const other = engine({ label: "second", retryCount: 0 });
    const error: unknown = await other.acquire(["lock:plain"], 1000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResourceHeldError);
    const held = error as ResourceHeldError;
    expect(held.heldBy).toHaveLength(3);
    expect(held.heldBy[0]).toMatchObject({ resource: "lock:plain", value: lock.value, holder: { label: "fast path", pid: process.pid } });
    expect(held.heldBy[0]!.pttlMs).toBeGreaterThan(4000);
    expect(await lock.release()).toMatchObject({ released: true });
  });

  it("publishes each failed attempt from the acquire script, with the waiter's identity", async () => {
    const subscriber = cluster.client(1);
    const events: ContentionEvent[] = [];
    subscriber.on("message", (channel: string, message: string) => {
      const event = channel === CONTENTION_CHANNEL ? parseContentionMessage(message) : null;
      if (event) events.push(event);
    });
    await subscriber.subscribe(CONTENTION_CHANNEL);
    const holder = engine();
    const waiter = engine({ label: "patient", retryCount: 2, retryDelayMs: 10, retryJitterMs: 0 });
    const lock = await holder.acquire(["lock:contended"], 5000);
    await expect(waiter.acquire(["lock:contended"], 1000)).rejects.toBeInstanceOf(ResourceHeldError);
    await sleep(50);
    await subscriber.unsubscribe();
    expect(events.map((e) => e.attempt)).toEqual([1, 2, 3]);
    expect(events[0]).toMatchObject({ resource: "lock:contended", label: "patient", pid: process.pid });
    expect(new Set(events.map((e) => e.waiterId)).size).toBe(1);
    await lock.release();
  });

  it("wakes a waiter when the holder releases, instead of letting it sleep its retry delay", async () => {
    const holder = engine();
    const waiter = engine({ retryDelayMs: 5000, retryJitterMs: 0 });
    const lock = await holder.acquire(["lock:wake"], 10_000);
    const started = performance.now();
    const waiting = waiter.acquire(["lock:wake"], 1000);
    await sleep(100);
    await lock.release();
    const second = await waiting;
    // Woken by the release: far sooner than the 5 s retry delay.
    expect(performance.now() - started).toBeLessThan(2500);
    await second.release();
  });

  it("cancels waiting when the signal aborts", async () => {
    const holder = engine();
    const lock = await holder.acquire(["lock:abort"], 10_000);
    const controller = new AbortController();
    const waiting = engine({ retryCount: -1 }).acquire(["lock:abort"], 1000, { signal: controller.signal });
    setTimeout(() => controller.abort(new Error("user gave up")), 100);
    const error: unknown = await waiting.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AcquireAbortedError);
    expect((error as Error).name).toBe("AbortError");
    expect(((error as Error).cause as Error).message).toBe("user gave up");
    await lock.release();
  });

  it("extends the same Lock, and refuses one that already expired", async () => {
    const redlock = engine();
    const lock = await redlock.acquire(["lock:extend"], 300);
    const firstExpiry = lock.expiresAt;
    await sleep(50);
    expect(await redlock.extend(lock, 2000)).toBe(lock);
    expect(lock.expiresAt).toBeGreaterThan(firstExpiry + 1000);
    // extend() resolves once a quorum took it; the last node may apply it a moment later.
    await until("every node holds the extended TTL", async () => {
      const ttls = await Promise.all(clients.map((c) => c.pttl("lock:extend")));
      return ttls.every((ms) => ms > 1500);
    });

    const short = await redlock.acquire(["lock:short"], 50);
    await sleep(80);
    await expect(redlock.extend(short, 1000)).rejects.toBeInstanceOf(LockExpiredError);

    const taken = await redlock.acquire(["lock:taken"], 5000);
    await Promise.all(clients.map((c) => c.set("lock:taken", "someone else")));
    await expect(redlock.extend(taken, 1000)).rejects.toBeInstanceOf(LockLostError);
    expect((await redlock.release(taken)).released).toBe(false);
    await lock.release();
  });

  it("using() extends automatically and aborts its signal when the key is deleted behind it", async () => {
    const redlock = engine({ automaticExtensionThresholdMs: 200 });
    const lost: Array<RedlockEvents["lost"][0]> = [];
    redlock.on("lost", (event) => lost.push(event));
    const reason = await redlock.using(["lock:using"], 400, async (signal) => {
      await sleep(700); // past the first TTL: only extensions keep it
      expect(signal.aborted).toBe(false);
      const holding = await Promise.all(clients.map((c) => c.exists("lock:using")));
      expect(holding.filter((n) => n === 1).length).toBeGreaterThanOrEqual(2);
      await Promise.all(clients.map((c) => c.del("lock:using")));
      await aborted(signal);
      return signal.reason as unknown;
    });
    expect(reason).toBeInstanceOf(LockLostError);
    expect(lost).toHaveLength(1);
  });

  it("using() aborts at once when an operator force-releases the lock", async () => {
    const redlock = engine();
    const started = performance.now();
    const reason = await redlock.using(["lock:revoked"], 30_000, async (signal, lock) => {
      await sleep(50); // let the engine's subscriber connect
      const result = await forceRelease(clients, "lock:revoked", { token: lock.value });
      expect(result.nodes.map((n) => n.result)).toEqual(["deleted", "deleted", "deleted"]);
      await aborted(signal);
      return signal.reason as unknown;
    });
    expect(reason).toBeInstanceOf(LockRevokedError);
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it("using() returns the routine's value, rethrows its error, and releases either way", async () => {
    const redlock = engine();
    expect(await redlock.using(["lock:u1"], 2000, () => 42)).toBe(42);
    await expect(
      redlock.using(["lock:u2"], 2000, {}, () => {
        throw new Error("routine failed");
      }),
    ).rejects.toThrow("routine failed");
    for (const client of clients) expect(await client.exists("lock:u1", "lock:u2")).toBe(0);
  });

  it("emits events for metrics", async () => {
    const redlock = engine({ retryCount: 1, retryDelayMs: 10, retryJitterMs: 0 });
    const seen: string[] = [];
    for (const name of ["acquired", "released", "extended", "attempt-failed"] as const) redlock.on(name, () => seen.push(name));
    const lock = await redlock.acquire(["lock:events"], 2000);
    await redlock.extend(lock, 2000);
    await expect(redlock.acquire(["lock:events"], 2000)).rejects.toBeInstanceOf(ResourceHeldError);
    await redlock.release(lock);
    expect(seen).toEqual(["acquired", "extended", "attempt-failed", "attempt-failed", "released"]);
  });

  it("fair mode serves waiters in arrival order", async () => {
    const holder = engine();
    const lock = await holder.acquire(["lock:fair"], 10_000);
    const order: number[] = [];
    const waiters = Array.from({ length: 5 }, () => engine({ fair: true, retryCount: -1, retryDelayMs: 100, retryJitterMs: 50 }));
    const done = waiters.map(async (redlock, i) => {
      await sleep(30 * i); // arrive one after the other
      const held = await redlock.acquire(["lock:fair"], 5000);
      order.push(i);
      await sleep(5);
      await redlock.release(held);
    });
    await sleep(400);
    await lock.release();
    await Promise.all(done);
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });

  it("announces a release only when someone waits, naming the waiter that came first", async () => {
    const subscriber = cluster.client(2);
    const released: Array<{ resource: string; nextWaiterId: string | null }> = [];
    subscriber.on("message", (channel: string, message: string) => {
      const event = channel === RELEASE_CHANNEL ? parseReleaseMessage(message) : null;
      if (event) released.push(event);
    });
    await subscriber.subscribe(RELEASE_CHANNEL);
    const holder = engine();
    const quiet = await holder.acquire(["lock:announce"], 5000);
    await quiet.release();
    await sleep(50);
    expect(released).toEqual([]);

    const lock = await holder.acquire(["lock:announce"], 5000);
    const waiting = engine({ retryDelayMs: 5000, retryJitterMs: 0 }).acquire(["lock:announce"], 5000);
    await sleep(100);
    await lock.release();
    const next = await waiting;
    await sleep(50);
    await subscriber.unsubscribe();
    expect(released).toEqual([{ resource: "lock:announce", nextWaiterId: lockValueId(next.value) }]);
    await next.release();
  });

  it("hands the lock to the waiter that came first in the release itself: it holds it without another attempt", async () => {
    const holder = engine({ retryCount: 0 });
    // A retry delay far longer than the test: only the release can give it the lock.
    const waiter = engine({ retryCount: -1, retryDelayMs: 20_000, retryJitterMs: 0 });
    let refusals = 0;
    waiter.on("attempt-failed", () => (refusals += 1));
    const lock = await holder.acquire(["lock:grant"], 10_000);
    const waiting = waiter.acquire(["lock:grant"], 5000);
    // Refused, queued, listening (a fresh engine tries once more when its subscription starts).
    await sleep(200);
    const refusedBeforeRelease = refusals;
    expect(refusedBeforeRelease).toBeGreaterThanOrEqual(1);
    const released = performance.now();
    await lock.release();
    // Asking again at once, as a worker in a loop does: the lock is already the waiter's.
    const refused: unknown = await holder.acquire(["lock:grant"], 5000).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ResourceHeldError);
    const next = await waiting;
    expect(performance.now() - released).toBeLessThan(2500);
    // The lock answered its last refused attempt: no attempt after the release.
    expect(next.attempts).toBe(refusedBeforeRelease);
    expect(refusals).toBe(refusedBeforeRelease);
    expect(next.validityMs).toBeGreaterThan(0);
    expect((refused as ResourceHeldError).heldBy.map((h) => h.value)).toContain(next.value);
    const values = await Promise.all(clients.map((c) => c.get("lock:grant")));
    expect(values.filter((v) => v === next.value).length).toBeGreaterThanOrEqual(2);
    await next.release();
    await until("the lock is free on every node", async () => (await Promise.all(clients.map((c) => c.exists("lock:grant")))).every((n) => n === 0));
  });

  it("tells a waiter in the releasing process with the release reply, even when its own messages cannot arrive", async () => {
    // Both engines share these client objects (as engines in one process usually do); the subscriber
    // connections they would make go to a port where nothing listens, so no message ever arrives.
    const deadPort = await freePort();
    const deaf = clients.map((client) => ({
      evalsha: client.evalsha.bind(client),
      eval: client.eval.bind(client),
      set: (key: string, value: string, px: "PX", ttlMs: number, nx: "NX") => client.set(key, value, px, ttlMs, nx),
      duplicate: () => {
        const nowhere = new IORedis(deadPort, "127.0.0.1", { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
        nowhere.on("error", () => {});
        return nowhere;
      },
    }));
    const holder = new Redlock(deaf, { retryCount: 0 });
    const waiter = new Redlock(deaf, { retryCount: -1, retryDelayMs: 20_000, retryJitterMs: 0 });
    engines.push(holder, waiter);
    const lock = await holder.acquire(["lock:local"], 10_000);
    const waiting = waiter.acquire(["lock:local"], 5000);
    await sleep(200);
    const released = performance.now();
    await lock.release();
    const next = await waiting;
    expect(performance.now() - released).toBeLessThan(2500);
    expect(next.attempts).toBe(1);
    await next.release();
  });

  it("does not hand the lock to a waiter that gave up", async () => {
    const holder = engine();
    const lock = await holder.acquire(["lock:gave-up"], 10_000);
    const controller = new AbortController();
    const waiting = engine({ retryCount: -1, retryDelayMs: 20_000, retryJitterMs: 0 }).acquire(["lock:gave-up"], 5000, { signal: controller.signal });
    await sleep(200);
    controller.abort(new Error("no longer needed"));
    await expect(waiting).rejects.toBeInstanceOf(AcquireAbortedError);
    await until("the waiter left every queue", async () => (await Promise.all(clients.map((c) => c.exists("waitq:lock:gave-up", "waitqg:lock:gave-up")))).every((n) => n === 0));
    await lock.release();
    for (const client of clients) expect(await client.exists("lock:gave-up")).toBe(0);
  });

  it("wakes a waiter whose process stopped asking instead of handing it the lock, so the lock stays free", async () => {
    const holder = engine();
    const lock = await holder.acquire(["lock:dead-waiter"], 10_000);
    // A waiter that was refused once (queued, with a grant ticket valid 100 ms) and then died.
    const dead = encodeLockValue({ label: "crashed", host: "gone", pid: 1, fence: null, acquiredAt: Date.now() });
    await Promise.all(clients.map((c) => c.eval(ACQUIRE_LUA, 1, "lock:dead-waiter", dead, 10_000, "tqg:5000:100", 1)));
    expect(await clients[0]!.hexists("waitqg:lock:dead-waiter", lockValueId(dead)!)).toBe(1);
    await sleep(150); // its ticket is stale: it has not asked again within its own retry period
    await lock.release();
    for (const client of clients) expect(await client.get("lock:dead-waiter")).toBeNull();
    const next = await engine({ retryCount: 0 }).acquire(["lock:dead-waiter"], 5000);
    await next.release();
  });

  it("leaves no queue keys behind a waiter that died: they expire with its entry", async () => {
    const holder = engine();
    const lock = await holder.acquire(["lock:abandoned"], 10_000);
    // Refused once (entry valid 300 ms, ticket 100 ms), then the waiter's process died.
    const dead = encodeLockValue({ label: "crashed", host: "gone", pid: 1, fence: null, acquiredAt: Date.now() });
    await Promise.all(clients.map((c) => c.eval(ACQUIRE_LUA, 1, "lock:abandoned", dead, 10_000, "tqg:300:100", 1)));
    const queueKeys = ["waitq:lock:abandoned", "waitqd:lock:abandoned", "waitqg:lock:abandoned"];
    for (const client of clients) {
      for (const key of queueKeys) {
        const ttl = await client.pttl(key);
        expect(ttl).toBeGreaterThan(0);
        expect(ttl).toBeLessThanOrEqual(300);
      }
    }
    // Another waiter, whose engine waits less between attempts, never shortens the queue's lifetime.
    const brief = encodeLockValue({ label: "brief", host: "h", pid: 2, fence: null, acquiredAt: Date.now() });
    await clients[0]!.eval(ACQUIRE_LUA, 1, "lock:abandoned", brief, 10_000, "tqg:50:20", 1);
    for (const key of queueKeys) expect(await clients[0]!.pttl(key)).toBeGreaterThan(100);
    // Nobody releases the resource (the holder keeps it): the keys still go.
    await until("the queue keys expired on every node", async () => (await Promise.all(clients.map((c) => c.exists(...queueKeys)))).every((n) => n === 0));
    await lock.release();
  });

  it("fair mode: a waiter that tries again keeps a node already handed to it, even with another waiter at the head", async () => {
    const node = clients[0]!;
    const waiterValue = (label: string) => encodeLockValue({ label, host: "h", pid: 1, fence: null, acquiredAt: Date.now() });
    const first = waiterValue("first");
    const second = waiterValue("second");
    // The second waiter is queued (refused while someone held the lock); the first one was handed the
    // lock by a release, which also took it out of the queue.
    await node.set("lock:fair-own", "someone", "PX", 10_000);
    await node.eval(ACQUIRE_LUA, 1, "lock:fair-own", second, 10_000, "tr:5000:500", 1);
    await node.set("lock:fair-own", first, "PX", 10_000);
    // The first waiter's next attempt (fair mode, a later attempt) renews its own lock.
    expect(await node.eval(ACQUIRE_LUA, 1, "lock:fair-own", first, 10_000, "trwg:5000:500", 2)).toBe(1);
    expect(await node.get("lock:fair-own")).toBe(first);
    expect(await node.zscore("waitq:lock:fair-own", lockValueId(second)!)).not.toBeNull();
    // And a fenced rewrite of the same acquisition's value is its own too.
    const fenced = first.replace(":1::", ":1:7:");
    expect(lockValueId(fenced)).toBe(lockValueId(first));
    await node.set("lock:fair-own", fenced, "PX", 10_000);
    expect(await node.eval(ACQUIRE_LUA, 1, "lock:fair-own", first, 10_000, "trwg:5000:500", 3)).toBe(1);
  });

  it("fair mode: a free lock reserved for a head that does not come is handed to that head by the next contender", async () => {
    const holder = engine();
    const lock = await holder.acquire(["lock:fair-idle"], 10_000);
    const headEngine = engine({ fair: true, retryCount: -1, retryDelayMs: 20_000, retryJitterMs: 0 });
    let refusals = 0;
    headEngine.on("attempt-failed", () => (refusals += 1));
    const head = headEngine.acquire(["lock:fair-idle"], 5000);
    await sleep(200);
    const refusedBefore = refusals;
    // The holder's key goes away without a release (an operator's DEL, or its TTL): nothing hands it over.
    await Promise.all(clients.map((c) => c.del("lock:fair-idle")));
    const started = performance.now();
    // A later arrival finds it free but reserved for the head: refused, and the head gets it now.
    await expect(engine({ fair: true, retryCount: 0 }).acquire(["lock:fair-idle"], 5000)).rejects.toBeInstanceOf(ResourceHeldError);
    const held = await head;
    expect(performance.now() - started).toBeLessThan(2500);
    expect(held.attempts).toBe(refusedBefore);
    expect(refusals).toBe(refusedBefore);
    await held.release();
    await holder.release(lock);
  });
});
