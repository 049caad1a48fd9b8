import type Redis from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  acquireNaive,
  decodeLockValue,
  encodeLockValue,
  fenceKey,
  lockValueId,
  fencedSet,
  fencedWrite,
  forceRelease,
  lastFenceKey,
  NaiveLockLostError,
  parseReleaseMessage,
  parseRevokeMessage,
  RELEASE_CHANNEL,
  releaseNaive,
  REVOKE_CHANNEL,
} from "../index.ts";
import { startCluster, type TestCluster } from "./support/redis.ts";
import { until } from "./support/wait.ts";
import { failFastClients } from "./support/support.ts";

describe("force release, fenced writes and the naive lock", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  beforeAll(async () => {
    cluster = await startCluster(3);
    clients = cluster.clients();
  });
  afterAll(async () => {
    await cluster.close();
  });
  beforeEach(async () => {
    await cluster.flushAll();
  });

  it("force-releases any value, reports per node, publishes revocation and release, advances the fence", async () => {
    const value = encodeLockValue({ label: "victim", host: "h", pid: 1, fence: "5", acquiredAt: Date.now() });
    await clients[0]!.set("lock:a", value, "PX", 10_000);
    await clients[1]!.set("lock:a", value, "PX", 10_000);
    await clients[1]!.set(fenceKey("lock:a"), "5");
    const subscriber = cluster.client(0);
    const messages: Array<[string, string]> = [];
    subscriber.on("message", (channel: string, message: string) => messages.push([channel, message]));
    await subscriber.subscribe(RELEASE_CHANNEL, REVOKE_CHANNEL);

    const result = await forceRelease(clients, "lock:a");
    expect(result.nodes.map((n) => n.result)).toEqual(["deleted", "deleted", "absent"]);
    // Nobody was queued: no waiter heard a wake-up on the nodes that deleted.
    expect(result.nodes.map((n) => n.wakeHeardBy)).toEqual([0, 0, undefined]);
    expect(result.previousValues).toEqual([value, value, null]);
    expect(await clients[0]!.exists("lock:a")).toBe(0);
    expect(await clients[1]!.get(fenceKey("lock:a"))).toBe("6");
    // Each node that deleted publishes both; one node (node 0) is listened to here.
    await until("the revocation and the release were published", () => messages.length >= 2);
    expect(messages.map(([c]) => c).sort()).toEqual([RELEASE_CHANNEL, REVOKE_CHANNEL]);
    const revoke = messages.find(([c]) => c === REVOKE_CHANNEL)!;
    expect(parseRevokeMessage(revoke[1])).toEqual({ resource: "lock:a", value });
    expect(parseReleaseMessage(messages.find(([c]) => c === RELEASE_CHANNEL)![1])).toEqual({ resource: "lock:a", nextWaiterId: null });
  });

  it("with a token, deletes only that value", async () => {
    await clients[0]!.set("lock:b", "theirs");
    await clients[1]!.set("lock:b", "ours");
    const result = await forceRelease(clients, "lock:b", { token: "ours" });
    expect(result.nodes.map((n) => n.result)).toEqual(["mismatch", "deleted", "absent"]);
    expect(await clients[0]!.get("lock:b")).toBe("theirs");
  });

  it("reports a dead node as an error without failing the others", async () => {
    const local = await startCluster(2);
    try {
      const pair = await failFastClients(local);
      await pair[0]!.set("lock:c", "v");
      await local.kill(1);
      const result = await forceRelease(pair, "lock:c", { nodeTimeoutMs: 300 });
      expect(result.nodes[0]).toEqual({ index: 0, result: "deleted", wakeHeardBy: 0, waiterQueued: false, holderHeardBy: 0 });
      expect(result.nodes[1]!.result).toBe("error");
      expect(result.nodes[1]!.error).toBeTruthy();
    } finally {
      await local.close();
    }
  });

  it("rejects a write with a fence older than one that already wrote", async () => {
    const c = clients[0]!;
    await c.set("stock", "10");
    expect(await fencedWrite(c, "stock", "7", { type: "incrby", by: -1, min: 0 })).toMatchObject({ applied: true, value: "9", lastFence: "7" });
    expect(await fencedWrite(c, "stock", "9", { type: "incrby", by: -1, min: 0 })).toMatchObject({ applied: true, value: "8", lastFence: "9" });
    expect(await fencedWrite(c, "stock", "8", { type: "incrby", by: -1, min: 0 })).toEqual({ applied: false, reason: "stale-fence", lastFence: "9", value: "8" });
    expect(await fencedWrite(c, "stock", "9", { type: "incrby", by: -9, min: 0 })).toMatchObject({ applied: false, reason: "below-min", value: "8" });
    expect(await fencedSet(c, "stock", "100", "10")).toBe(true);
    expect(await fencedSet(c, "stock", "1", "9")).toBe(false);
    expect(await c.get("stock")).toBe("100");
    expect(await c.get(lastFenceKey("stock"))).toBe("10");
    // Fences compare as decimals of any length, not as floating point numbers.
    expect(await fencedSet(c, "big", "a", "90071992547409930")).toBe(true);
    expect(await fencedSet(c, "big", "b", "90071992547409929")).toBe(false);
    expect(await fencedSet(c, "big", "c", "100000000000000000")).toBe(true);
  });

  it("naive lock: SETNX + EXPIRE, repairs a missing TTL, WATCH/MULTI release raises when lost", async () => {
    const c = clients[0]!;
    const token = await acquireNaive(c, "lock:naive", 5000, { label: "lab" });
    expect(decodeLockValue(token)?.label).toBe("lab");
    expect(await c.pttl("lock:naive")).toBeGreaterThan(4000);
    await releaseNaive(c, "lock:naive", token);
    expect(await c.exists("lock:naive")).toBe(0);

    // A holder that crashed between SETNX and EXPIRE: a waiter gives the key a TTL, then gets the lock.
    await c.set("lock:naive", "crashed");
    const second = await acquireNaive(c, "lock:naive", 100, { retryDelayMs: 20, timeoutMs: 2000 });
    expect(second).not.toBe("crashed");

    // Lost: the value changed behind the holder.
    await c.set("lock:naive", "someone else");
    await expect(releaseNaive(c, "lock:naive", second)).rejects.toBeInstanceOf(NaiveLockLostError);
  });

  it("naive lock refuses bad arguments with a TypeError naming them", async () => {
    await expect(acquireNaive(clients[0]!, "lock:x", -5)).rejects.toThrow("Expected `ttlMs` to be a positive integer, got `-5` (number)");
    await expect(acquireNaive(clients[0]!, "", 10)).rejects.toThrow(TypeError);
  });

  it("force release leaves a key that is not a string untouched, with its own result", async () => {
    await clients[0]!.hset("lock:hash", "holder", "1");
    await clients[1]!.sadd("lock:hash", "member");
    const result = await forceRelease(clients, "lock:hash");
    expect(result.nodes).toEqual([
      { index: 0, result: "not-string", detail: "hash" },
      { index: 1, result: "not-string", detail: "set" },
      { index: 2, result: "absent" },
    ]);
    expect(await clients[0]!.hget("lock:hash", "holder")).toBe("1");
    expect(await clients[1]!.sismember("lock:hash", "member")).toBe(1);
  });

  it("every script checks the keys it writes before it writes: a queue key of another type leaves everything as it was", async () => {
    const value = encodeLockValue({ label: "holder", host: "h", pid: 1, fence: "3", acquiredAt: Date.now() });
    const node = clients[0]!;
    const resource = "lock:typed";
    await node.set(resource, value, "PX", 10_000);
    await node.set(fenceKey(resource), "3");
    await node.set(`waitq:${resource}`, "not a sorted set");

    // Force release: nothing deleted, the reason named, no raw script error.
    const forced = await forceRelease([node], resource);
    expect(forced.nodes).toEqual([{ index: 0, result: "wrong-type", detail: `waitq:${resource} holds a string` }]);
    expect(await node.get(resource)).toBe(value);
    expect(await node.get(fenceKey(resource))).toBe("3");

    // The engine's own release, acquire (a refused waiter joins the queue), leave-queue and extend.
    const { RELEASE_LUA } = await import("../release.lua.ts");
    const { ACQUIRE_LUA } = await import("../acquire.lua.ts");
    const { LEAVE_QUEUE_LUA } = await import("../leave-queue.lua.ts");
    await expect(node.eval(RELEASE_LUA, 1, resource, value)).rejects.toThrow(/^WRONGTYPE lockscope: waitq:lock:typed holds a string, not a zset; nothing was written/);
    expect(await node.get(resource)).toBe(value);
    const waiter = encodeLockValue({ label: "waiter", host: "h", pid: 2, fence: null, acquiredAt: Date.now() });
    await expect(node.eval(ACQUIRE_LUA, 1, resource, waiter, 5000, "tqg:5000:500", 1)).rejects.toThrow(/^WRONGTYPE lockscope/);
    await expect(node.eval(LEAVE_QUEUE_LUA, 1, resource, lockValueId(value)!, value)).rejects.toThrow(/^WRONGTYPE lockscope/);
    expect(await node.get(resource)).toBe(value);
    await node.del(`waitq:${resource}`);
    await node.hset(`waitqd:${resource}`, "x", "1");
    await expect(node.eval(ACQUIRE_LUA, 1, resource, waiter, 5000, "tqg:5000:500", 1)).rejects.toThrow(/^WRONGTYPE lockscope: waitqd:/);
    expect(await node.exists(`waitq:${resource}`)).toBe(0);

    // Commit-fence with a damaged fence key: refused, nothing written.
    const { COMMIT_FENCE_LUA } = await import("../commit-fence.lua.ts");
    await node.set(fenceKey(resource), "three");
    expect(await node.eval(COMMIT_FENCE_LUA, 1, resource, value, value, "4")).toEqual([-1, 1]);
    expect(await node.get(fenceKey(resource))).toBe("three");
    // fencedWrite with a damaged last-fence key: refused, the data left alone.
    await node.set("stock:typed", "5");
    await node.set(lastFenceKey("stock:typed"), "five");
    await expect(fencedWrite(node, "stock:typed", "6", { type: "set", value: "4" })).rejects.toThrow(/^WRONGTYPE lockscope/);
    expect(await node.get("stock:typed")).toBe("5");
  });

  it("fencedWrite's incrby counts exactly on large counters, as INCRBY does, and refuses a value INCRBY would refuse", async () => {
    const node = clients[0]!;
    // A counter of bytes or micro-units passes 10^14 soon: its value stays a plain integer.
    await node.set("bytes", "123456789012345");
    expect(await fencedWrite(node, "bytes", "3", { type: "incrby", by: 1 })).toEqual({ applied: true, reason: null, lastFence: "3", value: "123456789012346" });
    expect(await node.get("bytes")).toBe("123456789012346");
    expect(await node.incrby("bytes", 1)).toBe(123456789012347);
    expect(await fencedWrite(node, "bytes", "3", { type: "incrby", by: -1, min: 200_000_000_000_000 })).toEqual({ applied: false, reason: "below-min", lastFence: "3", value: "123456789012347" });
    expect(await fencedWrite(node, "bytes", "2", { type: "incrby", by: 1 })).toEqual({ applied: false, reason: "stale-fence", lastFence: "3", value: "123456789012347" });
    // What INCRBY refuses (not an integer, or past 64 bits) is refused, and nothing is written.
    await node.set("ratio", "1.5");
    await expect(fencedWrite(node, "ratio", "4", { type: "incrby", by: -1 })).rejects.toThrow(/not an integer/);
    expect(await node.get("ratio")).toBe("1.5");
    expect(await node.exists(lastFenceKey("ratio"))).toBe(0);
    await node.set("huge", "9223372036854775807");
    await expect(fencedWrite(node, "huge", "4", { type: "incrby", by: 1 })).rejects.toThrow(/not an integer or out of range|overflow/);
    expect(await node.get("huge")).toBe("9223372036854775807");
    expect(await node.exists(lastFenceKey("huge"))).toBe(0);
  });

  it("fencedWrite's incrby on a value that is no integer writes nothing, not even the last fence", async () => {
    const node = clients[0]!;
    await node.set("stock:text", "ten");
    await expect(fencedWrite(node, "stock:text", "8", { type: "incrby", by: -1 })).rejects.toThrow(/not an integer/);
    expect(await node.exists(lastFenceKey("stock:text"))).toBe(0);
  });
});
