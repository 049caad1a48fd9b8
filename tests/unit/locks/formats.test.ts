import { describe, expect, it } from "vitest";
import { encodeLockValue } from "@lockscope/redlock";
import { decodeReading, discoverFormat, FORMATS, inferScope, keep, keepReading, keptReading, notifyFlagsFor, READ_PLAN, recogniseFormat, type KeyReading, type RawReading } from "@/lib/locks/formats";
import { keyExpiry, parseKeyReplies } from "@/lib/locks/formats/read";
import { DEFAULT_LOCK_PATTERNS, NEVER_LOCKS } from "@/lib/locks/formats/defaults";
import { fairLockNames, redissonPrefixName } from "@/lib/locks/formats/redisson";
import { decodeShedLockValue } from "@/lib/locks/formats/shedlock";
import { valueExpiry } from "@/lib/locks/formats/token";
import { lockKeyMatcher } from "@/lib/locks/glob";

const AT = 1_780_000_000_000;
const UUID = "8743c9c0-0795-4907-87fd-6c719a6b4586";
const UUID2 = "0b5f5f2e-3c1a-4e7e-9a55-1d2b3c4d5e6f";

const str = (value: string, pttlMs = 10_000): RawReading => ({ type: "string", pttlMs, size: Buffer.byteLength(value), value, extras: {} });
const hash = (fields: Array<[string, string]>, pttlMs = 30_000, extras = {}): RawReading => ({ type: "hash", pttlMs, size: fields.length, fields, extras });
const zset = (members: Array<[string, number]>, pttlMs = 10_000): RawReading => ({ type: "zset", pttlMs, size: members.length, members, extras: {} });
const at = (key: string, raw: RawReading): KeyReading => ({ key, at: AT, raw });
const decode = (key: string, raw: RawReading) => decodeReading(at(key, raw), { now: AT });

describe("recognising a layout", () => {
  it("names the format of each library's value", () => {
    const engine = encodeLockValue({ label: "billing", host: "web-1", pid: 42, fence: "7", acquiredAt: AT - 500 });
    const cases: Array<[string, RawReading, string]> = [
      ["lock:orders", str(engine), "lockscope"],
      ["lock:orders", str("0123456789abcdef0123456789abcdef"), "token"],
      ["job-lock:default:report", str(`ADDED:2026-05-29T10:00:00.123Z@worker-3:${UUID}`), "shedlock"],
      ["mutex:payments", str(UUID), "redis-semaphore"],
      ["semaphore:uploads", zset([[UUID, AT - 100]]), "redis-semaphore"],
      ["orders-lock", hash([[`${UUID}:57`, "1"]]), "redisson"],
      ["rw", hash([["mode", "read"], [`${UUID}:1`, "2"], [`${UUID2}:9`, "1"]]), "redisson-rw"],
      ["lock:leaderboard", zset([["alice", 42]]), "unknown"],
      ["lock:cart", { type: "other", redisType: "list", pttlMs: -1, extras: {} }, "unknown"],
      ["lock:profile", hash([["name", "x"]]), "unknown"],
    ];
    for (const [key, raw, format] of cases) expect([key, recogniseFormat(at(key, raw))?.name]).toEqual([key, format]);
  });

  it("reads a key that is gone as no format at all", () => {
    expect(recogniseFormat(at("lock:x", { type: "none" }))).toBeNull();
    expect(decode("lock:x", { type: "none" })).toBeNull();
  });

  it("tells Redisson's plain lock from its read-write lock by the mode field", () => {
    expect(recogniseFormat(at("a", hash([["mode", "write"], [`${UUID}:1:write`, "1"]])))?.name).toBe("redisson-rw");
    expect(recogniseFormat(at("a", hash([[`${UUID}:1:write`, "1"]])))?.name).toBe("unknown");
  });
});

