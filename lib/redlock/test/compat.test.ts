import { createRequire } from "node:module";
import v8 from "node:v8";
import vm from "node:vm";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LegacyLock} from "../compat.ts";
import Redlock, { ExecutionError, Lock, LockError, ResourceLockedError, type ExecutionStats } from "../compat.ts";
import { Redlock as NativeRedlock, ResourceHeldError } from "../index.ts";
import { startProxy } from "./support/proxy.ts";
import { freePort, startCluster, type TestCluster } from "./support/redis.ts";
import { until, within } from "./support/wait.ts";

// node-redlock's own suites (5.x src/single.test.ts and src/multi.test.ts, 4.x test.js) check these
// behaviours; here they are checked against the compat entry on real redis-server nodes.

const HUGE = Math.floor(Number.MAX_SAFE_INTEGER / 10);
/**
 * The TTL on a node is the one asked for, less the time since it was set: within a second (node-redlock's own
 * tests compare 200 ms buckets, which a read that lands just past a bucket's edge fails on a loaded machine).
 */
const ttlIs = (pttl: number, ttl: number) => pttl <= ttl && ttl - pttl < 1_000;

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => new Error("expected a rejection"),
    (error: unknown) => error,
  );
}

async function settledStats(error: ExecutionError): Promise<ExecutionStats[]> {
  const settled = await Promise.allSettled(error.attempts);
  expect(settled.every((s) => s.status === "fulfilled")).toBe(true);
  return settled.map((s) => (s as PromiseFulfilledResult<ExecutionStats>).value);
}

