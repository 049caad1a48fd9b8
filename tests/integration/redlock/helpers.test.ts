import type Redis from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  acquireNaive,
  decodeLockValue,
  encodeLockValue,
  fenceKey,
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
} from "@/lib/redlock";
import { startCluster, type TestCluster } from "../../support/redis";
import { failFastClients } from "./support";

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
    expect(result.previousValues).toEqual([value, value, null]);
    expect(await clients[0]!.exists("lock:a")).toBe(0);
    expect(await clients[1]!.get(fenceKey("lock:a"))).toBe("6");
    await new Promise((r) => setTimeout(r, 50));
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
      expect(result.nodes[0]).toEqual({ index: 0, result: "deleted" });
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
});