describe("decoding holders", () => {
  it("decodes the engine's holder, fence and acquisition time", () => {
    const value = encodeLockValue({ label: "billing", host: "web-1", pid: 42, fence: "7", acquiredAt: AT - 500 });
    const reading = decode("lock:orders", str(value, 5_000));
    expect(reading).toMatchObject({
      format: "lockscope",
      fingerprint: value,
      holders: [{ id: value, label: "billing", host: "web-1", pid: 42, since: AT - 500 }],
      fence: "7",
      acquiredAt: AT - 500,
      expiresAt: AT + 5_000,
      warnings: [],
      waiters: null,
    });
  });

  it("flags a string lock without TTL as no-ttl", () => {
    const reading = decode("lock", str("client-7", -1));
    expect(reading?.expiresAt).toBe(Infinity);
    expect(reading?.warnings).toEqual(["no-ttl"]);
  });

  it("decodes redis-lock's expiry timestamp, in ms and in the SETNX pattern's seconds, and does not call it no-ttl", () => {
    const ms = decode("lock.invoice", str(String(AT + 4_000), 5_000));
    expect(ms?.holders[0]?.expiresAt).toBe(AT + 4_000);
    expect(ms?.expiresAt).toBe(AT + 4_000);
    const seconds = decode("lock.foo", str(String(Math.floor((AT + 60_000) / 1000)), -1));
    expect(seconds?.holders[0]?.expiresAt).toBe(Math.floor((AT + 60_000) / 1000) * 1000);
    expect(seconds?.warnings).toEqual([]);
    expect(valueExpiry("12345")).toBeNull();
    expect(valueExpiry("0123456789abcdef")).toBeNull();
  });

  it("takes a time already come in the value of a key with a TTL for when the lock was taken, not its end", () => {
    // `SET lock:job <Date.now()> NX PX 30000`: held for 30 s, not elapsed at once; the same in seconds.
    for (const value of [String(AT - 20), String(Math.floor(AT / 1000))]) {
      const reading = decode("lock:job", str(value, 30_000));
      expect(reading?.expiresAt).toBe(AT + 30_000);
      expect(reading?.holders[0]?.expiresAt).toBeUndefined();
    }
    // A holder's clock a little ahead of the console's is still "now".
    expect(decode("lock:job", str(String(AT + 300), 30_000))?.expiresAt).toBe(AT + 30_000);
    // Without a TTL the time is the end (the SETNX pattern), come or not.
    expect(decode("lock.foo", str(String(AT - 5_000), -1))?.expiresAt).toBe(AT - 5_000);
  });

  it("decodes redlock-universal's metadata value", () => {
    const reading = decode("lock:a", str(`api-2:${AT - 3_000}:0011223344556677`));
    expect(reading?.holders[0]).toMatchObject({ label: "api-2", since: AT - 3_000 });
  });

  it("decodes ShedLock's host and start time, old and new values", () => {
    expect(decodeShedLockValue(`ADDED:2026-05-29T10:00:00.123Z@worker-3:${UUID}`)).toEqual({ since: Date.parse("2026-05-29T10:00:00.123Z"), host: "worker-3" });
    expect(decodeShedLockValue("ADDED:2026-05-29T10:00:00Z@db-host.example.com")).toEqual({ since: Date.parse("2026-05-29T10:00:00Z"), host: "db-host.example.com" });
    // Java's ISO_INSTANT may print microseconds.
    expect(decodeShedLockValue("ADDED:2026-05-29T10:00:00.123456Z@h")?.since).toBe(Date.parse("2026-05-29T10:00:00.123Z"));
    expect(decodeShedLockValue("added:x@y")).toBeNull();
  });

  it("decodes a Redisson holder's client id, thread and hold count, and the fair queue's live waiters", () => {
    const plain = decode("orders-lock", hash([[`${UUID}:57`, "3"]]));
    expect(plain).toMatchObject({ format: "redisson", holders: [{ id: `${UUID}:57`, label: UUID, thread: 57, count: 3 }], waiters: null, expiresAt: AT + 30_000 });
    const fair = decode("orders-lock", hash([[`${UUID}:57`, "1"]], 30_000, { redisson: [3, 2] }));
    expect(fair?.waiters).toBe(2);
  });

  it("decodes a Redisson holder whose thread id is any Java long, without showing a neighbour of one past 2^53", () => {
    // Reactive code passes `ThreadLocalRandom.current().nextLong()` as the thread id.
    const negative = decode("reactive", hash([[`${UUID}:-7394718251934526131`, "1"]]));
    expect(negative).toMatchObject({ format: "redisson", holders: [{ id: `${UUID}:-7394718251934526131`, label: UUID, count: 1 }] });
    expect(negative?.holders[0]?.thread).toBeUndefined();
    expect(decode("reactive", hash([[`${UUID}:-42`, "2"]]))?.holders[0]).toEqual({ id: `${UUID}:-42`, label: UUID, thread: -42, count: 2 });
    expect(decode("reactive", hash([[`${UUID}:9007199254740993`, "1"]]))?.holders[0]?.thread).toBeUndefined();
    const rw = decode("reactive-rw", hash([["mode", "write"], [`${UUID}:-9223372036854775808:write`, "1"]]));
    expect(rw).toMatchObject({ format: "redisson-rw", holders: [{ id: `${UUID}:-9223372036854775808:write`, mode: "write", count: 1 }] });
  });

  it("finds the fair lock whose waiting times a key holds, for names with and without a hash tag", () => {
    for (const name of ["orders", "lock:a}b", "{orders}", "{orders}:lock", "lock:{x}"]) {
      expect(fairLockNames(redissonPrefixName("redisson_lock_timeout", name))).toContain(name);
    }
    // Without a brace of its own a name is wrapped in one, so `{orders}` may name either lock.
    expect(fairLockNames("redisson_lock_timeout:{orders}")).toEqual(["orders", "{orders}"]);
    expect(fairLockNames("redisson_lock_timeout:{a{b}}")).toEqual(["{a{b}}"]);
    expect(fairLockNames("redisson_lock_queue:{orders}")).toEqual([]);
    expect(fairLockNames("lock:orders")).toEqual([]);
  });

  it("lists the writer first and every reader of a Redisson read-write lock", () => {
    const reading = decode("doc", hash([["mode", "write"], [`${UUID}:1`, "1"], [`${UUID}:1:write`, "2"]]));
    expect(reading?.holders).toEqual([
      { id: `${UUID}:1:write`, label: UUID, thread: 1, count: 2, mode: "write" },
      { id: `${UUID}:1`, label: UUID, thread: 1, count: 1, mode: "read" },
    ]);
  });

  it("lists every live semaphore permit and drops the ones the library counts as dead", () => {
    // The key's TTL (10 s from AT) was set at the newest score (AT): the lock timeout is 10 s.
    const reading = decode("semaphore:uploads", zset([["new", AT], ["mid", AT - 4_000], ["dead", AT - 10_001]], 10_000));
    expect(reading?.holders.map((h) => h.id)).toEqual(["new", "mid"]);
    expect(reading?.holders[1]).toEqual({ id: "mid", since: AT - 4_000, expiresAt: AT + 6_000 });
    expect(reading?.warnings).toEqual(["stale-entries"]);
    expect(reading?.fingerprint).toBe("mid\nnew");
  });

  it("says when a key was larger than the read bound", () => {
    const raw: RawReading = { type: "zset", pttlMs: 10_000, size: 500, members: [["a", AT]], extras: {} };
    expect(decode("semaphore:s", raw)?.warnings).toContain("truncated");
  });

  it("lists an unrecognised key with its Redis type", () => {
    expect(decode("lock:cart", { type: "other", redisType: "list", pttlMs: -1, extras: {} })).toMatchObject({
      format: "unknown",
      redisType: "list",
      holders: [],
      warnings: ["no-ttl"],
    });
  });
});