describe.each([1, 3])("compat, the 5.x API, on %i node(s)", (count) => {
  let cluster: TestCluster;
  let nodes: Redis[];
  let redlock: Redlock;

  beforeAll(async () => {
    cluster = await startCluster(count);
    nodes = cluster.clients();
    redlock = new Redlock(nodes);
  });
  afterAll(async () => {
    await Promise.all([...[redlock].map((r) => r.quit().catch(() => {}))]);
    await cluster.close();
  });

  const onEvery = (key: string) => Promise.all(nodes.map((n) => n.get(key)));
  const ttlsAre = async (key: string, ttl: number) => (await Promise.all(nodes.map((n) => n.pttl(key)))).map((pttl) => ttlIs(pttl, ttl));

  it("acquires, extends (a new Lock) and releases single and multi-resource locks, with the TTL asked for", async () => {
    for (const resources of [["{r}a"], ["{r}a1", "{r}a2"]]) {
      let lock = await redlock.acquire(resources, HUGE);
      expect(lock).toBeInstanceOf(Lock);
      // Acquired (and extended) on a quorum when it resolves, as node-redlock's are; the last node follows.
      const onAll = (key: string, value: string, ttl: number) =>
        until(`${key} held with its TTL on every node`, async () => (await onEvery(key)).every((v) => v === value) && (await ttlsAre(key, ttl)).every(Boolean));
      for (const key of resources) {
        await onAll(key, lock.value, HUGE);
        expect(await onEvery(key)).toEqual(nodes.map(() => lock.value));
        expect(await ttlsAre(key, HUGE)).toEqual(nodes.map(() => true));
      }
      const before = lock;
      lock = await lock.extend(3 * HUGE);
      expect(lock).not.toBe(before);
      expect(before.expiration).toBe(0);
      for (const key of resources) {
        await onAll(key, lock.value, 3 * HUGE);
        expect(await onEvery(key)).toEqual(nodes.map(() => lock.value));
        expect(await ttlsAre(key, 3 * HUGE)).toEqual(nodes.map(() => true));
      }
      const result = await lock.release();
      expect(result.attempts).toHaveLength(1);
      // Released on a quorum when it resolves (as node-redlock's release); the last node follows.
      for (const key of resources) await until(`${key} deleted on every node`, async () => (await onEvery(key)).every((v) => v === null));
    }
  });

  it("locks are exclusive: 11 attempts (retryCount 10), each vote against a ResourceLockedError; overlapping resources stay untouched", async () => {
    const lock = await redlock.acquire(["{r}c1", "{r}c2"], HUGE);
    const errors: Error[] = [];
    const onError = (e: Error) => errors.push(e);
    redlock.on("error", onError);
    const error = await rejection(redlock.acquire(["{r}c2", "{r}c3"], HUGE, { retryDelay: 10, retryJitter: 5 }));
    redlock.off("error", onError);
    expect(error).toBeInstanceOf(ExecutionError);
    const stats = await settledStats(error as ExecutionError);
    expect(stats).toHaveLength(11);
    for (const s of stats) {
      expect(s.membershipSize).toBe(count);
      expect(s.quorumSize).toBe(Math.floor(count / 2) + 1);
      for (const v of s.votesAgainst.values()) expect(v).toBeInstanceOf(ResourceLockedError);
    }
    expect(errors.length).toBeGreaterThanOrEqual(11);
    expect(errors.every((e) => e instanceof ResourceLockedError)).toBe(true);
    expect(await onEvery("{r}c2")).toEqual(nodes.map(() => lock.value));
    expect(await onEvery("{r}c3")).toEqual(nodes.map(() => null));
    await lock.release();
  });

  it("locks expire by themselves, and another can take them then", async () => {
    const lock = await redlock.acquire(["{r}d"], 200);
    expect(await onEvery("{r}d")).toEqual(nodes.map(() => lock.value));
    await until("the lock expired", async () => (await onEvery("{r}d")).every((v) => v === null));
    const second = await redlock.acquire(["{r}d"], 200);
    expect(await onEvery("{r}d")).toEqual(nodes.map(() => second.value));
    await second.release();
  });

  it("using() acquires, extends while the routine runs, and releases; one at a time", async () => {
    let inside = 0;
    const routine = async (signal: AbortSignal & { error?: Error }) => {
      expect(inside).toBe(0);
      inside += 1;
      const value = await nodes[0]!.get("{r}x");
      expect(typeof value).toBe("string");
      // 300 ms locks extended 100 ms before they run out: wait for an extension, seen as a TTL that grew.
      let last = await nodes[0]!.pttl("{r}x");
      await until("the lock was extended", async () => {
        const now = await nodes[0]!.pttl("{r}x");
        const grew = now > last;
        last = now;
        return grew;
      });
      expect(signal.aborted).toBe(false);
      expect(signal.error).toBeUndefined();
      expect(await nodes[0]!.get("{r}x")).toBe(value);
      inside -= 1;
      return value;
    };
    const first = await redlock.using(["{r}x"], 300, { automaticExtensionThreshold: 100 }, routine);
    const second = await redlock.using(["{r}x"], 300, { automaticExtensionThreshold: 100 }, routine);
    expect(first).not.toBe(second);
    expect(await onEvery("{r}x")).toEqual(nodes.map(() => null));
  });

  it("using() aborts its signal, with signal.error, when the lock is lost, and then rejects as its release fails", async () => {
    let seen: Error | undefined;
    const outcome = redlock.using(["{r}lost"], 400, { automaticExtensionThreshold: 200 }, async (signal) => {
      await Promise.all(nodes.map((n) => n.del("{r}lost")));
      await until("the signal aborted", () => signal.aborted);
      seen = signal.error;
      return "done under a lost lock";
    });
    // As node-redlock's using(), whose release in a `finally` throws: the routine's value is not returned.
    const error = await rejection(outcome);
    // node-redlock sets signal.error to the ExecutionError its failed extension threw: code switching over
    // tests `signal.error instanceof ExecutionError`.
    expect(seen).toBeInstanceOf(ExecutionError);
    expect(seen!.message).toBe("The operation was unable to achieve a quorum during its retry window.");
    const [lost] = await settledStats(seen as ExecutionError);
    expect(lost!.votesFor.size).toBe(0);
    expect(lost!.votesAgainst.size).toBeGreaterThanOrEqual(Math.floor(count / 2) + 1);
    expect(error).toBeInstanceOf(ExecutionError);
    expect((error as ExecutionError).message).toBe("The operation was unable to achieve a quorum during its retry window.");
    const [stats] = await settledStats(error as ExecutionError);
    expect(stats!.votesFor.size).toBe(0);
  });

  it("releases and extends a Lock the application made from a stored value (node-redlock's advice for releasing elsewhere), and only that value", async () => {
    const held = await redlock.acquire(["{r}stored1", "{r}stored2"], HUGE);
    const stored = JSON.stringify({ resources: held.resources, value: held.value });
    const { resources, value } = JSON.parse(stored) as { resources: string[]; value: string };
    // Another value on a resource is left alone: a release compares the whole value.
    const stranger = new Lock(redlock, ["{r}stored1"], "someone else's value", [], Date.now() + HUGE);
    const refused = await rejection(redlock.release(stranger));
    expect(refused).toBeInstanceOf(ExecutionError);
    expect(await onEvery("{r}stored1")).toEqual(nodes.map(() => value));

    // Extended too, as node-redlock extends it (its value on every resource), into a new Lock.
    const extended = await new Lock(redlock, resources, value, [], Date.now() + HUGE).extend(3 * HUGE);
    expect(extended.value).toBe(value);
    for (const key of resources) {
      await until(`${key} extended on every node`, async () => (await ttlsAre(key, 3 * HUGE)).every(Boolean));
    }
    const result = await new Lock(redlock, resources, value, [], Date.now() + HUGE).release();
    expect(result.attempts).toHaveLength(1);
    for (const key of resources) await until(`${key} deleted on every node`, async () => (await onEvery(key)).every((v) => v === null));
  });

  it("refuses what node-redlock refuses: no clients, a fractional duration, extending an expired lock, a short using() duration", async () => {
    expect(() => new Redlock([])).toThrow("Redlock must be instantiated with at least one redis client.");
    await expect(redlock.acquire(["{r}e"], 1.5)).rejects.toThrow("Duration must be an integer value in milliseconds.");
    const lock = await redlock.acquire(["{r}e"], 100);
    await until("the lock's validity ran out", () => lock.expiration < Date.now());
    const error = await rejection(lock.extend(100));
    expect(error).toBeInstanceOf(ExecutionError);
    expect((error as Error).message).toBe("Cannot extend an already-expired lock.");
    await expect(redlock.using(["{r}e"], 500, () => Promise.resolve(1))).rejects.toThrow("at least 100ms greater than the `automaticExtensionThreshold`");
  });
});

