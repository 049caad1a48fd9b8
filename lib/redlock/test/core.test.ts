import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import IORedis from "ioredis";
import type Redis from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ACQUIRE_LUA } from "../acquire.lua.ts";
import {
  AcquireAbortedError,
  CONTENTION_CHANNEL,
  RELEASE_CHANNEL,
  decodeLockValue,
  encodeLockValue,
  forceRelease,
  LockExpiredError,
  LockLostError,
  LockRevokedError,
  lockValueId,
  parseContentionMessage,
  parseGaveUpMessage,
  parseReleaseMessage,
  Redlock,
  ResourceHeldError,
  type ContentionEvent,
  type RedlockClient,
  type RedlockEvents,
} from "../index.ts";
import { RedlockLock } from "../lock.ts";
import { until, within } from "./support/wait.ts";
import { startCluster, type TestCluster } from "./support/redis.ts";
import { freePort } from "./support/redis.ts";
import { aborted } from "./support/support.ts";

const tsxCli = createRequire(import.meta.url).resolve("tsx/cli");

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
  /** Waits until `count` waiters are queued for `resource` on every node. */
  const queuedEverywhere = (resource: string, count = 1) =>
    until(`${count} waiter(s) queued on every node`, async () => (await Promise.all(clients.map((c) => c.zcard(`waitq:${resource}`)))).every((n) => n >= count));

  it("acquires atomically on every node, writes the holder's identity, and releases", async () => {
    const redlock = engine({ label: "orders worker" });
    const before = Date.now();
    const lock = await redlock.acquire(["lock:a", "lock:b"], 5000);
    expect(lock).toBeInstanceOf(RedlockLock);
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

  it("a callback-style client (every command returns a boolean) is refused with a TypeError at its first command, sent to no other node", async () => {
    // node_redis 3.x has every method the engine needs, sends each command, and answers through a callback
    // the engine never gives it: here the commands go out through the real connections, and return true.
    const callbackStyle = (client: Redis): RedlockClient => {
      const send = (command: () => Promise<unknown>) => {
        command().catch(() => {});
        return true as unknown as Promise<unknown>;
      };
      return {
        evalsha: (...args) => send(() => client.evalsha(...args)),
        eval: (...args) => send(() => client.eval(...args)),
        set: (...args) => send(() => client.set(...args)),
        duplicate: () => client.duplicate(),
      };
    };
    const redlock = new Redlock(clients.map(callbackStyle), { retryCount: 1, retryDelayMs: 10 });
    engines.push(redlock);
    for (const [options, method] of [[{}, "set"], [{ fenced: true }, "evalsha"]] as const) {
      const error: unknown = await redlock.acquire(["lock:callbacks"], 60_000, options).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TypeError);
      expect((error as Error).message).toBe(`Expected the client's \`${method}()\` to return a promise (a promise-based client such as ioredis), got boolean`);
    }
    // Only the first node was sent anything: no other node holds the lock, so no quorum is left behind.
    expect(await clients[1]!.exists("lock:callbacks")).toBe(0);
    expect(await clients[2]!.exists("lock:callbacks")).toBe(0);
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
        await counter.ping(); // some work inside the critical section: a round trip
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
    await until("three contention messages arrived", () => events.length >= 3);
    await subscriber.unsubscribe();
    expect(events.map((e) => e.attempt)).toEqual([1, 2, 3]);
    expect(events[0]).toMatchObject({ resource: "lock:contended", label: "patient", pid: process.pid });
    expect(new Set(events.map((e) => e.waiterId)).size).toBe(1);
    await lock.release();
  });

  it("says on the contention channel when a refused waiter gives up, on every node, and not when it got the lock", async () => {
    // What node 1 publishes on the channel, in order: refusals as `c<attempt>`, give-ups as `gave-up`.
    const subscriber = cluster.client(1);
    const heard: Array<{ resource: string; waiterId: string; what: string }> = [];
    subscriber.on("message", (channel: string, message: string) => {
      if (channel !== CONTENTION_CHANNEL) return;
      const refused = parseContentionMessage(message);
      const gone = parseGaveUpMessage(message);
      if (refused) heard.push({ resource: refused.resource, waiterId: refused.waiterId, what: `c${refused.attempt}` });
      else if (gone) heard.push({ resource: gone.resource, waiterId: gone.waiterId, what: "gave-up" });
    });
    await subscriber.subscribe(CONTENTION_CHANNEL);
    const of = (resource: string) => heard.filter((h) => h.resource === resource);
    const holder = engine();
    const held = await Promise.all(["lock:gives-up", "lock:poll-only", "lock:aborts", "lock:quiet"].map((r) => holder.acquire([r], 10_000)));

    // The last attempt refused (the default: queued waiters).
    await expect(engine({ retryCount: 1, retryDelayMs: 10, retryJitterMs: 0 }).acquire(["lock:gives-up"], 1000)).rejects.toBeInstanceOf(ResourceHeldError);
    await until("the give-up heard", () => of("lock:gives-up").some((h) => h.what === "gave-up"));
    expect(of("lock:gives-up").map((h) => h.what)).toEqual(["c1", "c2", "gave-up"]);
    expect(new Set(of("lock:gives-up").map((h) => h.waiterId)).size).toBe(1);

    // A waiter that only polls (it never queued) says so as well.
    await expect(engine({ retryCount: 0, wakeOnRelease: false }).acquire(["lock:poll-only"], 1000)).rejects.toBeInstanceOf(ResourceHeldError);
    await until("the poll-only give-up heard", () => of("lock:poll-only").some((h) => h.what === "gave-up"));
    expect(of("lock:poll-only").map((h) => h.what)).toEqual(["c1", "gave-up"]);

    // Its signal aborted while it waited.
    const controller = new AbortController();
    const patient = engine({ retryCount: -1, retryDelayMs: 60_000, retryJitterMs: 0 });
    patient.once("attempt-failed", () => controller.abort(new Error("no longer needed")));
    await expect(patient.acquire(["lock:aborts"], 1000, { signal: controller.signal })).rejects.toBeInstanceOf(AcquireAbortedError);
    await until("the aborted waiter's give-up heard", () => of("lock:aborts").some((h) => h.what === "gave-up"));
    expect(of("lock:aborts").map((h) => h.what)).toEqual(["c1", "gave-up"]);

    // Nothing said for a waiter that got the lock after a refusal, nor with telemetry off.
    const waiting = engine({ retryDelayMs: 60_000, retryJitterMs: 0 }).acquire(["lock:quiet"], 5000);
    await queuedEverywhere("lock:quiet");
    await held[3]!.release();
    const got = await waiting;
    await expect(engine({ retryCount: 0, telemetry: false }).acquire(["lock:quiet"], 1000)).rejects.toBeInstanceOf(ResourceHeldError);
    // Once node 1's queue is empty its leave-queue script has run, so whatever it published comes before a
    // message published there now.
    await until("the silent waiter left node 1's queue", async () => (await clients[1]!.zcard("waitq:lock:quiet")) === 0);
    await clients[1]!.publish(CONTENTION_CHANNEL, `l1|${encodeLockValue({ label: null, host: null, pid: null, fence: null, acquiredAt: 0 })}|lock:marker`);
    await until("the marker heard", () => of("lock:marker").length === 1);
    expect(of("lock:quiet").length).toBeGreaterThan(0);
    expect(of("lock:quiet").filter((h) => h.what === "gave-up")).toEqual([]);
    await got.release();
    await subscriber.unsubscribe();
    await Promise.all(held.slice(0, 3).map((lock) => lock.release()));
  });

  it("wakes a waiter when the holder releases, instead of letting it sleep its retry delay", async () => {
    const holder = engine();
    // Its retry delay and the holder's TTL are longer than the test's timeout: only the release can wake it.
    const waiter = engine({ retryDelayMs: 120_000, retryJitterMs: 0 });
    const lock = await holder.acquire(["lock:wake"], 120_000);
    const waiting = waiter.acquire(["lock:wake"], 1000);
    await queuedEverywhere("lock:wake");
    await lock.release();
    const second = await waiting;
    await second.release();
  });

  it("cancels waiting when the signal aborts", async () => {
    const holder = engine();
    const lock = await holder.acquire(["lock:abort"], 10_000);
    const controller = new AbortController();
    const waiter = engine({ retryCount: -1 });
    waiter.once("attempt-failed", () => controller.abort(new Error("user gave up")));
    const waiting = waiter.acquire(["lock:abort"], 1000, { signal: controller.signal });
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
    expect(await redlock.extend(lock, 2000)).toBe(lock);
    expect(lock.expiresAt).toBeGreaterThan(firstExpiry + 1000);
    // extend() resolves once a quorum took it; the last node may apply it a moment later.
    await until("every node holds the extended TTL", async () => {
      const ttls = await Promise.all(clients.map((c) => c.pttl("lock:extend")));
      return ttls.every((ms) => ms > 1500);
    });

    await expect(redlock.extend(lock, 2)).rejects.toThrow("Expected `ttlMs` to be greater than its clock drift allowance (round(driftFactor × ttlMs) + 2 = 2 ms)");
    const short = await redlock.acquire(["lock:short"], 50);
    await until("the short lock's validity ran out", () => Date.now() > short.expiresAt + 1, 5000, 5);
    await expect(redlock.extend(short, 1000)).rejects.toBeInstanceOf(LockExpiredError);

    const taken = await redlock.acquire(["lock:taken"], 5000);
    await Promise.all(clients.map((c) => c.set("lock:taken", "someone else")));
    await expect(redlock.extend(taken, 1000)).rejects.toBeInstanceOf(LockLostError);
    expect((await redlock.release(taken)).released).toBe(false);
    await lock.release();
  });

  it("`await using` releases the lock when the block ends, also when it throws, and after an explicit release does nothing more", async () => {
    const redlock = engine();
    const held = () => Promise.all(clients.map((c) => c.get("lock:scoped")));
    {
      await using lock = await redlock.acquire(["lock:scoped"], 60_000);
      await until("the lock is on every node", async () => (await held()).every((v) => v === lock.value));
    }
    await until("the lock is gone from every node", async () => (await held()).every((v) => v === null));

    await expect(
      (async () => {
        await using lock = await redlock.acquire(["lock:scoped"], 60_000);
        expect(lock.resources).toEqual(["lock:scoped"]);
        throw new Error("the work failed");
      })(),
    ).rejects.toThrow("the work failed");
    await until("the lock is gone from every node", async () => (await held()).every((v) => v === null));

    {
      await using lock = await redlock.acquire(["lock:scoped"], 60_000);
      expect((await lock.release()).released).toBe(true);
      // Someone else takes it after the explicit release: leaving the block must not touch their lock.
      await Promise.all(clients.map((c) => c.set("lock:scoped", "someone else", "PX", 60_000)));
    }
    expect(await held()).toEqual(clients.map(() => "someone else"));
  });

  it("an extension that a release of the same lock overtook says the lock was released, not that the nodes were slow", async () => {
    const redlock = engine();
    const failed: Error[] = [];
    redlock.on("extend-failed", ({ error }) => failed.push(error));
    const lock = await redlock.acquire(["lock:extend-release"], 5000);
    const extending = redlock.extend(lock, 5000).catch((e: unknown) => e);
    expect((await redlock.release(lock)).released).toBe(true);
    const error = await extending;
    expect(error).toBeInstanceOf(LockLostError);
    expect((error as Error).message).toBe('Lock on ["lock:extend-release"] was released');
    expect(failed).toEqual([]);
    for (const client of clients) expect(await client.exists("lock:extend-release")).toBe(0);
  });

  it("using(): its signal aborted while the engine's subscriptions wait for nodes that do not answer stops it at once, with nothing sent", async () => {
    // Nodes far away (a long node timeout), two of them stopped: the subscriptions using() waits for before it
    // acquires cannot reach a quorum, and it would wait 5 × nodeTimeoutMs for them.
    const redlock = engine({ nodeTimeoutMs: 60_000 });
    cluster.pause(1);
    cluster.pause(2);
    try {
      const controller = new AbortController();
      let ran = false;
      const outcome = redlock.using(["lock:abort-listening"], 5000, { signal: controller.signal }, () => {
        ran = true;
      });
      controller.abort(new Error("request cancelled"));
      const error: unknown = await within("using() gives up", outcome.then(() => null, (e: unknown) => e));
      expect(error).toBeInstanceOf(AcquireAbortedError);
      expect((error as AcquireAbortedError).attempts).toBe(0);
      expect(ran).toBe(false);
    } finally {
      cluster.resume(1);
      cluster.resume(2);
    }
    for (const client of clients) expect(await client.exists("lock:abort-listening", "waitq:lock:abort-listening")).toBe(0);
  });

  it("using(): a routine that releases its own lock is not told it lost it", async () => {
    const redlock = engine();
    const lost: Array<RedlockEvents["lost"][0]> = [];
    redlock.on("lost", (event) => lost.push(event));
    const abortedAtEnd = await redlock.using(["lock:self-release"], 600, async (signal, lock) => {
      expect((await lock.release()).released).toBe(true);
      // Past the time its extension was due and past its validity: neither may count as losing it.
      await until("the released lock's validity ran out", () => Date.now() > lock.expiresAt + 100, 5000, 20);
      return signal.aborted;
    });
    expect(abortedAtEnd).toBe(false);
    expect(lost).toEqual([]);
  });

  it("using() extends automatically and aborts its signal when the key is deleted behind it", async () => {
    const redlock = engine({ automaticExtensionThresholdMs: 200 });
    const lost: Array<RedlockEvents["lost"][0]> = [];
    let extended = 0;
    redlock.on("lost", (event) => lost.push(event));
    redlock.on("extended", () => (extended += 1));
    const reason = await redlock.using(["lock:using"], 400, async (signal) => {
      // Past the first TTL: only the extensions keep it.
      await until("extended twice", () => extended >= 2);
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
    // The TTL outlasts the test's timeout: only the revocation can abort the signal in time.
    const reason = await redlock.using(["lock:revoked"], 120_000, async (signal, lock) => {
      // At once: the engine must already listen for revocations when the routine starts.
      const result = await forceRelease(clients, "lock:revoked", { token: lock.value });
      expect(result.nodes.map((n) => n.result)).toEqual(["deleted", "deleted", "deleted"]);
      // The routine starts once the engine listens on a quorum of nodes: there, the holder heard it.
      expect(result.nodes.filter((n) => (n.holderHeardBy ?? 0) > 0).length).toBeGreaterThanOrEqual(2);
      await aborted(signal);
      return signal.reason as unknown;
    });
    expect(reason).toBeInstanceOf(LockRevokedError);
  });

  it("using() stops extending a lock once it told the routine the lock was force-released, even where only one node lost it", async () => {
    const redlock = engine();
    // A routine starts once the engine listens on a quorum of nodes, not necessarily on the one the operator
    // reaches below, where the holder must listen to be told (else it keeps the lock, as a quorum still has it). A
    // first routine holds the engine's subscriptions open until that node counts one; they stay open a while after
    // it (`subscriberIdleMs`), for the next.
    await redlock.using(["lock:revoked-one-first"], 5000, (_signal, lock) =>
      until("the engine listens on the node the operator reaches", async () => Number(((await clients[0]!.pubsub("NUMSUB", `lockscope:wake:${lock.value.slice(4, 10)}`)) as [string, number])[1]) > 0),
    );
    const events: string[] = [];
    redlock.on("extended", () => events.push("extended"));
    redlock.on("restored", () => events.push("restored"));
    redlock.on("extend-failed", () => events.push("extend-failed"));
    await redlock.using(["lock:revoked-one"], 1000, async (signal, lock) => {
      // An operator whose console reaches one node only force-releases the lock there.
      const result = await forceRelease([clients[0]!], "lock:revoked-one", { token: lock.value });
      expect(result.nodes[0]!.holderHeardBy).toBe(1);
      expect(result.nodes.map((n) => n.result)).toEqual(["deleted"]);
      await aborted(signal);
      expect(signal.reason).toBeInstanceOf(LockRevokedError);
      events.push("aborted");
      // The routine goes on a while (it may not stop at once): past the time the lock would have been extended.
      const expiresAt = lock.expiresAt;
      await until("the lock's validity ran out", () => Date.now() > expiresAt + 50);
    });
    // Told it lost the lock, the holder must not keep it alive, nor write it back where the operator deleted it.
    expect(events).toEqual(["aborted"]);
    expect(await clients[0]!.get("lock:revoked-one")).toBeNull();
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

  it("fair mode serves waiters in arrival order: a contender that finds the lock free cannot overtake them", async () => {
    // The holder's TTL and the waiters' retry delay outlast the test: only the queue moves the lock on.
    await engine().acquire(["lock:fair"], 120_000);
    const fair = { fair: true, retryCount: -1, retryDelayMs: 120_000, retryJitterMs: 0 };
    const order: string[] = [];
    const take = async (name: string, redlock: Redlock) => {
      const held = await redlock.acquire(["lock:fair"], 5000);
      order.push(name);
      await redlock.release(held);
    };
    const done: Array<Promise<void>> = [];
    for (let i = 0; i < 4; i++) {
      done.push(take(`waiter ${i}`, engine(fair)));
      await queuedEverywhere("lock:fair", i + 1); // they arrive one after the other,
      // at distinct times: the queue orders by the arrival millisecond each waiter wrote in its value
      // (waiters of the same millisecond are in no promised order), so the next one comes after it.
      const last = await Promise.all(clients.map((c) => c.zrange("waitq:lock:fair", -1, -1, "WITHSCORES")));
      const arrived = Math.max(...last.map(([, score]) => Number(score)));
      await until("the next millisecond", () => Date.now() > arrived, 1000, 1);
    }
    // The holder's key goes away without a release (an operator's DEL, or its TTL running out): nothing
    // hands the lock over, and the waiters sleep. A contender arriving now finds it free; without fair mode
    // its SET NX would take it ahead of every waiter.
    await Promise.all(clients.map((c) => c.del("lock:fair")));
    done.push(take("late", engine(fair)));
    await Promise.all(done);
    expect(order).toEqual(["waiter 0", "waiter 1", "waiter 2", "waiter 3", "late"]);
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
    // Uncontended: nothing published (a message from it would arrive first, below, on the same connection).
    const quiet = await holder.acquire(["lock:announce"], 5000);
    await quiet.release();

    const lock = await holder.acquire(["lock:announce"], 120_000);
    const waiting = engine({ retryDelayMs: 120_000, retryJitterMs: 0 }).acquire(["lock:announce"], 5000);
    await queuedEverywhere("lock:announce");
    await lock.release();
    const next = await waiting;
    await until("the release was announced", () => released.length >= 1);
    await subscriber.unsubscribe();
    expect(released).toEqual([{ resource: "lock:announce", nextWaiterId: lockValueId(next.value) }]);
    await next.release();
  });

  it("hands the lock to the waiter that came first in the release itself: it holds it without another attempt", async () => {
    const holder = engine({ retryCount: 0 });
    // A retry delay (and a holder's TTL) far longer than the test: only the release can give it the lock.
    const waiter = engine({ retryCount: -1, retryDelayMs: 120_000, retryJitterMs: 0 });
    let refusals = 0;
    waiter.on("attempt-failed", () => (refusals += 1));
    const lock = await holder.acquire(["lock:grant"], 120_000);
    const waiting = waiter.acquire(["lock:grant"], 5000);
    // Refused, queued, and listening: a fresh engine tries once more when its subscriptions take effect.
    await until("refused twice", () => refusals === 2);
    const refusedBeforeRelease = refusals;
    await lock.release();
    // Asking again at once, as a worker in a loop does: the lock is already the waiter's.
    const refused: unknown = await holder.acquire(["lock:grant"], 5000).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ResourceHeldError);
    const next = await waiting;
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
    // Retry delay and TTL outlast the test: only the release reply can give the waiter the lock.
    const waiter = new Redlock(deaf, { retryCount: -1, retryDelayMs: 120_000, retryJitterMs: 0 });
    engines.push(holder, waiter);
    const lock = await holder.acquire(["lock:local"], 120_000);
    const waiting = waiter.acquire(["lock:local"], 5000);
    // Queued with its grant ticket on every node (no subscription ever takes effect: one attempt only).
    await until("the waiter's ticket is on every node", async () => (await Promise.all(clients.map((c) => c.hlen("waitqg:lock:local")))).every((n) => n === 1));
    await lock.release();
    const next = await waiting;
    expect(next.attempts).toBe(1);
    await next.release();
  });

  it("does not hand the lock to a waiter that gave up", async () => {
    const holder = engine();
    const lock = await holder.acquire(["lock:gave-up"], 10_000);
    const controller = new AbortController();
    const waiting = engine({ retryCount: -1, retryDelayMs: 20_000, retryJitterMs: 0 }).acquire(["lock:gave-up"], 5000, { signal: controller.signal });
    await until("the waiter's ticket is on every node", async () => (await Promise.all(clients.map((c) => c.hlen("waitqg:lock:gave-up")))).every((n) => n === 1));
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
    const ticket = String(await clients[0]!.hget("waitqg:lock:dead-waiter", lockValueId(dead)!));
    const validUntil = Number(ticket.split("|")[0]);
    // Its ticket goes stale (it has not asked again within its own retry period), on every node's clock.
    await until("the ticket is stale on every node", async () =>
      (await Promise.all(clients.map((c) => c.time()))).every(([seconds, micros]) => Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) > validUntil + 5),
    5000, 10);
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

  it("a force release wakes the head waiter and says so; with nobody queued it says nobody heard", async () => {
    const holder = engine();
    await holder.acquire(["lock:forced-wake"], 120_000);
    const waiting = engine({ fair: true, retryCount: -1, retryDelayMs: 60_000, retryJitterMs: 0 });
    let refusals = 0;
    waiting.on("attempt-failed", () => (refusals += 1));
    const next = waiting.acquire(["lock:forced-wake"], 5000);
    // Refused, queued, and listening (a fresh engine tries once more when its subscriptions take effect).
    await until("refused twice", () => refusals === 2);
    const forced = await forceRelease(clients, "lock:forced-wake");
    expect(forced.nodes.map((n) => n.result)).toEqual(["deleted", "deleted", "deleted"]);
    expect(forced.nodes.map((n) => [n.wakeHeardBy, n.waiterQueued])).toEqual([[1, true], [1, true], [1, true]]);
    // The holder took it with a plain acquire and does not listen: it was not told (it finds out when it extends).
    expect(forced.nodes.map((n) => n.holderHeardBy)).toEqual([0, 0, 0]);
    // Woken, the waiter takes it at once (its retry delay is a minute).
    const held = await next;
    const again = await forceRelease(clients, "lock:forced-wake", { token: held.value });
    expect(again.nodes.map((n) => [n.wakeHeardBy, n.waiterQueued])).toEqual([[0, false], [0, false], [0, false]]);
  });

  it("fair mode: a free lock reserved for a head that does not come is handed to that head by the next contender", async () => {
    const holder = engine();
    const lock = await holder.acquire(["lock:fair-idle"], 10_000);
    const headEngine = engine({ fair: true, retryCount: -1, retryDelayMs: 20_000, retryJitterMs: 0 });
    let refusals = 0;
    headEngine.on("attempt-failed", () => (refusals += 1));
    const head = headEngine.acquire(["lock:fair-idle"], 5000);
    // Refused, queued, and listening: a fresh engine tries once more when its subscriptions take effect.
    await until("refused twice", () => refusals === 2);
    const refusedBefore = refusals;
    // The holder's key goes away without a release (an operator's DEL, or its TTL): nothing hands it over.
    await Promise.all(clients.map((c) => c.del("lock:fair-idle")));
    // A later arrival finds it free but reserved for the head: refused, and the head gets it now (its
    // retry delay, 20 s, is far longer than this; the count of attempts below proves it had no other).
    await expect(engine({ fair: true, retryCount: 0 }).acquire(["lock:fair-idle"], 5000)).rejects.toBeInstanceOf(ResourceHeldError);
    const held = await head;
    expect(held.attempts).toBe(refusedBefore);
    expect(refusals).toBe(refusedBefore);
    await held.release();
    await holder.release(lock);
  });

  it("a waiter refused by another holder's quorum waits its retry delay, even where a node that came back empty granted it", async () => {
    // Another holder on nodes 0 and 1; node 2 is empty, as after a restart: every attempt is granted there.
    await Promise.all(clients.slice(0, 2).map((c) => c.set("lock:partial", "someone else", "PX", 120_000)));
    const waiter = engine({ retryCount: -1, retryDelayMs: 60_000, retryJitterMs: 0 });
    let attempts = 0;
    waiter.on("attempt-failed", () => (attempts += 1));
    const controller = new AbortController();
    const waiting = waiter.acquire(["lock:partial"], 5000, { signal: controller.signal }).catch((e: unknown) => e);
    // The first attempt, and the one a fresh engine makes when its subscriptions take effect.
    await until("refused twice", () => attempts >= 2);
    // A window in which a retry after 1-10 ms (a split vote's pause) would make many more attempts.
    for (let i = 0; i < 300; i++) await clients[0]!.ping();
    controller.abort(new Error("enough"));
    expect(await waiting).toBeInstanceOf(AcquireAbortedError);
    expect(attempts).toBe(2);
  });

  it("using() with a TTL of weeks neither overflows its timers nor extends in a loop", async () => {
    const redlock = engine();
    let extended = 0;
    redlock.on("extended", () => (extended += 1));
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on("warning", onWarning);
    try {
      const ttlMs = 30 * 24 * 3600 * 1000;
      await redlock.using(["lock:weeks"], ttlMs, async () => {
        // A window in which a timer that fired at once would have extended the lock many times.
        for (let i = 0; i < 300; i++) await clients[0]!.ping();
      });
    } finally {
      process.off("warning", onWarning);
    }
    expect(extended).toBe(0);
    expect(warnings).not.toContain("TimeoutOverflowWarning");
  });

  it("a listener that throws breaks neither the operation nor the process, also when it runs from a late answer", async () => {
    // Node 2 fails the first try, but only after the other two granted: its error arrives late.
    const late: RedlockClient[] = clients.map((c, i) => ({
      evalsha: c.evalsha.bind(c),
      eval: c.eval.bind(c),
      set: (key: string, value: string, px: "PX", ttlMs: number, nx: "NX") =>
        i === 2 ? new Promise((_, reject) => setTimeout(() => reject(new Error("injected failure")), 20)) : c.set(key, value, px, ttlMs, nx),
      duplicate: () => c.duplicate(),
    }));
    const redlock = new Redlock(late);
    engines.push(redlock);
    let calls = 0;
    const bad = () => {
      calls += 1;
      throw new Error("a bug in a listener");
    };
    for (const event of ["acquired", "released", "node-error"] as const) redlock.on(event, bad);
    const lock = await redlock.acquire(["lock:listener"], 5000);
    await until("the late node error reached the listener", () => calls >= 2);
    expect((await redlock.release(lock)).released).toBe(true);
    expect(calls).toBeGreaterThanOrEqual(3);
  });

  it("a last attempt takes back the grant ticket its previous attempt left", async () => {
    const node = clients[0]!;
    await node.set("lock:last", "someone", "PX", 10_000);
    const value = encodeLockValue({ label: "waiter", host: "h", pid: 1, fence: null, acquiredAt: Date.now() });
    const id = lockValueId(value)!;
    // Attempt 1 of 2: refused, queued, with a ticket. Attempt 2 (the last; the mode acquireModes builds).
    await node.eval(ACQUIRE_LUA, 1, "lock:last", value, 10_000, "tqg:5000:500", 1);
    expect(await node.hexists("waitqg:lock:last", id)).toBe(1);
    await node.eval(ACQUIRE_LUA, 1, "lock:last", value, 10_000, "tqw:5000", 2);
    expect(await node.hexists("waitqg:lock:last", id)).toBe(0);
    // A release now wakes the waiter (still queued until it leaves) instead of writing the lock in its value.
    expect(await node.zscore("waitq:lock:last", id)).not.toBeNull();
  });

  it("extend writes the lock back on a node that lost it and reports that node, but never brings back a deleted lock", async () => {
    const redlock = engine();
    const restored: number[][] = [];
    redlock.on("restored", (event) => restored.push([...event.nodes]));
    const lock = await redlock.acquire(["lock:restore"], 5000);
    await until("every node holds it", async () => (await Promise.all(clients.map((c) => c.get("lock:restore")))).every((v) => v === lock.value));
    // Node 2 lost it (as a node that restarted empty does).
    await clients[2]!.del("lock:restore");
    await redlock.extend(lock, 5000);
    await until("node 2 was restored", () => restored.length >= 1);
    expect(restored).toEqual([[2]]);
    expect(await clients[2]!.get("lock:restore")).toBe(lock.value);
    expect(await clients[2]!.pttl("lock:restore")).toBeGreaterThan(4000);
    // Deleted on every node (an operator's release): the extension fails and writes nothing.
    await Promise.all(clients.map((c) => c.del("lock:restore")));
    await expect(redlock.extend(lock, 5000)).rejects.toBeInstanceOf(LockLostError);
    for (const client of clients) expect(await client.exists("lock:restore")).toBe(0);
  });

  it("extend accepts a fenced lock's first-round value where the fence rewrite did not land, and rewrites it", async () => {
    const redlock = engine({ fenced: true });
    const lock = await redlock.acquire(["lock:prefence"], 5000);
    const firstRound = lock.value.replace(`:${process.pid}:${lock.fence}:`, `:${process.pid}::`);
    expect(firstRound).not.toBe(lock.value);
    await Promise.all(clients.slice(1).map((c) => c.set("lock:prefence", firstRound, "PX", 5000)));
    await redlock.extend(lock, 8000);
    await until("every node holds the fenced value", async () => (await Promise.all(clients.map((c) => c.get("lock:prefence")))).every((v) => v === lock.value));
    expect((await redlock.release(lock)).released).toBe(true);
  });
});

describe("a lock released or extended through another Redlock instance", () => {
  let a: TestCluster;
  let b: TestCluster;
  beforeAll(async () => {
    [a, b] = await Promise.all([startCluster(3), startCluster(3)]);
  });
  afterAll(async () => {
    await Promise.all([a.close(), b.close()]);
  });

  it("is released and extended on the nodes of the instance that acquired it, whose events report it", async () => {
    const owner = new Redlock(a.clients());
    const other = new Redlock(b.clients());
    const events: string[] = [];
    for (const [name, redlock] of [["owner", owner], ["other", other]] as const) {
      for (const event of ["released", "extended", "lost", "extend-failed"] as const) redlock.on(event, () => events.push(`${name} ${event}`));
    }
    const observers = a.clients();
    const lock = await owner.acquire(["lock:elsewhere"], 10_000);
    await other.extend(lock, 60_000);
    await until("extended on every node of the owner", async () => (await Promise.all(observers.map((n) => n.pttl("lock:elsewhere")))).every((ms) => ms > 10_000));
    const { released } = await other.release(lock);
    expect(released).toBe(true);
    await until("released on every node of the owner", async () => (await Promise.all(observers.map((n) => n.exists("lock:elsewhere")))).every((n) => n === 0));
    expect(events).toEqual(["owner extended", "owner released"]);
    await Promise.all([owner.quit(), other.quit()]);
  });
});

describe("the engine's own connections when the application closes its clients", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(3);
  });
  afterAll(async () => cluster.close());

  it("close with them, without waiting for subscriberIdleMs, so the process can end", async () => {
    const [observer] = cluster.clients() as [Redis];
    const subscribers = async () => String(await observer.call("CLIENT", "LIST", "TYPE", "pubsub")).split("\n").filter(Boolean).length;
    const own = cluster.clients();
    const redlock = new Redlock(own, { subscriberIdleMs: 600_000 });
    try {
      expect(await redlock.using(["lock:closing"], 5_000, () => "done")).toBe("done");
      // using() waits for a quorum of subscriptions, two of three: the observer's node may be the third, a moment later.
      await until("the engine's subscriber listens on the observer's node", async () => (await subscribers()) === 1);
      // The application closes its own clients and forgets the engine (no quit()).
      await Promise.all(own.map((client) => client.quit()));
      await until("the application's clients closed", () => own.every((client) => client.status === "end"));
      await until("the engine's subscriber connections closed", async () => (await subscribers()) === 0);
      // The engine still works once given clients that are open again (a client reconnected by the application).
      await Promise.all(own.map((client) => client.connect()));
      expect(await redlock.using(["lock:closing"], 5_000, () => "again")).toBe("again");
    } finally {
      // (Also when an assertion failed: a subscriber left open would be counted by the tests below.)
      await redlock.quit();
      await Promise.all(own.filter((client) => client.status !== "end").map((client) => client.quit()));
    }
  });

  it("many engine instances over the same clients add no listener per instance to them", async () => {
    const own = cluster.clients();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on("warning", onWarning);
    const engines = Array.from({ length: 12 }, () => new Redlock(own));
    try {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const routines = engines.map((redlock, i) => redlock.using([`lock:many-${i}`], 5_000, () => gate));
      await until("every engine listens", async () => String(await own[0]!.call("CLIENT", "LIST", "TYPE", "pubsub")).split("\n").filter(Boolean).length >= engines.length);
      release();
      await Promise.all(routines);
      // (A warning is emitted on the next tick.)
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === "MaxListenersExceededWarning").map((w) => w.message)).toEqual([]);
      expect(own[0]!.listenerCount("end")).toBeLessThanOrEqual(1);
    } finally {
      process.off("warning", onWarning);
      await Promise.all(engines.map((e) => e.quit()));
      await Promise.all(own.map((client) => client.quit()));
    }
  });

  it("a job whose using() routine ends while an automatic extension is out ends when it closed what it opened", async () => {
    const script = path.join(import.meta.dirname, "support", "using-then-exit.ts");
    const job = spawn(process.execPath, [tsxCli, script, JSON.stringify(cluster.ports)], { stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    job.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    job.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => job.once("exit", (code) => resolve(code)));
    try {
      await until("the routine returned", () => output.includes("done"));
      expect(await within("the job's process ends", exited)).toBe(0);
    } finally {
      job.kill("SIGKILL");
    }
  });

  it("close once a using() routine during which the application quit its clients ends", async () => {
    const [observer] = cluster.clients() as [Redis];
    const subscribers = async () => String(await observer.call("CLIENT", "LIST", "TYPE", "pubsub")).split("\n").filter(Boolean).length;
    const own = cluster.clients();
    for (const client of own) client.on("error", () => {});
    const redlock = new Redlock(own, { subscriberIdleMs: 600_000 });
    // A shutdown: the application quits its clients while a routine still runs, and the routine then ends.
    const value = await redlock.using(["lock:closing-during"], 5_000, async () => {
      await Promise.all(own.map((client) => client.quit()));
      await until("the application's clients closed", () => own.every((client) => client.status === "end"));
      return "done";
    });
    expect(value).toBe("done");
    await until("the engine's subscriber connections closed", async () => (await subscribers()) === 0);
  });
});