describe("discovery's stricter test", () => {
  it("suggests strings only by a lock-like name or a known value, and any Redisson hash", () => {
    expect(discoverFormat(at("session:42", str("abc")))).toBeNull();
    expect(discoverFormat(at("orders:lock:42", str("abc")))?.name).toBe("token");
    expect(discoverFormat(at("cache:42", str(encodeLockValue({ label: null, host: null, pid: null, fence: null, acquiredAt: AT }))))?.name).toBe("lockscope");
    expect(discoverFormat(at("myLock", hash([[`${UUID}:1`, "1"]])))?.name).toBe("redisson");
    expect(discoverFormat(at("ratelimit:ip", zset([["r1", AT]])))).toBeNull();
    expect(discoverFormat(at("user:1", hash([["name", "x"]])))).toBeNull();
  });
});

describe("scope", () => {
  const base = { declared: null, previous: null, nodes: 3 } as const;
  it("follows the operator, then the format, then where the value is", () => {
    expect(inferScope({ ...base, declared: "quorum", format: "single", holding: 1 })).toBe("quorum");
    expect(inferScope({ ...base, format: "single", holding: 3 })).toBe("single");
    expect(inferScope({ ...base, format: "inferred", holding: 2 })).toBe("quorum");
    expect(inferScope({ ...base, format: "inferred", holding: 1 })).toBe("single");
    expect(inferScope({ ...base, nodes: 1, format: "inferred", holding: 1 })).toBe("single");
  });
  it("keeps a Redlock that is losing its keys a quorum lock, so it reads partial", () => {
    expect(inferScope({ ...base, format: "inferred", holding: 1, previous: "quorum" })).toBe("quorum");
  });
});