describe("compat settings", () => {
  let cluster: TestCluster;
  let nodes: Redis[];
  beforeAll(async () => {
    cluster = await startCluster(1);
    nodes = cluster.clients();
  });
  afterAll(async () => cluster.close());

  it("a setting the engine cannot use is a TypeError naming it as node-redlock spells it, when the Redlock is made", () => {
    const refused: Array<[Partial<Record<string, unknown>>, string]> = [
      [{ retryJitter: Number.NaN }, "Expected `retryJitter` to be"],
      [{ retryDelay: Number.POSITIVE_INFINITY }, "Expected `retryDelay` to be"],
      [{ retryDelay: 3e9 }, "Expected `retryDelay + retryJitter` to be"],
      [{ retryCount: 1.5 }, "Expected `retryCount` to be"],
      [{ retryCount: -2 }, "Expected `retryCount` to be"],
      [{ driftFactor: 2 }, "Expected `driftFactor` to be"],
      [{ automaticExtensionThreshold: Number.NaN }, "Expected `automaticExtensionThreshold` to be"],
    ];
    for (const [settings, message] of refused) {
      expect(() => new Redlock(nodes, settings), JSON.stringify(settings)).toThrow(TypeError);
      expect(() => new Redlock(nodes, settings), JSON.stringify(settings)).toThrow(message);
    }
    // What node-redlock takes and uses, the compat entry takes too.
    for (const settings of [{ retryCount: -1 }, { retryDelay: -5, retryJitter: 0 }, { retryDelay: 12.5 }, { driftFactor: 0 }]) {
      expect(() => new Redlock(nodes, settings), JSON.stringify(settings)).not.toThrow();
    }
  });

  it("an extension by a duration that is not a positive integer is a TypeError, as the README says, and leaves the lock as it was", async () => {
    const redlock = new Redlock(nodes);
    const lock = await redlock.acquire(["{s}ext"], 60_000);
    for (const duration of [0, -5, 1]) {
      const error = await rejection(lock.extend(duration));
      expect(error, String(duration)).toBeInstanceOf(TypeError);
      expect((error as Error).message, String(duration)).toMatch(/^Expected `ttlMs` to be/);
    }
    const legacy = await redlock.lock("{s}ext-legacy", 60_000);
    const legacyError = await new Promise<Error | null>((resolve) => void legacy.extend(-5, (e) => resolve(e)));
    expect(legacyError).toBeInstanceOf(TypeError);
    // Nothing was sent: the locks are held as they were, and extend as asked.
    const extended = await lock.extend(120_000);
    expect(await nodes[0]!.pttl("{s}ext")).toBeGreaterThan(60_000);
    await extended.release();
    await legacy.unlock();
  });

  it("a per-call setting the engine cannot use rejects with a TypeError naming it, sending nothing", async () => {
    const redlock = new Redlock(nodes);
    await expect(redlock.acquire(["{s}a"], 1000, { retryJitter: Number.NaN })).rejects.toThrow("Expected `retryJitter` to be");
    await expect(redlock.using(["{s}a"], 1000, { driftFactor: 2 }, () => Promise.resolve(1))).rejects.toThrow("Expected `driftFactor` to be");
    const legacy = await rejection(redlock.lockWithOptions("{s}a", 1000, { retryCount: 1.5 }));
    expect(legacy).toBeInstanceOf(TypeError);
    expect(await nodes[0]!.exists("{s}a")).toBe(0);
  });
});

