import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import type Redis from "ioredis";
import { LostLockError, MultiSemaphore, Mutex, Semaphore } from "redis-semaphore";
import { createLock, IoredisAdapter } from "redlock-universal";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { decodeReading, formatByName, notifyFlagsFor, readLockKeys, readLockKeysWithoutScripts, type FormatReading, type KeyReading } from "@/lib/locks/formats";
import { whoIsTold } from "@/lib/locks/release-text";
import { Redlock } from "@lockscope/redlock";
import { startCluster, type TestCluster } from "../../support/redis";
import { NodeRedlock } from "../../../lib/redlock/test/support/node-redlock.ts";
import { RedissonWriter } from "../../support/redisson";
import { until } from "../../support/wait";

/**
 * Each format against the layout its library really writes: the real library from npm where it installs
 * (node-redlock 4 and 5, redlock-universal, redis-lock, redis-semaphore, this engine), read back with the
 * watcher's batched read script on every node, decoded, then force-released by holder id.
 */

interface Redlock4Lock {
  value: string;
  unlock(): Promise<unknown>;
}
const require = createRequire(import.meta.url);
const Redlock4 = require("redlock4") as new (clients: unknown[], options?: { retryCount?: number }) => { lock(resource: string, ttl: number): Promise<Redlock4Lock> };
const redisLock = require("redis-lock") as (client: unknown, retryDelay?: number) => (name: string, timeoutMs?: number) => Promise<() => Promise<unknown>>;