describe("the read script's reply", () => {
  it("ends a key's TTL on a whole millisecond, whatever the read's time on this console's clock", () => {
    expect(keyExpiry(AT + 0.5, 10_000)).toBe(AT + 10_001);
    expect(keyExpiry(AT + 0.25, 10_000)).toBe(AT + 10_000);
    expect(keyExpiry(AT, -1)).toBe(Infinity);
    expect(keyExpiry(AT, -2)).toBeNaN();
  });

  it("parses each type, with companion results in place", () => {
    const digest = "a9993e364706816aba3e25717850c26c9cd0d89d";
    // One flat list: each key's kind (a number for the types read in full, the name of any other), its fields, and
    // after the last key the node's clock.
    const reply = [
      0,
      // A value read whole, all ASCII, without companion results (most lock values): its kind, TTL and text.
      4, 500, "tok",
      1, 500, 3, "abc", null,
      // A value cut by the bound (or not all ASCII) comes with its digest after the text.
      1, 500, 2_000, "abc", digest,
      2, -1, 1, ["f", "1"], [2, 1],
      3, 10, 1, ["m", "1780000000000"],
      "stream", -1,
      2, 20, 1, ["g", "2"], null,
      1_780_000_000_000,
    ];
    const { raws, next } = parseKeyReplies(reply, 8, READ_PLAN, true);
    expect(raws).toEqual([
      { type: "none" },
      { type: "string", pttlMs: 500, size: 3, value: "tok", extras: {} },
      { type: "string", pttlMs: 500, size: 3, value: "abc", extras: {} },
      { type: "string", pttlMs: 500, size: 2_000, value: "abc", digest, extras: {} },
      { type: "hash", pttlMs: -1, size: 1, fields: [["f", "1"]], extras: { redisson: [2, 1] } },
      { type: "zset", pttlMs: 10, size: 1, members: [["m", 1_780_000_000_000]], extras: {} },
      { type: "other", redisType: "stream", pttlMs: -1, extras: {} },
      { type: "hash", pttlMs: 20, size: 1, fields: [["g", "2"]], extras: {} },
    ]);
    expect(reply[next]).toBe(1_780_000_000_000);
  });

  it("reads a hash without its companion result when companions are off", () => {
    const { raws, next } = parseKeyReplies([2, -1, 1, ["f", "1"], 1, 5, 1, "x", null, 7], 2, READ_PLAN, false);
    expect(raws).toEqual([
      { type: "hash", pttlMs: -1, size: 1, fields: [["f", "1"]], extras: {} },
      { type: "string", pttlMs: 5, size: 1, value: "x", extras: {} },
    ]);
    expect(next).toBe(9);
  });
});