describe("compat, the 5.x API, on 3 nodes with one or two taken by someone else", () => {
  let cluster: TestCluster;
  let a: Redis, b: Redis, c: Redis;
  let redlock: Redlock;
  beforeAll(async () => {
    cluster = await startCluster(3);
    [a, b, c] = cluster.clients() as [Redis, Redis, Redis];
    redlock = new Redlock([a, b, c]);
  });
  afterAll(async () => cluster.close());

  it("succeeds when a minority of nodes refuse, and leaves that node's key alone through extend and release", async () => {
    await c.set("{r}b", "other");
    let lock = await redlock.acquire(["{r}b"], HUGE);
    expect([await a.get("{r}b"), await b.get("{r}b"), await c.get("{r}b"), await c.pttl("{r}b")]).toEqual([lock.value, lock.value, "other", -1]);
    lock = await lock.extend(3 * HUGE);
    expect(ttlIs(await a.pttl("{r}b"), 3 * HUGE)).toBe(true);
    expect([await c.get("{r}b"), await c.pttl("{r}b")]).toEqual(["other", -1]);
    await lock.release();
    expect([await a.get("{r}b"), await b.get("{r}b"), await c.get("{r}b")]).toEqual([null, null, "other"]);
  });

  it("fails when a majority refuse: 11 attempts, each vote against says 0 of the 1 resources", async () => {
    await b.set("{r}c", "other1");
    await c.set("{r}c", "other2");
    const error = await rejection(redlock.acquire(["{r}c"], HUGE));
    expect(error).toBeInstanceOf(ExecutionError);
    const stats = await settledStats(error as ExecutionError);
    expect(stats).toHaveLength(11);
    for (const s of stats) {
      expect(s.votesAgainst.size).toBe(2);
      for (const v of s.votesAgainst.values()) {
        expect(v).toBeInstanceOf(ResourceLockedError);
        expect(v.message).toBe("The operation was applied to: 0 of the 1 requested resources.");
      }
    }
    expect([await a.get("{r}c"), await b.get("{r}c"), await c.get("{r}c")]).toEqual([null, "other1", "other2"]);
  });

  it("an extension tries again while too few nodes answer, within its retries, as node-redlock's does", async () => {
    const lock = await redlock.acquire(["{r}e"], HUGE);
    cluster.pause(1);
    cluster.pause(2);
    const extending = lock.extend(3 * HUGE).then(
      (extended) => extended,
      (error: unknown) => error,
    );
    // Past one round's node timeout (200 ms) and well within 10 retries of 200 ± 100 ms.
    await new Promise((resolve) => setTimeout(resolve, 500));
    cluster.resume(1);
    cluster.resume(2);
    const extended = await extending;
    expect(extended).toBeInstanceOf(Lock);
    expect(ttlIs(await b.pttl("{r}e"), 3 * HUGE)).toBe(true);
    await (extended as Lock).release();
  });

  it("a failed extension's ExecutionError has each attempt's stats, naming the nodes that refused or failed, as node-redlock's", async () => {
    // Taken over on two nodes: the lock is lost, the extension fails at once; its one attempt says who refused.
    const lost = await redlock.acquire(["{r}x"], HUGE);
    await b.set("{r}x", "other1", "PX", HUGE);
    await c.set("{r}x", "other2", "PX", HUGE);
    const refused = await rejection(lost.extend(HUGE));
    expect(refused).toBeInstanceOf(ExecutionError);
    const refusals = await settledStats(refused as ExecutionError);
    expect(refusals).toHaveLength(1);
    // (Node a, which still held it, is in votesFor when it had answered by the time b and c decided it.)
    expect([...refusals[0]!.votesFor].every((client) => client === a)).toBe(true);
    expect([...refusals[0]!.votesAgainst.keys()]).toEqual([b, c]);
    for (const v of refusals[0]!.votesAgainst.values()) expect(v.message).toBe("The operation was applied to: 0 of the 1 requested resources.");
    await lost.release().catch(() => {});

    // Two nodes stop answering: every attempt within the retries has its stats, the silent nodes' errors in them.
    const slow = await redlock.acquire(["{r}y"], HUGE);
    cluster.pause(1);
    cluster.pause(2);
    let failed: unknown;
    try {
      failed = await rejection(redlock.extend(slow, HUGE, { retryCount: 1, retryDelay: 10, retryJitter: 0 }));
    } finally {
      cluster.resume(1);
      cluster.resume(2);
    }
    expect(failed).toBeInstanceOf(ExecutionError);
    const attempts = await settledStats(failed as ExecutionError);
    expect(attempts).toHaveLength(2);
    for (const s of attempts) {
      expect([...s.votesAgainst.keys()]).toEqual([b, c]);
      for (const v of s.votesAgainst.values()) expect(v.message).toMatch(/did not answer within/);
    }
    await slow.release();
  });

  it("a multi-resource release that a majority applied to some resources only says so, never \"0 of 2\"", async () => {
    // One of the two resources taken over on b and c: each deletes the other one, so 1 of the 2 is released there.
    const lock = await redlock.acquire(["{r}m1", "{r}m2"], HUGE);
    await b.set("{r}m2", "other1", "PX", HUGE);
    await c.set("{r}m2", "other2", "PX", HUGE);
    const refused = await rejection(lock.release());
    expect(refused).toBeInstanceOf(ExecutionError);
    const [stats] = await settledStats(refused as ExecutionError);
    expect([...stats!.votesAgainst.keys()]).toEqual([b, c]);
    // The engine's release says only that a node did not release both: how many it did is not in its result.
    for (const v of stats!.votesAgainst.values()) {
      expect(v).toBeInstanceOf(ResourceLockedError);
      expect(v.message).toBe("The operation was not applied to all of the 2 requested resources (how many it was applied to is not known).");
    }
    expect([await b.get("{r}m1"), await c.get("{r}m1")]).toEqual([null, null]);

    // A Lock made from a stored value is released by compare-and-delete here, whose replies count what was deleted.
    const taken = await redlock.acquire(["{r}n1", "{r}n2"], HUGE);
    await b.set("{r}n2", "other1", "PX", HUGE);
    await c.set("{r}n2", "other2", "PX", HUGE);
    const stored = await rejection(new Lock(redlock, ["{r}n1", "{r}n2"], taken.value, [], Date.now() + HUGE).release());
    expect(stored).toBeInstanceOf(ExecutionError);
    const [storedStats] = await settledStats(stored as ExecutionError);
    expect([...storedStats!.votesAgainst.keys()]).toEqual([b, c]);
    for (const v of storedStats!.votesAgainst.values()) expect(v.message).toBe("The operation was applied to: 1 of the 2 requested resources.");
    await Promise.all([a, b, c].map((n) => n.del("{r}m1", "{r}m2", "{r}n1", "{r}n2")));
  });

  it("an extension that failed leaves the lock as it was, to be extended again, as node-redlock's does", async () => {
    const lock = await redlock.acquire(["{r}d"], HUGE);
    const expiration = lock.expiration;
    // Two nodes stop answering for a moment: the extension (no retries) has no quorum in time.
    cluster.pause(1);
    cluster.pause(2);
    try {
      expect(await rejection(redlock.extend(lock, 3 * HUGE, { retryCount: 0 }))).toBeInstanceOf(ExecutionError);
    } finally {
      cluster.resume(1);
      cluster.resume(2);
    }
    expect(lock.expiration).toBe(expiration);
    const extended = await lock.extend(3 * HUGE);
    expect(extended).toBeInstanceOf(Lock);
    expect(lock.expiration).toBe(0);
    expect(ttlIs(await a.pttl("{r}d"), 3 * HUGE)).toBe(true);
    await extended.release();
    await until("released on every node", async () => (await Promise.all([a, b, c].map((n) => n.exists("{r}d")))).every((n) => n === 0));
  });
});