describe("lock formats with the real libraries", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  const engines: Redlock[] = [];

  const readEverywhere = async (key: string): Promise<Array<FormatReading | null>> =>
    Promise.all(clients.map(async (c) => decodeReading((await readLockKeys(c, [key]))[0]!, { now: Date.now() })));
  const opts = { nodeTimeoutMs: 2_000 };

  beforeAll(async () => void (clients = (cluster = await startCluster(3)).clients()));
  beforeEach(() => cluster.flushAll());
  afterAll(async () => {
    await Promise.all(engines.map((e) => e.quit()));
    await cluster.close();
  });

  it("this engine's Redlock: holder decoded on every node, released with a revocation", async () => {
    const engine = new Redlock(clients, { label: "billing", host: "web-1" });
    engines.push(engine);
    const lock = await engine.acquire(["lock:engine"], 10_000);
    const readings = await readEverywhere("lock:engine");
    for (const r of readings) {
      expect(r).toMatchObject({ format: "lockscope", holders: [{ label: "billing", host: "web-1" }], warnings: [] });
      expect(r?.holders[0]?.id).toBe(lock.value);
    }
    const wrong = await formatByName("lockscope").release!(clients, "lock:engine", "lk1:not-the-holder", opts);
    expect(wrong.nodes.map((n) => n.result)).toEqual(["mismatch", "mismatch", "mismatch"]);
    const released = await formatByName("lockscope").release!(clients, "lock:engine", lock.value, opts);
    expect(released.nodes.map((n) => n.result)).toEqual(["deleted", "deleted", "deleted"]);
    // A holder that took the lock with a plain acquire does not listen: it finds out at its next extend or
    // release, and the answer does not claim it was told. Nobody was queued, so no waiter was woken.
    expect(released.notified).toEqual({ holder: false, waiters: false });
    // A using() routine listens, and hears it.
    const heard = await engine.using(["lock:engine"], 10_000, async (signal, held) => {
      const told = await formatByName("lockscope").release!(clients, "lock:engine", held.value, opts);
      expect(told.notified).toEqual({ holder: true, waiters: false });
      await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener("abort", () => resolve(), { once: true })));
      return (signal.reason as Error).name;
    });
    expect(heard).toBe("LockRevokedError");
  });

  it("node-redlock 5 and 4: a plain token on every node, compared and deleted", async () => {
    const v5 = new NodeRedlock(clients, { retryCount: 0 });
    const lock5 = await v5.acquire(["locks:account:1"], 10_000);
    const v4 = new Redlock4(clients, { retryCount: 0 });
    const lock4 = await v4.lock("locks:account:2", 10_000);
    for (const [key, value] of [["locks:account:1", lock5.value], ["locks:account:2", lock4.value]] as const) {
      for (const r of await readEverywhere(key)) expect(r).toMatchObject({ format: "token", fingerprint: value, holders: [{ id: value }], warnings: [] });
    }
    const token = formatByName("token");
    expect((await token.release!(clients, "locks:account:1", "someone-else", opts)).nodes.map((n) => n.result)).toEqual(["mismatch", "mismatch", "mismatch"]);
    expect(await clients[0]!.get("locks:account:1")).toBe(lock5.value);
    const released = await token.release!(clients, "locks:account:1", lock5.value, opts);
    expect(released.nodes.map((n) => n.result)).toEqual(["deleted", "deleted", "deleted"]);
    // A foreign holder is told nothing: it keeps working until its next extend or release.
    expect(released.notified).toEqual({ holder: false, waiters: false });
    expect(await clients[1]!.exists("locks:account:1")).toBe(0);
    // The other lock was not touched: its library still releases it as usual.
    await lock4.unlock();
    expect(await clients[0]!.exists("locks:account:2")).toBe(0);
  });

  it("redlock-universal: a token on one node", async () => {
    const lock = createLock({ adapter: new IoredisAdapter(clients[0]!), key: "lock:universal", ttl: 10_000, retryAttempts: 0 });
    const handle = await lock.acquire();
    const [r0, r1] = await readEverywhere("lock:universal");
    expect(r0).toMatchObject({ format: "token", holders: [{ id: handle.value }] });
    expect(r1).toBeNull();
    await lock.release(handle);
  });

  it("redis-lock: `lock.<name>` holding its expiry time, decoded", async () => {
    // redis-lock asks for a node-redis v4 client (`set(key, value, {PX, NX})`, `del`): this adapter passes its
    // calls to ioredis unchanged, so the key, value and options are the library's own.
    const c = clients[0]!;
    const v4Client = {
      v4: true,
      set: (key: string, value: number, o: { PX: number; NX: boolean }) => c.set(key, String(value), "PX", o.PX, "NX"),
      del: (key: string) => c.del(key),
    };
    const before = Date.now();
    const unlock = await redisLock(v4Client)("invoice", 8_000);
    const [reading] = await readEverywhere("lock.invoice");
    expect(reading?.format).toBe("token");
    const expiresAt = reading?.holders[0]?.expiresAt ?? 0;
    expect(expiresAt).toBeGreaterThanOrEqual(before + 8_000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 8_001);
    expect(reading?.warnings).toEqual([]);
    await unlock();
    expect(await c.exists("lock.invoice")).toBe(0);
  });

  it("redis-lock: a holder released by force frees its successor's lock when it unlocks, and the release dialog says so", async () => {
    const c = clients[0]!;
    const v4Client = {
      v4: true,
      set: (key: string, value: number, o: { PX: number; NX: boolean }) => c.set(key, String(value), "PX", o.PX, "NX"),
      del: (key: string) => c.del(key),
    };
    const lock = redisLock(v4Client, 10);
    const unlockA = await lock("report", 8_000);
    const [reading] = await readEverywhere("lock.report");
    const released = await formatByName("token").release!(clients, "lock.report", reading!.holders[0]!.id, opts);
    expect(released.nodes[0]?.result).toBe("deleted");
    // Another client takes it at once; then the released holder finishes its work and unlocks, as it would.
    await lock("report", 8_000);
    const successor = await c.get("lock.report");
    expect(successor).not.toBeNull();
    await unlockA();
    // redis-lock's unlock is a plain DEL: the successor's lock is gone while it still works under it.
    expect(await c.get("lock.report")).toBeNull();
    // What the operator reads before confirming says so.
    expect(whoIsTold({ format: reading!.format, holders: reading!.holders })).toMatch(/unlock will free the lock under the client that took it over/);
  });

  it("redis-semaphore's mutex: `mutex:<key>` with the instance identifier", async () => {
    const mutex = new Mutex(clients[0]!, "payments", { lockTimeout: 10_000, acquireTimeout: 1_000 });
    await mutex.acquire();
    const [reading] = await readEverywhere("mutex:payments");
    expect(reading).toMatchObject({ format: "redis-semaphore", redisType: "string", holders: [{ id: mutex.identifier }] });
    const released = await formatByName("redis-semaphore").release!(clients, "mutex:payments", mutex.identifier, opts);
    expect(released.nodes.map((n) => n.result)).toEqual(["deleted", "absent", "absent"]);
    mutex.stopRefresh();
  });

  it("redis-semaphore's semaphore: every permit holder; force release takes out exactly one", async () => {
    const make = () => new Semaphore(clients[0]!, "uploads", 3, { lockTimeout: 10_000, acquireTimeout: 1_000, onLockLost: () => {} });
    const permits = [make(), make(), make()];
    for (const p of permits) await p.acquire();
    const [reading] = await readEverywhere("semaphore:uploads");
    expect(reading?.format).toBe("redis-semaphore");
    expect(reading?.holders.map((h) => h.id).sort()).toEqual(permits.map((p) => p.identifier).sort());
    for (const h of reading?.holders ?? []) expect(h.since).toBeGreaterThan(Date.now() - 60_000);
    // The library's lock timeout is inferred from the key's TTL: ten seconds here.
    const first = reading?.holders[0];
    expect((first?.expiresAt ?? 0) - (first?.since ?? 0)).toBeGreaterThan(9_000);
    expect((first?.expiresAt ?? 0) - (first?.since ?? 0)).toBeLessThanOrEqual(10_100);

    const fmt = formatByName("redis-semaphore");
    expect((await fmt.release!(clients, "semaphore:uploads", "not-a-holder", opts)).nodes[0]?.result).toBe("mismatch");
    const target = permits[1]!;
    const released = await fmt.release!(clients, "semaphore:uploads", target.identifier, opts);
    expect(released.nodes[0]?.result).toBe("deleted");
    const left = await clients[0]!.zrange("semaphore:uploads", 0, -1);
    expect(left.sort()).toEqual([permits[0]!.identifier, permits[2]!.identifier].sort());
    // The freed permit is really free in the library's eyes: a fourth holder gets in.
    const fourth = make();
    expect(await fourth.tryAcquire()).toBe(true);
    for (const p of [...permits, fourth]) p.stopRefresh();
  });

  it("redis-semaphore's MultiSemaphore: a holder of several permits is one holder, released whole, and the library agrees", async () => {
    const c = clients[0]!;
    // A holder taking two of three permits at once, beside a holder of one. The library adds `<id>_0`, `<id>_1`.
    let lost: (error: Error) => void = () => {};
    const lostA = new Promise<Error>((resolve) => (lost = resolve));
    const a = new MultiSemaphore(c, "exports", 3, 2, { lockTimeout: 10_000, refreshInterval: 50, acquireTimeout: 1_000, onLockLost: (e) => lost(e) });
    const b = new Semaphore(c, "exports", 3, { lockTimeout: 10_000, acquireTimeout: 1_000, onLockLost: () => {} });
    await a.acquire();
    await b.acquire();
    const [reading] = await readEverywhere("semaphore:exports");
    // Two holders, not three: the two permits are one holder's.
    expect(reading?.holders.map((h) => ({ id: h.id, count: h.count })).sort((x, y) => x.id.localeCompare(y.id))).toEqual(
      [{ id: a.identifier, count: 2 }, { id: b.identifier, count: undefined }].sort((x, y) => x.id.localeCompare(y.id)),
    );
    // Released by the holder id shown: both of its permits go, the other holder stays.
    const released = await formatByName("redis-semaphore").release!(clients, "semaphore:exports", a.identifier, opts);
    expect(released.nodes[0]?.result).toBe("deleted");
    expect(await c.zrange("semaphore:exports", 0, -1)).toEqual([b.identifier]);
    // The holder finds out at its next refresh (which looks at its first permit) and writes nothing back.
    expect(await lostA).toBeInstanceOf(LostLockError);
    // The two freed permits are free in the library's eyes, and the semaphore never holds more than its limit.
    const next = new MultiSemaphore(c, "exports", 3, 2, { lockTimeout: 10_000, acquireTimeout: 1_000, onLockLost: () => {} });
    expect(await next.tryAcquire()).toBe(true);
    expect(await c.zcard("semaphore:exports")).toBe(3);
    for (const p of [a, b, next]) p.stopRefresh();
  });

  it("redis-semaphore's MultiSemaphore: a holder of more permits than one read takes is one holder, with at least the permits read", async () => {
    const c = clients[0]!;
    // Seventy permits of one holder beside a holder of one: more members than one read takes (64), and among equal
    // scores Redis orders by member, so `<id>_0` is not among those read.
    const b = new Semaphore(c, "many", 100, { lockTimeout: 10_000, acquireTimeout: 1_000, onLockLost: () => {} });
    await b.acquire();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const a = new MultiSemaphore(c, "many", 100, 70, { lockTimeout: 10_000, acquireTimeout: 1_000, onLockLost: () => {} });
    await a.acquire();
    const [reading] = await readEverywhere("semaphore:many");
    expect(reading?.warnings).toContain("truncated");
    // One holder, not 64: the read was cut inside its permits (its newest), so the other holder is not among those read.
    expect(reading?.holders).toHaveLength(1);
    expect(reading?.holders[0]?.id).toBe(a.identifier);
    expect(reading?.holders[0]?.count).toBeGreaterThanOrEqual(64);
    expect(reading?.holders[0]?.count).toBeLessThanOrEqual(70);
    for (const p of [a, b]) p.stopRefresh();
  });

  it("redis-semaphore's MultiSemaphore: a token naming one permit of a large holder releases the whole holder, and the library agrees", async () => {
    const c = clients[0]!;
    // Seventy permits of one holder: more than one read takes (64).
    let lost: (error: Error) => void = () => {};
    const lostA = new Promise<Error>((resolve) => (lost = resolve));
    const a = new MultiSemaphore(c, "bulk", 100, 70, { lockTimeout: 10_000, refreshInterval: 50, acquireTimeout: 1_000, onLockLost: (e) => lost(e) });
    await a.acquire();
    const shown = `${a.identifier}_65`;
    // Released by that id: every permit of its holder goes, as the library's own release takes them.
    const released = await formatByName("redis-semaphore").release!(clients, "semaphore:bulk", shown, opts);
    expect(released.nodes[0]?.result).toBe("deleted");
    expect(await c.zcard("semaphore:bulk")).toBe(0);
    // The holder finds out at its next refresh and writes nothing back; the permits are free in the library's eyes.
    expect(await lostA).toBeInstanceOf(LostLockError);
    const next = new MultiSemaphore(c, "bulk", 100, 100, { lockTimeout: 10_000, acquireTimeout: 1_000, onLockLost: () => {} });
    expect(await next.tryAcquire()).toBe(true);
    expect(await c.zcard("semaphore:bulk")).toBe(100);
    for (const p of [a, next]) p.stopRefresh();
  });

  it("never touches a key of another type", async () => {
    await clients[0]!.hset("lock:profile", "name", "x");
    for (const name of ["token", "shedlock", "redis-semaphore"] as const) {
      const r = await formatByName(name).release!(clients, "lock:profile", "x", opts);
      expect(r.nodes[0]).toMatchObject({ result: "wrongtype", redisType: "hash" });
    }
    await clients[0]!.set("lock:str", "v");
    for (const name of ["redisson", "redisson-rw"] as const) {
      expect((await formatByName(name).release!(clients, "lock:str", "v", opts)).nodes[0]).toMatchObject({ result: "wrongtype", redisType: "string" });
    }
    expect(await clients[0]!.hget("lock:profile", "name")).toBe("x");
    expect(await clients[0]!.get("lock:str")).toBe("v");
  });

  it("ShedLock: host and start time from `ADDED:<instant>@<host>`, compared and deleted", async () => {
    // ShedLock is a JVM library: these are the commands its providers send. Lock: SET key value NX PX lockAtMostFor.
    // Unlock past lockAtLeastFor: its providers that write a value of their own (Spring Data, Jedis, Lettuce, ending
    // in a UUID) delete the key only while it holds that value (their `delLuaScript`); older ones (a value without
    // it) send a plain DEL.
    const key = "job-lock:default:nightly-report";
    const compareDelete = (value: string) => clients[0]!.eval(`if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) else return 0 end`, 1, key, value);
    for (const [released, successor, unlock, kept] of [
      [`@worker-3:6b2c1a58-4b49-4e3c-9c59-5b0b6f4d2a11`, `@worker-4:0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9`, compareDelete, true],
      [`@worker-3`, `@worker-4`, () => clients[0]!.del(key), false],
    ] as const) {
      const value = `ADDED:${new Date().toISOString()}${released}`;
      await clients[0]!.set(key, value, "PX", 60_000, "NX");
      const [reading] = await readEverywhere(key);
      expect(reading).toMatchObject({ format: "shedlock", holders: [{ id: value, host: "worker-3" }] });
      const done = await formatByName("shedlock").release!(clients, key, value, opts);
      expect(done.nodes[0]?.result).toBe("deleted");
      // Another instance starts the job; then the released one ends and unlocks as its provider does.
      const next = `ADDED:${new Date().toISOString()}${successor}`;
      expect(await clients[0]!.set(key, next, "PX", 60_000, "NX")).toBe("OK");
      await unlock(value);
      expect(await clients[0]!.get(key)).toBe(kept ? next : null);
      // What the operator reads before confirming says which of the two it is.
      const told = whoIsTold({ format: "shedlock", holders: reading!.holders });
      if (kept) {
        expect(told).not.toMatch(/whoever holds it/);
        expect(told).toMatch(/leaves it to the instance that took it over/);
      } else {
        expect(told).toMatch(/deletes the lock .* whoever holds it then/);
      }
      await clients[0]!.del(key);
    }
  });

  it("a SETNX lock whose EXPIRE never came is flagged no-ttl", async () => {
    await clients[0]!.setnx("lock", "client-7");
    const [reading] = await readEverywhere("lock");
    expect(reading).toMatchObject({ format: "token", warnings: ["no-ttl"], expiresAt: Infinity });
  });

  it("bounds what it reads of a huge key", async () => {
    await clients[0]!.set("lock:huge", "x".repeat(100_000));
    const members: Array<string | number> = [];
    for (let i = 0; i < 500; i++) members.push(Date.now() + i, `m${i}`);
    await clients[0]!.zadd("semaphore:big", ...members);
    const [huge] = await readLockKeys(clients[0]!, ["lock:huge"]);
    expect(huge?.raw).toMatchObject({ type: "string", size: 100_000 });
    expect(huge?.raw.type === "string" && huge.raw.value.length).toBe(1024);
    const [big] = await readLockKeys(clients[0]!, ["semaphore:big"]);
    expect(big?.raw.type === "zset" && big.raw.members.length).toBe(64);
    // The newest permits are the ones read.
    expect(big?.raw.type === "zset" && big.raw.members[0]?.[0]).toBe("m499");
    const decoded = decodeReading(big!, { now: Date.now() });
    expect(decoded?.warnings).toContain("truncated");
  });

  it("reads the same without scripts, for nodes that refuse EVAL", async () => {
    const c = clients[0]!;
    await c.set("lock:a", "token-a", "PX", 60_000);
    await c.set("lock:long", "y".repeat(5_000));
    await c.hset("lock:redisson", "8743c9c0-0795-4907-87fd-6c719a6b4586:1", "2");
    await c.pexpire("lock:redisson", 60_000);
    await c.zadd("semaphore:s", Date.now(), "p1", Date.now() - 5, "p2");
    await c.rpush("lock:list", "x");
    // Not UTF-8, and longer than a digest is taken of: the digests (or none) must agree too.
    await c.set("lock:binary", Buffer.from([0x4b, 0xff, 0x31]));
    await c.set("lock:huge", "z".repeat(70_000));
    // Exactly as long as the bound (read whole, its size asked), and empty.
    await c.set("lock:edge", "e".repeat(1_024));
    await c.set("lock:empty", "");
    const keys = ["lock:a", "lock:long", "lock:redisson", "semaphore:s", "lock:list", "lock:missing", "lock:binary", "lock:huge", "lock:edge", "lock:empty"];
    const strip = (readings: KeyReading[]) =>
      readings.map((r) => ({ key: r.key, raw: r.raw.type === "none" ? r.raw : { ...r.raw, pttlMs: r.raw.pttlMs > 0 ? "ttl" : r.raw.pttlMs } }));
    const scripted = strip(await readLockKeys(c, keys, { companions: false }));
    const plain = strip(await readLockKeysWithoutScripts(c, keys));
    expect(plain).toEqual(scripted);
    // Where MULTI is refused too: the same readings from a plain pipeline.
    expect(strip(await readLockKeysWithoutScripts(c, keys, {}, undefined, "pipeline"))).toEqual(scripted);
    expect(scripted.map((r) => r.raw.type)).toEqual(["string", "string", "hash", "zset", "other", "none", "string", "string", "string", "string"]);
    const digests = scripted.map((r) => (r.raw.type === "string" ? (r.raw.digest ?? null) : null));
    const sha1 = (bytes: Buffer | string) => createHash("sha1").update(bytes).digest("hex");
    expect(digests).toEqual([null, sha1("y".repeat(5_000)), null, null, null, null, sha1(Buffer.from([0x4b, 0xff, 0x31])), null, null, null]);
    const sizes = scripted.map((r) => (r.raw.type === "string" ? r.raw.size : null));
    expect(sizes).toEqual([7, 5_000, null, null, null, null, 3, 70_000, 1_024, 0]);
  });

  it("without scripts, reads a key deleted between its two reads as gone, not as an empty lock", async () => {
    const c = clients[0]!;
    await c.set("lock:brief", "token-b", "PX", 60_000);
    await c.hset("lock:brief-hash", "8743c9c0-0795-4907-87fd-6c719a6b4586:1", "1");
    await c.zadd("semaphore:brief", Date.now(), "p1");
    const keys = ["lock:brief", "lock:brief-hash", "semaphore:brief"];
    // The holders let go right after the first read (TYPE, PTTL) answered, before the second one is sent.
    let multis = 0;
    const client = {
      multi: () => {
        const multi = c.multi();
        if (++multis === 2) {
          const exec = multi.exec.bind(multi);
          multi.exec = async () => {
            await c.del(...keys);
            return exec();
          };
        }
        return multi;
      },
    } as unknown as Parameters<typeof readLockKeysWithoutScripts>[0];
    const readings = await readLockKeysWithoutScripts(client, keys);
    expect(readings.map((r) => r.raw.type)).toEqual(["none", "none", "none"]);
  });

  it("redis-semaphore: a permit the library counts as dead is not a holder, and the library agrees", async () => {
    const c = clients[0]!;
    // A live holder refreshes inside its timeout, so only the crashed one goes stale. Each refresh also prunes
    // dead entries (as the library does), so the refreshes are spaced: taken together, the crashed entry is
    // dead from 3 s after it was taken until the live holder's second refresh at 4.8 s.
    const make = () => new Semaphore(c, "reports", 2, { lockTimeout: 3_000, refreshInterval: 2_400, acquireTimeout: 2_000, retryInterval: 20, onLockLost: () => {} });
    const crashed = make();
    await crashed.acquire();
    // The holder dies: it stops refreshing, its entry stays in the key.
    crashed.stopRefresh();
    const alive = make();
    await alive.acquire();
    const reading = await until("the crashed permit is dead in the library's eyes", async () => {
      const [r] = await readEverywhere("semaphore:reports");
      return r?.warnings.includes("stale-entries") ? r : null;
    });
    expect(reading.holders.map((h) => h.id)).toEqual([alive.identifier]);
    expect(await c.zscore("semaphore:reports", crashed.identifier)).not.toBeNull();
    // With one live permit of two, the library lets the next holder in (pruning the dead entry as it does).
    const next = make();
    expect(await next.tryAcquire()).toBe(true);
    expect(await c.zscore("semaphore:reports", crashed.identifier)).toBeNull();
    alive.stopRefresh();
    next.stopRefresh();
  });

  it("the notification flags the formats ask for make their writes visible", async () => {
    const c = clients[0]!;
    const sub = cluster.client(0);
    const events: string[] = [];
    sub.on("pmessage", (_p: string, channel: string, event: string) => events.push(`${channel.slice("__keyspace@0__:".length)} ${event}`));
    await sub.psubscribe("__keyspace@0__:*");
    for (const [flags, expected] of [
      // Without h and z, a Redisson lock and a semaphore show only their PEXPIRE: the acquisition itself is missed.
      ["Kgxe$", ["mutex:a set", "mutex:a expire", "app-lock expire", "semaphore:b expire"]],
      [notifyFlagsFor().join(""), ["mutex:a set", "mutex:a expire", "app-lock hincrby", "app-lock expire", "semaphore:b zadd", "semaphore:b expire"]],
    ] as const) {
      await cluster.flushAll();
      events.length = 0;
      await c.config("SET", "notify-keyspace-events", flags);
      const mutex = new Mutex(c, "a", { lockTimeout: 10_000 });
      await mutex.acquire();
      mutex.stopRefresh();
      await new RedissonWriter(c).lock("app-lock", 1);
      const semaphore = new Semaphore(c, "b", 1, { lockTimeout: 10_000 });
      await semaphore.acquire();
      semaphore.stopRefresh();
      await c.publish("__keyspace@0__:marker", "done");
      await until("the marker arrives", () => events.includes("marker done"));
      expect(events.filter((e) => e !== "marker done" && !e.startsWith("semaphore:b zremrangebyscore"))).toEqual(expected);
    }
    await c.config("SET", "notify-keyspace-events", "");
  });
});