describe("registry", () => {
  it("asks for the notification classes of hashes and sorted sets", () => {
    expect(notifyFlagsFor()).toEqual(["K", "g", "x", "e", "$", "z", "h"]);
  });
  it("has one release per format except unknown", () => {
    expect(FORMATS.filter((f) => f.release === null).map((f) => f.name)).toEqual(["unknown"]);
  });
  it("default patterns cover each library's own names and never the companions", () => {
    const isLock = lockKeyMatcher(DEFAULT_LOCK_PATTERNS);
    for (const key of ["lock:x", "locks:account:322456", "lock.invoice", "mutex:pay", "semaphore:up", "job-lock:default:report", "lock", "my_resource_name"]) {
      expect([key, isLock(key)]).toEqual([key, true]);
    }
    const never = lockKeyMatcher(NEVER_LOCKS);
    for (const key of ["lockscope:audit", "fence:lock:x", "redisson_lock_queue:{a}", `{a}:${UUID}:1:rwlock_timeout:1`]) {
      expect([key, isLock(key), never(key)]).toEqual([key, false, true]);
    }
  });
});

describe("the view the merge takes", () => {
  it("votes on fingerprints and takes the leading holders, warnings and waiters", async () => {
    const { formatView, samplesOf } = await import("@/lib/locks/formats/view");
    const a = decode("orders-lock", hash([[`${UUID}:57`, "1"]], 30_000, { redisson: [2, 2] }));
    const b = decode("orders-lock", hash([[`${UUID2}:1`, "1"]], -1));
    const readings = [a, null, b];
    expect(samplesOf(readings)).toEqual({ values: [`${UUID}:57`, null, `${UUID2}:1`], expiries: [AT + 30_000, Number.NaN, Infinity] });
    expect(formatView(readings, `${UUID}:57`)).toMatchObject({ format: "redisson", holders: [{ thread: 57 }], warnings: [], waiters: 2, contentionSource: "queue" });
    expect(formatView(readings, `${UUID2}:1`)).toMatchObject({ warnings: ["no-ttl"], waiters: null });
    expect(formatView([null, null], null)).toBeNull();
  });

  it("gives a lock's one kept reading the view its list of one gives", async () => {
    const { formatView, keptView } = await import("@/lib/locks/formats/view");
    const engine = encodeLockValue({ label: "billing", host: "web-1", pid: 42, fence: "7", acquiredAt: AT - 500 });
    const readings = [
      decode("lock:plain", str("3f1c9a")),
      decode("lock:orders", str(engine)),
      decode("orders-lock", hash([[`${UUID}:57`, "1"]], 30_000, { redisson: [2, 2] })),
      decode("orders-lock", hash([[`${UUID2}:1`, "1"]], -1)),
      decode("semaphore:uploads", zset([[UUID, AT - 100], [UUID2, AT - 50]])),
      decode("job-lock:default:report", str(`ADDED:2026-05-29T10:00:00.123Z@worker-3:${UUID}`)),
    ];
    for (const reading of readings) {
      if (reading === null) throw new Error("a reading did not decode");
      const kept = keep(reading);
      expect(keptView(kept)).toEqual(formatView([keptReading(kept)], null));
    }
  });
});

describe("what a lock keeps of its reading", () => {
  it("keeps a plain token as its value alone, and anything with more to show in full, with nothing lost either way", () => {
    const value = encodeLockValue({ label: "checkout", host: "web-1", pid: 42, fence: "7", acquiredAt: AT });
    const cases: Array<[string, RawReading, boolean]> = [
      ["lock:plain", str("3f1c9a"), true],
      ["lock:forever", str("3f1c9a", -1), false],
      ["lock:engine", str(value), false],
      ["lock:r", hash([[`${UUID}:57`, "2"]]), false],
      ["semaphore:s", zset([["a", AT], ["b", AT]]), false],
      ["lock:cart", { type: "other", redisType: "list", pttlMs: -1, extras: {} }, false],
    ];
    for (const [key, raw, plain] of cases) {
      const reading = decode(key, raw);
      if (reading === null) throw new Error(`${key} did not decode`);
      const kept = keep(reading);
      expect(typeof kept === "string", key).toBe(plain);
      if (plain) expect(kept, key).toBe(reading.fingerprint);
      expect(keptReading(kept), key).toEqual(keepReading(reading));
    }
  });
});