describe("compat on a node that does not answer", () => {
  it("fails with 11 attempts whose votes against are the client's own error", async () => {
    const dead = new Redis({ port: await freePort(), maxRetriesPerRequest: 0, retryStrategy: () => null, reconnectOnError: () => false });
    dead.on("error", () => {});
    const redlock = new Redlock([dead], { retryDelay: 10, retryJitter: 5 });
    const error = await rejection(redlock.acquire(["{r}b"], HUGE));
    expect(error).toBeInstanceOf(ExecutionError);
    const stats = await settledStats(error as ExecutionError);
    expect(stats).toHaveLength(11);
    for (const s of stats) for (const v of s.votesAgainst.values()) expect(v.message).toBe("Connection is closed.");
    dead.disconnect();
  });
});

interface Bluebird {
  using<T, R>(disposer: unknown, use: (value: T) => Promise<R> | R): Promise<R>;
}

describe("compat, the 4.x API (lock, unlock, extend, disposer, callbacks)", () => {
  let cluster: TestCluster;
  let nodes: Redis[];
  let redlock: Redlock;
  beforeAll(async () => {
    cluster = await startCluster(3);
    nodes = cluster.clients();
    redlock = new Redlock(nodes, { retryCount: 2, retryDelay: 150, retryJitter: 50 });
  });
  afterAll(async () => cluster.close());

  const lockCb = (resource: string | string[], ttl: number) =>
    new Promise<[Error | null, LegacyLock | undefined]>((resolve) => void redlock.lock(resource, ttl, (err, lock) => resolve([err, lock])));

  it.each([["single", "legacy:r"], ["multi", ["legacy:r1", "legacy:r2"]]] as const)("%s resource: the lock life cycle with callbacks", async (_, resource) => {
    const [err1, one] = await lockCb(resource as string | string[], 100);
    expect(err1).toBeNull();
    expect(one).toBeInstanceOf(Redlock.Lock);
    expect(one!.attempts).toBe(1);
    expect(one!.expiration).toBeGreaterThan(Date.now() - 1);
    // Waits for the first lock to expire (100 ms, well inside the retry budget: 3 attempts 100 to 200 ms apart,
    // so the last comes 200 ms or more after the first).
    const [err2, two] = await lockCb(resource as string | string[], 800);
    expect(err2).toBeNull();
    expect(two!.attempts).toBeGreaterThan(1);
    expect(Date.now() + 1).toBeGreaterThan(one!.expiration);
    const unlocked = new Promise<Error | null>((resolve) => void two!.unlock((e) => resolve(e)));
    expect(two!.expiration).toBe(0);
    expect(await unlocked).toBeNull();
    const unlockErr = await new Promise<Error | null>((resolve) => void two!.unlock((e) => resolve(e)));
    expect(unlockErr).toBeInstanceOf(LockError);
    expect(unlockErr!.message).toBe(`Unable to fully release the lock on resource "${String(resource)}".`);
    const extendErr = await new Promise<Error | null>((resolve) => void two!.extend(200, (e) => resolve(e)));
    expect(extendErr).toBeInstanceOf(Redlock.LockError);
    expect((extendErr as LockError).attempts).toBe(0);
    const [, three] = await lockCb(resource as string | string[], 800);
    expect(three!.attempts).toBe(1);
    const before = three!.expiration;
    const four = await new Promise<LegacyLock | undefined>((resolve) => void three!.extend(800, (_e, l) => resolve(l)));
    expect(four).toBe(three);
    expect(four!.expiration).toBeGreaterThan(before - 1);
    const [failed] = await lockCb(resource as string | string[], 200);
    expect(failed).toBeInstanceOf(LockError);
    expect((failed as LockError).attempts).toBe(3);
    // 4.x's messages, word for word (applications match on them): the retry count, and the resources joined by commas.
    const named = String(resource);
    expect((failed as LockError).message).toBe(`Exceeded 2 attempts to lock the resource "${named}".`);
    await until("the lock's validity ran out", () => four!.expiration < Date.now());
    const expired = await rejection(four!.extend(800));
    expect(expired).toBeInstanceOf(LockError);
    expect((expired as LockError).attempts).toBe(0);
    expect((expired as LockError).message).toBe(`Cannot extend lock on resource "${named}" because the lock has already expired.`);
    // On every node: the nodes' copies expire a moment apart, and while two still hold them a first try fails.
    const keys = Array.isArray(resource) ? resource : [resource];
    await until("the lock expired on every node", async () => (await Promise.all(nodes.map((node) => node.exists(...keys)))).every((held) => held === 0));
    const five = await redlock.lock(resource as string | string[], 800);
    expect(five.attempts).toBe(1);
    await five.unlock();
  });

  it("a failed extension rejects with 4.x's LockError, word for word, with the attempts it made", async () => {
    const lock = await redlock.lock("legacy:taken-over", 60_000);
    const attempts = lock.attempts;
    await Promise.all(nodes.map((n) => n.set("legacy:taken-over", "someone else", "PX", 60_000)));
    const error = await new Promise<Error | null>((resolve) => void lock.extend(60_000, (e) => resolve(e)));
    expect(error).toBeInstanceOf(Redlock.LockError);
    expect(error!.message).toBe('Exceeded 2 attempts to lock the resource "legacy:taken-over".');
    // The lock is gone from a quorum: no retry can bring it back, so one attempt was made.
    expect((error as LockError).attempts).toBe(1);
    expect(lock.attempts).toBe(attempts);
  });

  it("extends and unlocks a Redlock.Lock the application made from a stored value", async () => {
    const held = await redlock.lock("legacy:stored", 60_000);
    const copy = new Redlock.Lock(redlock, "legacy:stored", held.value, Date.now() + 60_000, 1, 0);
    expect(await copy.extend(120_000)).toBe(copy);
    await until("legacy:stored extended on every node", async () => (await Promise.all(nodes.map((n) => n.pttl("legacy:stored")))).every((ms) => ms > 60_000));
    expect(await new Promise<Error | null>((resolve) => void copy.unlock((e) => resolve(e)))).toBeNull();
    await until("legacy:stored deleted on every node", async () => (await Promise.all(nodes.map((n) => n.exists("legacy:stored")))).every((n) => n === 0));
  });

  it("lockWithOptions counts the attempts left", async () => {
    const lock = await redlock.lockWithOptions("legacy:o", 200, { retryCount: 10, retryDelay: 1 });
    expect([lock.attempts, lock.attemptsRemaining]).toEqual([1, 9]);
    await lock.unlock();
  });

  it("disposer() releases after a bluebird Promise.using block, also an extended lock", async () => {
    const bluebird = createRequire(import.meta.url)("bluebird") as Bluebird;
    await bluebird.using(redlock.disposer("legacy:d", 500), async (lock: LegacyLock) => {
      expect(await nodes[0]!.get("legacy:d")).toBe(lock.value);
      await lock.extend(1000);
    });
    expect(await nodes[0]!.get("legacy:d")).toBeNull();
    const unlockErrors: Error[] = [];
    await bluebird.using(redlock.disposer("legacy:d", 500, (e) => unlockErrors.push(e)), async (lock: LegacyLock) => {
      // Taken from under it: the unlock at the end of the block fails, and the handler hears of it.
      await Promise.all(nodes.map((n) => n.del("legacy:d")));
      return lock;
    });
    expect(unlockErrors).toHaveLength(1);
    expect(unlockErrors[0]).toBeInstanceOf(LockError);
  });

  it("quit(callback) quits every client and calls back, as 4.x's quit does", async () => {
    const own = cluster.clients();
    const quitting = new Redlock(own);
    const lock = await quitting.lock("legacy:quit", 60_000);
    await lock.unlock();
    // (Said when the callback has an error: which client could not quit, and what state each was in before.)
    const before = own.map((client) => client.status);
    const called = await within("quit's callback", new Promise<Error | null>((resolve) => void quitting.quit((error) => resolve(error))), 5_000);
    expect(called, `clients before quit: ${before.join(", ")}; after: ${own.map((client) => client.status).join(", ")}`).toBeNull();
    await until("every client closed its connection", () => own.every((client) => client.status === "end"));
  });

  it("refuses custom scripts instead of ignoring them", () => {
    expect(() => new Redlock(nodes, { lockScript: (s: string) => s } as never)).toThrow("Custom scripts (lockScript) are not supported");
  });
});

