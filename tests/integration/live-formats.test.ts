import type Redis from "ioredis";
import { MultiSemaphore, RedlockSemaphore, Semaphore } from "redis-semaphore";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as LockModule from "@/app/api/locks/[resource]/route";
import type * as LocksModule from "@/app/api/locks/route";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import type * as PatternsModule from "@/app/api/patterns/route";
import type * as AuditModule from "@/app/api/audit/route";
import type { Lock, LockDetail } from "@/lib/locks/types";
import { call, OPERATOR_TOKEN, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { lockChannel, RedissonWriter, subscribeWaiter } from "../support/redisson";
import { until } from "../support/wait";

/**
 * Every format in the live view, on the default configuration (no LOCK_PATTERNS set): shown with its holders
 * decoded, its scope, and its end (released, expired, force-released), against real redis-server nodes.
 */
describe("the live view, whatever library took the lock", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let lock: typeof LockModule;
  let locks: typeof LocksModule;
  let release: typeof ReleaseModule;
  let patterns: typeof PatternsModule;
  let audit: typeof AuditModule;
  const extra: Redis[] = [];

  async function detail(resource: string): Promise<LockDetail | null> {
    const res = await call(lock.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } });
    return res.status === 200 ? (res.body as LockDetail) : null;
  }
  const live = (resource: string, check: (l: LockDetail) => boolean) =>
    until(`${resource} as expected`, async () => {
      const l = await detail(resource);
      return l && check(l) ? l : null;
    });
  const forceRelease = (resource: string, body: Record<string, unknown>) =>
    call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, { token: OPERATOR_TOKEN, params: { resource }, body });

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    clients = cluster.clients();
    lock = await import("@/app/api/locks/[resource]/route");
    locks = await import("@/app/api/locks/route");
    release = await import("@/app/api/locks/[resource]/release/route");
    patterns = await import("@/app/api/patterns/route");
    audit = await import("@/app/api/audit/route");
    (await import("@/server/patterns-audit")).registerPatternsAuditor();
    await startLiveReconciled();
  });

  afterAll(async () => {
    await Promise.all(extra.map((c) => c.quit()));
    await tearDownConsole(cluster);
  });

  it("shows a Redisson lock on one node as held, single-instance, with its holder decoded, and its release", async () => {
    const redisson = new RedissonWriter(clients[0]!);
    expect(await redisson.lock("lock:redisson-orders", 42)).toBeNull();
    expect(await redisson.lock("lock:redisson-orders", 42)).toBeNull(); // re-entered: hold count 2
    const held = await live("lock:redisson-orders", (l) => l.state === "held" && l.holders[0]?.count === 2);
    expect(held).toMatchObject({ format: "redisson", redisType: "hash", scope: "single", quorum: 1, quorumHeld: 1, warnings: [] });
    expect(held.holders).toEqual([{ id: redisson.holder(42), label: redisson.clientId, thread: 42, count: 2 }]);
    // Nothing about a Redisson client's failed attempts reaches Redis: not visible, never a made-up 0.
    expect(held.contention).toEqual({ attemptsPerMin: null, waiters: null, source: null });
    await redisson.unlock("lock:redisson-orders", 42);
    await redisson.unlock("lock:redisson-orders", 42);
    await live("lock:redisson-orders", (l) => l.state === "released");
  });

  it("shows a Redisson read lock named with a hash tag as one lock, never its lease keys, which cannot be released", async () => {
    // `lock:{orders}` keeps `lock:{orders}:<client>:<thread>:rwlock_timeout:1` beside it, which `lock:*` also matches.
    const redisson = new RedissonWriter(clients[2]!);
    expect(await redisson.readLock("lock:{orders}", 57)).toBeNull();
    const leaseKeys = await clients[2]!.keys("lock:{orders}:*rwlock_timeout*");
    expect(leaseKeys).toHaveLength(1);
    await live("lock:{orders}", (l) => l.state === "held" && l.format === "redisson-rw");
    const listed = (await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Lock[] };
    expect(listed.locks.filter((l) => l.resource.startsWith("lock:{orders}")).map((l) => l.resource)).toEqual(["lock:{orders}"]);
    const refused = await forceRelease(leaseKeys[0]!, { reason: "stuck lease key" });
    expect(refused.status).toBe(404);
    expect(JSON.stringify(refused.body)).toMatch(/kept beside a lock .*not a lock; nothing was touched/);
    expect(await clients[2]!.exists(leaseKeys[0]!)).toBe(1);
  });

  it("force-releases a Redisson lock by its holder field and wakes a waiter subscribed the way Redisson's are", async () => {
    const redisson = new RedissonWriter(clients[1]!);
    await redisson.lock("lock:redisson-report", 7);
    const seen = await live("lock:redisson-report", (l) => l.state === "held");
    const subscriber = clients[1]!.duplicate();
    extra.push(subscriber);
    const waiter = await subscribeWaiter(subscriber, lockChannel("lock:redisson-report"));

    const stale = await forceRelease("lock:redisson-report", { reason: "stuck report job", token: `${redisson.clientId}:8` });
    expect(stale.status).toBe(409);
    expect(await clients[1]!.exists("lock:redisson-report")).toBe(1);

    const res = await forceRelease("lock:redisson-report", { reason: "stuck report job", token: seen.holders[0]!.id });
    expect(res.status).toBe(200);
    // Redisson's holder is never told (it listens for no revocation); its waiters are woken.
    expect(res.body).toMatchObject({ released: true, format: "redisson", notified: { holder: false, waiters: true } });
    expect(await waiter.message).toBe("0");
    await live("lock:redisson-report", (l) => l.state === "force-released");
  });

  it("counts a Redisson fair lock's waiters as they join and give up, while the lock's hash stays as it was", async () => {
    const name = "lock:fair-payouts";
    const app = new RedissonWriter(clients[0]!);
    const other = new RedissonWriter(clients[0]!);
    // Held with a fixed lease (no watchdog): the hash is written once and never again.
    expect(await app.fairLock(name, 1, 120_000)).toBeNull();
    await live(name, (l) => l.state === "held" && l.format === "redisson");
    expect(await other.fairLock(name, 2)).toBeGreaterThan(0);
    await live(name, (l) => l.contention.waiters === 1 && l.contention.source === "queue");
    expect(await other.fairLock(name, 3)).toBeGreaterThan(0);
    await live(name, (l) => l.contention.waiters === 2);
    // Thread 2 gives up waiting, as Redisson's acquireFailed does: off the waiting times, then off the queue.
    await clients[0]!.eval(
      "redis.call('zrem', KEYS[2], ARGV[1]); redis.call('lrem', KEYS[1], 0, ARGV[1])",
      2,
      `redisson_lock_queue:{${name}}`,
      `redisson_lock_timeout:{${name}}`,
      other.holder(2),
    );
    const one = await live(name, (l) => l.contention.waiters === 1);
    expect(one.holders).toEqual([{ id: app.holder(1), label: app.clientId, thread: 1, count: 1 }]);
    expect(await clients[0]!.hget(name, app.holder(1))).toBe("1");
  });

  it("stops counting a Redisson fair-lock waiter whose wait ran out though no key was written (its client died)", async () => {
    const name = "lock:fair-crashed";
    const app = new RedissonWriter(clients[0]!);
    expect(await app.fairLock(name, 1, 120_000)).toBeNull();
    await live(name, (l) => l.state === "held" && l.format === "redisson");
    // Redisson wrote this waiter's entry with the time it stops waiting, 1.5 s from now; its client then died,
    // so nothing is written again: no notification says the count dropped.
    const dead = `${app.clientId}:7`;
    await clients[0]!.eval(
      "redis.call('zadd', KEYS[2], ARGV[2], ARGV[1]); redis.call('rpush', KEYS[1], ARGV[1])",
      2,
      `redisson_lock_queue:{${name}}`,
      `redisson_lock_timeout:{${name}}`,
      dead,
      Date.now() + 1_500,
    );
    await live(name, (l) => l.contention.waiters === 1);
    const after = await live(name, (l) => l.contention.waiters === 0);
    expect(after.state).toBe("held");
    // Nothing was touched: the queue is Redisson's to clean.
    expect(await clients[0]!.lrange(`redisson_lock_queue:{${name}}`, 0, -1)).toEqual([dead]);
    expect(await clients[0]!.hget(name, app.holder(1))).toBe("1");
  });

  it("shows a redis-semaphore semaphore with every permit holder as one lock, holders joining and leaving, until it is released", async () => {
    const a = new Semaphore(clients[2]!, "reports", 3, { lockTimeout: 30_000, acquireTimeout: 1_000, refreshInterval: 0 });
    const b = new Semaphore(clients[2]!, "reports", 3, { lockTimeout: 30_000, acquireTimeout: 1_000, refreshInterval: 0 });
    await a.acquire();
    const first = await live("semaphore:reports", (l) => l.state === "held" && l.holders.length === 1);
    // (Its first sighting shared by the consoles, which every later value's is measured against.)
    await new Promise((r) => setTimeout(r, 300));
    await b.acquire();
    const both = await live("semaphore:reports", (l) => l.holders.length === 2);
    // Held since the first holder took it, whoever joins; also after an extension (a holder's refresh), which
    // shares the first sighting of the new holder set.
    await clients[2]!.pexpire("semaphore:reports", 40_000);
    const extended = await live("semaphore:reports", (l) => l.timeline.some((t) => t.type === "extended"));
    await new Promise((r) => setTimeout(r, 300));
    expect((await detail("semaphore:reports"))?.acquiredAt).toBe(first.acquiredAt);
    expect(both.acquiredAt).toBe(first.acquiredAt);
    expect(extended.acquiredAt).toBe(first.acquiredAt);
    expect(both).toMatchObject({ format: "redis-semaphore", redisType: "zset", scope: "single" });
    expect(both.holders.map((h) => h.id).sort()).toEqual([a.identifier, b.identifier].sort());
    await a.release();
    const one = await live("semaphore:reports", (l) => l.holders.length === 1);
    // One lock throughout: a holder joining or leaving is on its timeline, not a new acquisition.
    expect(one.timeline.filter((t) => t.type === "acquired")).toHaveLength(1);
    expect(one.timeline.filter((t) => t.type === "holders").length).toBeGreaterThanOrEqual(2);

    // Without a holder id the operator is asked which permit holder to release.
    expect((await forceRelease("semaphore:reports", { reason: "which one?" })).status).toBe(422);
    const res = await forceRelease("semaphore:reports", { reason: "stuck worker", token: b.identifier });
    expect(res.body).toMatchObject({ released: true, notified: { holder: false, waiters: false } });
    await live("semaphore:reports", (l) => l.state === "force-released");
  });

  it("stops showing a redis-semaphore permit holder that crashed once its permit is dead in the library's eyes, though no key was written", async () => {
    // Both take a permit with a lock timeout of 10 s and do not refresh; A dies (its permit stays in the key) and B
    // takes its permit 3 s later, which sets the key's TTL to B's end. From A's end to B's nothing is written.
    const options = { lockTimeout: 10_000, acquireTimeout: 1_000, refreshInterval: 0 };
    const a = new Semaphore(clients[0]!, "crashes", 2, options);
    const b = new Semaphore(clients[0]!, "crashes", 2, options);
    await a.acquire();
    await live("semaphore:crashes", (l) => l.state === "held" && l.holders.length === 1);
    await new Promise((r) => setTimeout(r, 3_000));
    await b.acquire();
    // (Taken before A's end: the library pruned nothing.)
    expect(await clients[0]!.zscore("semaphore:crashes", a.identifier)).not.toBeNull();
    const after = await live("semaphore:crashes", (l) => l.state === "held" && l.holders.length === 1 && l.holders[0]?.id === b.identifier);
    expect(after.warnings).toContain("stale-entries");
    // The library agrees: A's permit counts for nothing, a newcomer gets in beside B.
    const c = new Semaphore(clients[0]!, "crashes", 2, options);
    expect(await c.tryAcquire()).toBe(true);
    await Promise.all([b.release(), c.release()]);
  });

  it("shows a MultiSemaphore holder of several permits once, with their number, and force-releases all of them by its id", async () => {
    const a = new MultiSemaphore(clients[1]!, "renders", 4, 3, { lockTimeout: 30_000, acquireTimeout: 1_000, refreshInterval: 0 });
    await a.acquire();
    const held = await live("semaphore:renders", (l) => l.state === "held");
    expect(held.holders).toEqual([expect.objectContaining({ id: a.identifier, count: 3 })]);
    const res = await forceRelease("semaphore:renders", { reason: "stuck renderer", token: a.identifier });
    expect(res.body).toMatchObject({ released: true, format: "redis-semaphore" });
    await live("semaphore:renders", (l) => l.state === "force-released");
    // Every permit it held is free again: another holder takes all four.
    const next = new MultiSemaphore(clients[1]!, "renders", 4, 4, { lockTimeout: 30_000, acquireTimeout: 1_000, refreshInterval: 0 });
    expect(await next.tryAcquire()).toBe(true);
    await next.release();
  });

  it("shows a Redlock semaphore held by every holder with a quorum of its own, though no two nodes hold the same set", async () => {
    const options = { lockTimeout: 30_000, acquireTimeout: 1_000, refreshInterval: 0, retryInterval: 20 };
    const a = new RedlockSemaphore(clients, "quorum-permits", 3, options);
    const b = new RedlockSemaphore(clients, "quorum-permits", 3, options);
    await a.acquire();
    await b.acquire();
    await live("semaphore:quorum-permits", (l) => l.state === "held" && l.holders.length === 2);
    // Node 2 loses A's permit and node 0 B's (a restart without persistence, an eviction): A is held on nodes 0
    // and 1, B on 1 and 2, a quorum each.
    await clients[2]!.zrem("semaphore:quorum-permits", a.identifier);
    await clients[0]!.zrem("semaphore:quorum-permits", b.identifier);
    // (Nodes that disagree keep the lock's previous view for a moment, while a write may be on its way to the rest.)
    const split = await live("semaphore:quorum-permits", (l) => new Set(l.nodes.map((n) => n.token)).size === 3 && l.quorumHeld === 2 && l.state !== "partial");
    expect(split).toMatchObject({ state: "held", scope: "quorum", quorumHeld: 2 });
    // And it stays so, well past that moment.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const settled = await detail("semaphore:quorum-permits");
    expect(settled).toMatchObject({ state: "held", scope: "quorum", quorumHeld: 2 });
    expect(settled?.holders.map((h) => h.id).sort()).toEqual([a.identifier, b.identifier].sort());
    // Node 1 loses B as well: B holds one node only, A still a quorum.
    await clients[1]!.zrem("semaphore:quorum-permits", b.identifier);
    const one = await live("semaphore:quorum-permits", (l) => l.holders.length === 1);
    expect(one).toMatchObject({ state: "held", holders: [{ id: a.identifier }] });
    // And no holder with a quorum is partial.
    await clients[0]!.zrem("semaphore:quorum-permits", a.identifier);
    await live("semaphore:quorum-permits", (l) => l.state === "partial");
    await Promise.all(clients.map((c) => c.del("semaphore:quorum-permits")));
  });

  it("reads a redis-semaphore mutex whose nodes hold values sharing a line as partial, not as held by that line", async () => {
    // A mutex's value is one holder, whatever lines it has: no vote per line.
    await clients[0]!.set("mutex:lines", "shared\nA", "PX", 30_000);
    await clients[1]!.set("mutex:lines", "shared\nB", "PX", 30_000);
    await live("mutex:lines", (l) => l.state === "partial" && l.nodes.filter((n) => n.token !== null).length === 2);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(await detail("mutex:lines")).toMatchObject({ state: "partial", quorumHeld: 1 });
    await Promise.all(clients.map((c) => c.del("mutex:lines")));
  });

  it("shows a SETNX lock on one node as held with scope single, counted as held, and its expiry", async () => {
    await clients[0]!.set("lock:single", "a-token", "PX", 4_000, "NX");
    const held = await live("lock:single", (l) => l.state === "held");
    expect(held).toMatchObject({ format: "token", scope: "single", quorum: 1, quorumHeld: 1, holders: [{ id: "a-token" }] });
    const list = await call(locks.GET, "GET", "/api/locks?state=held", { token: VIEWER_TOKEN });
    expect((list.body as { locks: Lock[] }).locks.map((l) => l.resource)).toContain("lock:single");
    await live("lock:single", (l) => l.state === "expired");
  });

  it("tells apart values that share their first KiB, or differ only in bytes that are not UTF-8, so no false quorum shows", async () => {
    // Three nodes, three different values whose first 1,024 bytes agree: no value has a quorum.
    const head = "w".repeat(1_500);
    await Promise.all(clients.map((c, i) => c.set("lock:long-values", `${head}-writer-${i}`, "PX", 30_000)));
    const long = await live("lock:long-values", (l) => l.state === "partial" && l.nodes.every((n) => n.token !== null));
    expect(new Set(long.nodes.map((n) => n.token)).size).toBe(3);
    expect(long.warnings).toContain("truncated");
    // The same value everywhere is held by a quorum, and shows the same on every node.
    await Promise.all(clients.map((c) => c.set("lock:long-values", `${head}-writer-0`, "PX", 30_000)));
    const same = await live("lock:long-values", (l) => l.state === "held");
    expect(same.quorumHeld).toBe(3);
    expect(same.holders).toHaveLength(1);
    expect(same.holders[0]!.id.startsWith(head.slice(0, 1_000))).toBe(true);

    // 0xff and 0xfe are not UTF-8: both read as U+FFFD, yet they are two values.
    await Promise.all(clients.map((c, i) => c.set("lock:binary-value", Buffer.from([0x4b, i === 2 ? 0xfe : 0xff, 0x31]), "PX", 30_000)));
    const binary = await live("lock:binary-value", (l) => l.state === "held" && l.nodes.every((n) => n.token !== null));
    expect(binary.quorumHeld).toBe(2);
    expect(binary.nodes[0]!.token).toBe(binary.nodes[1]!.token);
    expect(binary.nodes[2]!.token).not.toBe(binary.nodes[0]!.token);
    await Promise.all(clients.map((c, i) => c.set("lock:binary-value", Buffer.from([0x4b, 0xf0 + i, 0x31]), "PX", 30_000)));
    await live("lock:binary-value", (l) => l.state === "partial");
    await Promise.all(clients.map((c) => c.del("lock:long-values", "lock:binary-value")));
  });

  it("flags a lock that never expires by itself", async () => {
    await clients[0]!.setnx("lock", "crashed-before-expire");
    const held = await live("lock", (l) => l.state === "held");
    expect(held.warnings).toContain("no-ttl");
    expect(held.expiresAt).toBeNull();
    await clients[0]!.del("lock");
    await live("lock", (l) => l.state === "released");
  });

  it("shows a key written twice in a moment as it is after the second write: SETNX then EXPIRE, HSET then PEXPIRE then HINCRBY", async () => {
    const pause = () => new Promise((r) => setTimeout(r, 10));
    // The article's lock: SETNX, then EXPIRE as a second command, on one node (each read apart).
    const keys = [1, 2, 3, 4, 5].map((i) => `lock:nx-then-expire/${i}`);
    for (const key of keys) {
      await clients[0]!.setnx(key, `owner-${key}`);
      await pause();
      await clients[0]!.expire(key, 300);
    }
    for (const key of keys) {
      const held = await live(key, (l) => l.state === "held" && l.expiresAt !== null);
      expect(held.warnings, key).not.toContain("no-ttl");
    }
    // Redisson's reentrant hold, taken as three commands: a hold count of 2 and a TTL.
    const field = "6f1c2b9e-3d4a-4c1b-9e8f-0a1b2c3d4e5f:1";
    await clients[1]!.hset("lock:reentered", field, "1");
    await pause();
    await clients[1]!.pexpire("lock:reentered", 120_000);
    await pause();
    await clients[1]!.hincrby("lock:reentered", field, 1);
    const reentered = await live("lock:reentered", (l) => l.state === "held" && l.expiresAt !== null && l.holders[0]?.count === 2);
    expect(reentered.warnings).not.toContain("no-ttl");
    await Promise.all([clients[1]!.del("lock:reentered"), ...keys.map((k) => clients[0]!.del(k))]);
  });

  it("shows a TTL given to a lock held without one, with its length for the TTL bar and on the timeline", async () => {
    await clients[0]!.setnx("lock:ttl-later", "owner-later");
    const bare = await live("lock:ttl-later", (l) => l.state === "held");
    expect(bare).toMatchObject({ expiresAt: null, ttlMs: null });
    expect(bare.warnings).toContain("no-ttl");
    await clients[0]!.expire("lock:ttl-later", 120);
    const timed = await live("lock:ttl-later", (l) => l.expiresAt !== null);
    expect(timed.warnings).not.toContain("no-ttl");
    // The bar's full length: the TTL as given, not nothing.
    expect(timed.ttlMs).toBeGreaterThan(110_000);
    expect(timed.ttlMs).toBeLessThanOrEqual(120_000);
    expect(timed.timeline.map((t) => [t.type, t.detail?.replace(/[\d.]+ s$/, "N s")])).toEqual([
      ["acquired", "by a foreign client, on 1 of 3 nodes"],
      ["extended", "TTL set: expires in N s"],
    ]);
    // And taken away again, then given again (PERSIST, then PEXPIRE): each change on the timeline.
    await clients[0]!.persist("lock:ttl-later");
    await live("lock:ttl-later", (l) => l.expiresAt === null);
    await clients[0]!.pexpire("lock:ttl-later", 60_000);
    const again = await live("lock:ttl-later", (l) => l.expiresAt !== null);
    expect(again.ttlMs).toBeLessThanOrEqual(60_000);
    expect(again.timeline.map((t) => t.detail?.replace(/[\d.]+ s$/, "N s")).slice(1)).toEqual(["TTL set: expires in N s", "TTL removed", "TTL set: expires in N s"]);
    await clients[0]!.del("lock:ttl-later");
  });

  it("shows a redis-semaphore permit refreshed with its new start and end", async () => {
    const first = Date.now() - 5_000;
    await Promise.all(clients.map((c) => c.multi().zadd("semaphore:refreshed", first, "permit-1").pexpire("semaphore:refreshed", 10_000).exec()));
    await live("semaphore:refreshed", (l) => l.state === "held" && l.holders[0]?.since === first);
    // The library's refresh: the permit's score is the time of the refresh, and the key's TTL starts again.
    const refreshed = Date.now();
    await Promise.all(clients.map((c) => c.multi().zadd("semaphore:refreshed", refreshed, "permit-1").pexpire("semaphore:refreshed", 10_000).exec()));
    const shown = await live("semaphore:refreshed", (l) => l.holders[0]?.since === refreshed);
    expect(Math.abs((shown.holders[0]?.expiresAt ?? 0) - (refreshed + 10_000))).toBeLessThan(1_000);
    await Promise.all(clients.map((c) => c.del("semaphore:refreshed")));
  });

  it("takes a pattern change at once, audited, and lets go of what no pattern covers any more", async () => {
    await clients[0]!.set("jobs/nightly-lock", "job-token", "PX", 60_000);
    expect(await detail("jobs/nightly-lock")).toBeNull();
    const before = (await call(patterns.GET, "GET", "/api/patterns", { token: VIEWER_TOKEN })).body as { patterns: Array<{ glob: string }> };
    const added = [...before.patterns, { glob: "jobs/*", scope: "single" as const }];
    const put = await call(patterns.PUT, "PUT", "/api/patterns", { token: OPERATOR_TOKEN, body: { patterns: added, reason: "our job runner's locks" } });
    expect(put.status).toBe(200);
    await live("jobs/nightly-lock", (l) => l.state === "held" && l.scope === "single");
    // Written after the change: the new keyspace channel is subscribed.
    await clients[0]!.set("jobs/weekly-lock", "w", "PX", 60_000);
    await live("jobs/weekly-lock", (l) => l.state === "held");

    const entries = await until("the change in the audit log", async () => {
      const res = await call(audit.GET, "GET", "/api/audit", { token: VIEWER_TOKEN });
      const found = (res.body as { entries: Array<{ action: string; reason: string; resource: string }> }).entries.filter((e) => e.action === "patterns-changed");
      return found.length > 0 ? found : null;
    });
    expect(entries[0]!.reason).toContain("our job runner's locks");
    expect(entries[0]!.resource).toContain("jobs/*");

    const back = await call(patterns.PUT, "PUT", "/api/patterns", { token: OPERATOR_TOKEN, body: { patterns: before.patterns, reason: "back to the defaults" } });
    expect(back.status).toBe(200);
    await until("the lock gone with its pattern", async () => (await detail("jobs/nightly-lock"))?.state !== "held");
    const list = await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN });
    expect((list.body as { locks: Lock[] }).locks.map((l) => l.resource)).not.toContain("jobs/nightly-lock");
  });
});
