import type Redis from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { decodeReading, formatByName, readLockKeys, readLockKeysWithoutScripts, type FormatReading } from "@/lib/locks/formats";
import { lockKeyFilter } from "@/lib/locks/formats/defaults";
import { Discovery } from "@/server/discovery";
import { startCluster, type TestCluster } from "../../support/redis";
import { until } from "../../support/wait";
import { RedissonWriter, fairWaiterChannel, lockChannel, readWriteChannel, subscribeWaiter } from "../../support/redisson";

/**
 * Redisson's layouts, written by a writer that sends Redisson's commands in Redisson's order (tests/support/
 * redisson.ts), read with the watcher's script, and force-released: only while the holder field is still
 * there, waking a waiter subscribed the way Redisson's waiters subscribe, with Redisson's unlock message.
 */
describe("Redisson locks", () => {
  let cluster: TestCluster;
  let redis: Redis;
  const opts = { nodeTimeoutMs: 2_000 };
  const read = async (key: string): Promise<FormatReading | null> => decodeReading((await readLockKeys(redis, [key]))[0]!, { now: Date.now() });

  beforeAll(async () => {
    cluster = await startCluster(1);
    redis = cluster.client(0);
  });
  afterAll(async () => {
    await cluster.close();
  });
  beforeEach(async () => {
    await cluster.flushAll();
  });

  it("RLock: holder client id, thread and hold count; released only by that holder, waking its waiter", async () => {
    const subscriber = cluster.client(0);
    for (const name of ["orders-lock", "{orders}:lock"]) {
      const app = new RedissonWriter(redis);
      expect(await app.lock(name, 57)).toBeNull();
      expect(await app.lock(name, 57)).toBeNull();
      // Another thread finds it taken.
      expect(await app.lock(name, 58)).toBeGreaterThan(0);
      const reading = await read(name);
      expect(reading).toMatchObject({
        format: "redisson",
        redisType: "hash",
        holders: [{ id: app.holder(57), label: app.clientId, thread: 57, count: 2 }],
        warnings: [],
        waiters: null,
      });
      expect((reading?.expiresAt ?? 0) - Date.now()).toBeGreaterThan(25_000);

      const waiter = await subscribeWaiter(subscriber, lockChannel(name));
      const release = formatByName("redisson").release!;
      const wrong = await release([redis], name, app.holder(58), opts);
      expect(wrong.nodes[0]?.result).toBe("mismatch");
      expect(await redis.hget(name, app.holder(57))).toBe("2");

      const done = await release([redis], name, app.holder(57), opts);
      expect(done.nodes[0], await waiter.accountUnlessWoken(done.nodes[0])).toMatchObject({ result: "deleted", redisType: "hash", woken: 1 });
      expect(done.notified).toEqual({ holder: false, waiters: true });
      expect(await waiter.message).toBe("0");
      expect(await redis.exists(name)).toBe(0);
      // The waiter, woken, takes the lock at once.
      expect(await app.lock(name, 58)).toBeNull();
      await subscriber.unsubscribe();
    }
  });

  it("RLock and read-write lock taken with a random thread id (reactive code's nextLong()): holder shown, its thread exact or not at all, released", async () => {
    const subscriber = cluster.client(0);
    const app = new RedissonWriter(redis);
    // Reactive and coroutine code hands Redisson `ThreadLocalRandom.current().nextLong()` as the thread id: negative
    // half the time, and mostly past 2^53, where a JavaScript number is no longer the same id.
    const negative = -7394718251934526131n;
    const past53 = 7394718251934526131n;
    for (const [name, thread] of [["reactive-neg", negative], ["reactive-big", past53], ["reactive-small", -42]] as const) {
      expect(await app.lock(name, thread)).toBeNull();
      const reading = await read(name);
      expect(reading).toMatchObject({ format: "redisson", holders: [{ id: app.holder(thread), label: app.clientId, count: 1 }] });
      // Never a number near the thread id (7394718251934526000 for the one above): the id itself, or none.
      expect(reading?.holders[0]?.thread).toBe(typeof thread === "number" ? thread : undefined);
      const waiter = await subscribeWaiter(subscriber, lockChannel(name));
      const done = await formatByName("redisson").release!([redis], name, app.holder(thread), opts);
      expect(done.nodes[0], await waiter.accountUnlessWoken(done.nodes[0])).toMatchObject({ result: "deleted", woken: 1 });
      expect(await waiter.message).toBe("0");
      await subscriber.unsubscribe();
    }
    const rw = "reactive-rw";
    expect(await app.readLock(rw, negative)).toBeNull();
    expect(await app.readLock(rw, 5)).toBeNull();
    const reading = await read(rw);
    expect(reading?.format).toBe("redisson-rw");
    expect(reading?.holders.map((h) => h.id).sort()).toEqual([app.holder(negative), app.holder(5)].sort());
    const out = await formatByName("redisson-rw").release!([redis], rw, app.holder(negative), opts);
    expect(out.nodes[0]?.result).toBe("deleted");
    expect(await redis.hgetall(rw)).toEqual({ mode: "read", [app.holder(5)]: "1" });
    expect(await redis.exists(`{${rw}}:${app.holder(negative)}:rwlock_timeout:1`)).toBe(0);
  });

  it("a companion key of another type fails nothing: the lock and every other key of the batch are still read", async () => {
    const app = new RedissonWriter(redis);
    expect(await app.lock("poisoned", 7)).toBeNull();
    // Not Redisson's queue (a string, and a list beside a string timeout set): no waiters to count, and no error.
    await redis.set("redisson_lock_queue:{poisoned}", "not a list");
    await redis.set("lock:beside", "token-b", "PX", 60_000);
    const [poisoned, beside] = await readLockKeys(redis, ["poisoned", "lock:beside"]);
    expect(decodeReading(poisoned!, { now: Date.now() })).toMatchObject({ format: "redisson", holders: [{ id: app.holder(7) }], waiters: null });
    expect(decodeReading(beside!, { now: Date.now() })).toMatchObject({ format: "token", holders: [{ id: "token-b" }] });
    await redis.del("redisson_lock_queue:{poisoned}");
    await redis.rpush("redisson_lock_queue:{poisoned}", "waiter-1");
    await redis.set("redisson_lock_timeout:{poisoned}", "not a sorted set");
    expect(await read("poisoned")).toMatchObject({ format: "redisson", waiters: 0 });
  });

  it("a release beside a companion key of another type releases the lock and says so, instead of an error for a lock it deleted", async () => {
    const subscriber = cluster.client(0);
    const app = new RedissonWriter(redis);
    // Not a list: no fair lock's queue, so the lock is an RLock whose waiters listen on the lock's channel.
    expect(await app.lock("poisoned-release", 7)).toBeNull();
    await redis.set("redisson_lock_queue:{poisoned-release}", "not a list");
    const waiter = await subscribeWaiter(subscriber, lockChannel("poisoned-release"));
    const done = await formatByName("redisson").release!([redis], "poisoned-release", app.holder(7), opts);
    expect(done.nodes[0], await waiter.accountUnlessWoken(done.nodes[0])).toMatchObject({ result: "deleted", woken: 1 });
    expect(done.notified.waiters).toBe(true);
    expect(await waiter.message).toBe("0");
    expect(await redis.exists("poisoned-release")).toBe(0);
    expect(await redis.get("redisson_lock_queue:{poisoned-release}")).toBe("not a list");
    await subscriber.unsubscribe();
    // A queue beside waiting times of another type: nobody in it counts as waiting (as the read says), so nobody
    // is woken, and the lock is released all the same.
    expect(await app.lock("poisoned-times", 7)).toBeNull();
    await redis.rpush("redisson_lock_queue:{poisoned-times}", app.holder(8));
    await redis.set("redisson_lock_timeout:{poisoned-times}", "not a sorted set");
    expect(await read("poisoned-times")).toMatchObject({ format: "redisson", waiters: 0 });
    const second = await formatByName("redisson").release!([redis], "poisoned-times", app.holder(7), opts);
    expect(second.nodes[0]).toMatchObject({ result: "deleted", woken: null });
    expect(await redis.exists("poisoned-times")).toBe(0);
  });

  it("fair lock: the queue's live waiters are counted; release wakes only the first that has not timed out", async () => {
    const name = "payouts";
    const subscriber = cluster.client(0);
    const app = new RedissonWriter(redis);
    const other = new RedissonWriter(redis);
    expect(await app.fairLock(name, 1)).toBeNull();
    expect(await other.fairLock(name, 2)).toBeGreaterThan(0);
    expect(await other.fairLock(name, 3)).toBeGreaterThan(0);
    expect(await read(name)).toMatchObject({ format: "redisson", waiters: 2 });
    // A waiter that gave up long ago, still at the head of the queue: dead in Redisson's eyes.
    const gone = `${other.clientId}:99`;
    await redis.lpush(`redisson_lock_queue:{${name}}`, gone);
    await redis.zadd(`redisson_lock_timeout:{${name}}`, Date.now() - 60_000, gone);
    const reading = await read(name);
    expect(reading?.waiters).toBe(2);
    // The count drops by itself when the first live waiter (thread 2) stops waiting: the lock's TTL plus its
    // wait from when it queued. The lock is read again then.
    const thread2Until = Number(await redis.zscore(`redisson_lock_timeout:{${name}}`, other.holder(2)));
    expect(Math.abs(reading!.changesAt! - thread2Until)).toBeLessThan(1_000);

    const messages: Array<[string, string]> = [];
    subscriber.on("message", (channel: string, message: string) => messages.push([channel, message]));
    await subscriber.subscribe(fairWaiterChannel(name, gone), fairWaiterChannel(name, other.holder(2)), fairWaiterChannel(name, other.holder(3)));
    const done = await formatByName("redisson").release!([redis], name, app.holder(1), opts);
    expect(done.nodes[0]).toMatchObject({ result: "deleted", woken: 1 });
    // One connection receives in publish order: a marker sent after the release arrives after anything it sent.
    await redis.publish(fairWaiterChannel(name, other.holder(3)), "marker");
    await until("the marker arrives", () => messages.some(([, m]) => m === "marker"));
    expect(messages).toEqual([
      [fairWaiterChannel(name, other.holder(2)), "0"],
      [fairWaiterChannel(name, other.holder(3)), "marker"],
    ]);
    // The queue is Redisson's: left as it was.
    expect(await redis.llen(`redisson_lock_queue:{${name}}`)).toBe(3);
  });

  it("read-write lock: mode and every reader; a reader is taken out alone, the last one wakes the waiters", async () => {
    const name = "catalog";
    const subscriber = cluster.client(0);
    const a = new RedissonWriter(redis);
    const b = new RedissonWriter(redis);
    expect(await a.readLock(name, 1)).toBeNull();
    expect(await a.readLock(name, 1)).toBeNull();
    expect(await b.readLock(name, 7)).toBeNull();
    expect(await a.writeLock(name, 2)).toBeGreaterThan(0);
    const reading = await read(name);
    expect(reading?.format).toBe("redisson-rw");
    expect(reading?.holders).toEqual(
      expect.arrayContaining([
        { id: a.holder(1), label: a.clientId, thread: 1, count: 2, mode: "read" },
        { id: b.holder(7), label: b.clientId, thread: 7, count: 1, mode: "read" },
      ]),
    );
    expect(reading?.holders).toHaveLength(2);

    const waiter = await subscribeWaiter(subscriber, readWriteChannel(name));
    const release = formatByName("redisson-rw").release!;
    const first = await release([redis], name, a.holder(1), opts);
    expect(first.nodes[0]).toMatchObject({ result: "deleted", woken: null });
    expect(await redis.hgetall(name)).toEqual({ mode: "read", [b.holder(7)]: "1" });
    expect(await redis.exists(`{${name}}:${a.holder(1)}:rwlock_timeout:1`, `{${name}}:${a.holder(1)}:rwlock_timeout:2`)).toBe(0);
    expect(await redis.exists(`{${name}}:${b.holder(7)}:rwlock_timeout:1`)).toBe(1);

    expect((await release([redis], name, "mode", opts)).nodes[0]?.result).toBe("mismatch");
    const last = await release([redis], name, b.holder(7), opts);
    expect(last.nodes[0], await waiter.accountUnlessWoken(last.nodes[0])).toMatchObject({ result: "deleted", woken: 1 });
    expect(await waiter.message).toBe("0");
    expect(await redis.exists(name)).toBe(0);
  });

  it("read-write lock: taking out the reader with the longest lease leaves the lock as long as the leases left, as Redisson's unlock does", async () => {
    const name = "catalog-leases";
    const a = new RedissonWriter(redis);
    const b = new RedissonWriter(redis);
    // A read with a lease of ten minutes, B with one of four seconds (leaseTime given to tryLock).
    expect(await a.readLock(name, 1, 600_000)).toBeNull();
    expect(await b.readLock(name, 2, 4_000)).toBeNull();
    const done = await formatByName("redisson-rw").release!([redis], name, a.holder(1), opts);
    expect(done.nodes[0]).toMatchObject({ result: "deleted", woken: null });
    // The lock now lives as long as B's lease, not A's ten minutes (read at one instant).
    const [[, lockTtl], [, leaseTtl]] = (await redis.multi().pttl(name).pttl(`{${name}}:${b.holder(2)}:rwlock_timeout:1`).exec()) as [[null, number], [null, number]];
    expect(leaseTtl).toBeGreaterThan(0);
    expect(lockTtl).toBe(leaseTtl);
    // B's lease ends without B releasing (its process died): a writer gets the lock then, not ten minutes later.
    const writer = new RedissonWriter(redis);
    await until("a writer takes the lock once the lease left has run out", async () => (await writer.writeLock(name, 3)) === null);
    expect(await read(name)).toMatchObject({ format: "redisson-rw", holders: [{ id: `${writer.holder(3)}:write`, mode: "write" }] });
  });

  it("read-write lock: taking out a reader when the others' leases have all run out ends the lock and wakes the waiters", async () => {
    const name = "catalog-dead";
    const subscriber = cluster.client(0);
    const a = new RedissonWriter(redis);
    const b = new RedissonWriter(redis);
    expect(await a.readLock(name, 1, 600_000)).toBeNull();
    expect(await b.readLock(name, 2, 300)).toBeNull();
    // B died and its lease ran out (Redis removed its lease key); its field stays while A's lease keeps the hash.
    await until("B's lease has run out", async () => (await redis.exists(`{${name}}:${b.holder(2)}:rwlock_timeout:1`)) === 0);
    expect(await redis.hexists(name, b.holder(2))).toBe(1);
    const waiter = await subscribeWaiter(subscriber, readWriteChannel(name));
    const done = await formatByName("redisson-rw").release!([redis], name, a.holder(1), opts);
    expect(done.nodes[0], await waiter.accountUnlessWoken(done.nodes[0])).toMatchObject({ result: "deleted", woken: 1 });
    expect(await waiter.message).toBe("0");
    expect(await redis.exists(name)).toBe(0);
    await subscriber.unsubscribe();
  });

  it("read-write lock: a reader with a huge hold count is released at once, the node serving others meanwhile", async () => {
    const name = "catalog-huge";
    const a = new RedissonWriter(redis);
    expect(await a.readLock(name, 3)).toBeNull();
    // A hold count of ten digits (what the layout allows): a lease key per hold would be a loop of seconds.
    await redis.hset(name, a.holder(3), "3000000000");
    const release = formatByName("redisson-rw").release!;
    // Answered within the node timeout (a script looping over every hold ran for seconds, answering BUSY to all).
    const done = await release([redis], name, a.holder(3), opts);
    expect(done.nodes[0]).toMatchObject({ result: "deleted" });
    expect(await redis.exists(name, `{${name}}:${a.holder(3)}:rwlock_timeout:1`)).toBe(0);
  });

  it("read-write lock with more readers than one read takes: still a read-write lock, in read mode, with or without scripts", async () => {
    // 5,000 readers: the hash is a hashtable (past hash-max-listpack-entries), read a step of it at a time, which
    // reaches the mode field once in about eighty reads.
    const a = new RedissonWriter(redis);
    expect(await a.readLock("catalog-wide", 1)).toBeNull();
    const readers = Array.from({ length: 5_000 }, (_, i) => [`${a.clientId}:${1_000 + i}`, "1"]).flat();
    await redis.hset("catalog-wide", ...readers);
    expect(await redis.object("ENCODING", "catalog-wide")).toBe("hashtable");
    const withScript = await read("catalog-wide");
    const withoutScripts = decodeReading((await readLockKeysWithoutScripts(redis, ["catalog-wide"]))[0]!, { now: Date.now() });
    for (const reading of [withScript, withoutScripts]) {
      expect(reading?.format).toBe("redisson-rw");
      expect(reading?.holders.length).toBeGreaterThan(0);
      expect(reading?.holders.every((h) => h.mode === "read")).toBe(true);
    }
  });

  it("read-write lock's writer: released with the message that wakes every waiter", async () => {
    const name = "ledger";
    const subscriber = cluster.client(0);
    const a = new RedissonWriter(redis);
    expect(await a.writeLock(name, 4)).toBeNull();
    expect(await a.writeLock(name, 4)).toBeNull();
    expect(await read(name)).toMatchObject({ format: "redisson-rw", holders: [{ id: `${a.holder(4)}:write`, count: 2, mode: "write" }] });
    const waiter = await subscribeWaiter(subscriber, readWriteChannel(name));
    // The plain-lock format refuses a read-write lock rather than misreading it.
    expect((await formatByName("redisson").release!([redis], name, `${a.holder(4)}:write`, opts)).nodes[0]?.result).toBe("wrongtype");
    const done = await formatByName("redisson-rw").release!([redis], name, `${a.holder(4)}:write`, opts);
    expect(done.nodes[0], await waiter.accountUnlessWoken(done.nodes[0])).toMatchObject({ result: "deleted", woken: 1 });
    expect(await waiter.message).toBe("1");
  });

  it("fenced lock: a lock like an RLock, and its fencing counter is never suggested or released as a lock", async () => {
    const app = new RedissonWriter(redis);
    expect(await app.fencedLock("orders", 9)).toBe(1);
    expect(await app.fencedLock("orders", 9)).toBe(2);
    expect(await redis.get("redisson_lock_token:{orders}")).toBe("2");
    expect(await read("orders")).toMatchObject({ format: "redisson", holders: [{ id: app.holder(9), count: 2 }] });
    // Discovery suggests the lock, not the counter beside it (a string whose name says lock, that never expires).
    const discovery = new Discovery([{ id: "node-0", client: redis }], { patterns: () => ["lock:*"], count: 100, stepsPerSecond: 50 });
    await discovery.runPass();
    expect(discovery.result().candidates.map((c) => c.pattern)).toEqual(["orders"]);
    // Deleting the counter would start the tokens again from 1, below those already handed out: even a pattern
    // that covers it (an operator's `*orders*`) never shows or releases it.
    const isLock = lockKeyFilter(["*orders*"]);
    expect(isLock("orders")).toBe(true);
    expect(isLock("redisson_lock_token:{orders}")).toBe(false);
  });
});