describe("compat connections", () => {
  let cluster: TestCluster;
  let nodes: Redis[];
  beforeAll(async () => {
    cluster = await startCluster(3);
    nodes = cluster.clients();
  });
  afterAll(async () => cluster.close());

  /** Connections in subscribe mode on each node (the engine's own subscriber connections). */
  const subscribers = () => Promise.all(nodes.map(async (n) => String(await n.call("CLIENT", "LIST", "TYPE", "pubsub")).split("\n").filter(Boolean).length));

  it("an uncontended lock opens no connection of its own, as node-redlock's does: closing the clients lets the process end", async () => {
    const redlock = new Redlock(nodes);
    try {
      const lock = await redlock.acquire(["{c}free"], 60_000);
      await lock.release();
      const legacy = await redlock.lock("{c}free-legacy", 60_000);
      await legacy.unlock();
      expect(await subscribers()).toEqual([0, 0, 0]);
      // A contended one still waits for a release (and is handed the lock by it) within its retries.
      const held = await redlock.acquire(["{c}busy"], 60_000);
      const waiting = redlock.acquire(["{c}busy"], 60_000, { retryCount: -1, retryDelay: 60_000 });
      await until("the waiter listens for releases", async () => (await subscribers()).every((n) => n === 1));
      await held.release();
      const next = await within("the waiter handed the lock", waiting, 10_000);
      expect(await nodes[0]!.get("{c}busy")).toBe(next.value);
      await next.release();
    } finally {
      await redlock.quit();
    }
  });
});

describe("compat per-call settings", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(1);
  });
  afterAll(async () => cluster.close());

  it("a long-running application passing settings of its own on every call keeps its memory: what each call made is let go", async () => {
    // The collector, asked for by name (the test process was not started with --expose-gc).
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc") as () => void;
    const [node] = cluster.clients() as [Redis];
    const redlock = new Redlock([node]);
    const run = async (from: number, to: number) => {
      for (let i = from; i < to; i++) await (await redlock.acquire(["{p}heap"], 10_000, { retryDelay: 100 + i })).release();
    };
    // A warm-up first, so what is measured is what each further call adds.
    await run(0, 50);
    gc();
    const before = process.memoryUsage().heapUsed;
    await run(50, 3050);
    gc();
    const grew = process.memoryUsage().heapUsed - before;
    // 3000 calls with settings of their own hold on to no more than a few hundred calls' worth.
    expect(grew).toBeLessThan(4_000_000);
    await redlock.quit();
  });

  it("a using() routine keeps its lock while other calls with settings of their own come and go, and quit() closes every connection", async () => {
    const [node, observer] = [...cluster.clients(), ...cluster.clients()] as [Redis, Redis];
    const redlock = new Redlock([node]);
    const value = await redlock.using(["{p}held"], 5_000, { retryDelay: 1 }, async (signal) => {
      for (let i = 0; i < 20; i++) await (await redlock.acquire([`{p}other-${i}`], 5_000, { retryDelay: 10 + i })).release();
      expect(signal.aborted).toBe(false);
      return "done";
    });
    expect(value).toBe("done");
    expect(await observer.exists("{p}held")).toBe(0);
    // (quit() quits the clients too, as node-redlock's does.)
    await redlock.quit();
    await until("no subscriber connection left", async () => String(await observer.call("CLIENT", "LIST", "TYPE", "pubsub")).trim() === "");
  });
});

describe("compat listeners", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(3);
  });
  afterAll(async () => cluster.close());

  it("an \"error\" listener that throws neither fails a lock that a quorum granted nor leaves it held", async () => {
    const [a, b, c] = cluster.clients() as [Redis, Redis, Redis];
    // Nodes a and b answer late (well within nodeTimeoutMs), so node c's refusal is among the votes that decide the attempt.
    const proxies = await Promise.all([0, 1].map((i) => startProxy(cluster.ports[i]!)));
    for (const proxy of proxies) proxy.delay(50);
    const slow = proxies.map((proxy) => new Redis(proxy.port, "127.0.0.1"));
    await Promise.all(slow.map((client) => client.ping()));
    const redlock = new Redlock([...slow, c]);
    redlock.on("error", (error: Error) => {
      throw error;
    });
    try {
      await c.set("{l}x", "someone else");
      const outcome = await redlock.acquire(["{l}x"], 60_000).then(
        (lock) => ({ lock }),
        (error: unknown) => ({ error }),
      );
      expect(outcome).toHaveProperty("lock");
      const { lock } = outcome as { lock: Lock };
      expect([await a.get("{l}x"), await b.get("{l}x")]).toEqual([lock.value, lock.value]);
      // Prompt answers again: the release's first script run on those nodes takes two round trips (NOSCRIPT, EVAL).
      for (const proxy of proxies) proxy.delay(0);
      await lock.release();
      expect([await a.get("{l}x"), await b.get("{l}x"), await c.get("{l}x")]).toEqual([null, null, "someone else"]);
    } finally {
      for (const client of slow) client.disconnect();
      await Promise.all(proxies.map((proxy) => proxy.close()));
    }
  });
});

describe("compat using() and the routine's own errors", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(1);
  });
  afterAll(async () => cluster.close());

  it("rejects with the routine's error as thrown, also one of the engine's (an application moving to the native API)", async () => {
    const [node] = cluster.clients() as [Redis];
    const redlock = new Redlock([node]);
    const native = new NativeRedlock([node], { retryCount: 0 });
    const held = await native.acquire(["{u}other"], 60_000);
    try {
      const error = await rejection(redlock.using(["{u}mine"], 5_000, async () => native.acquire(["{u}other"], 60_000)));
      expect(error).toBeInstanceOf(ResourceHeldError);
      expect(await node.exists("{u}mine")).toBe(0);
    } finally {
      await held.release();
      await native.quit();
      await redlock.quit();
    }
  });
});
