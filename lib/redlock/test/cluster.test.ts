import Redis, { type Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  companionKey,
  CrossSlotError,
  decodeLockValue,
  FENCE_KEY_PREFIX,
  fencedWrite,
  forceRelease,
  keySlot,
  LAST_FENCE_KEY_PREFIX,
  LockRevokedError,
  Redlock,
  ResourceHeldError,
  WAIT_QUEUE_KEY_PREFIX,
} from "../index.ts";
import { ACQUIRE_LUA } from "../acquire.lua.ts";
import { COMMIT_FENCE_LUA } from "../commit-fence.lua.ts";
import { EXTEND_LUA } from "../extend.lua.ts";
import { FORCE_RELEASE_LUA } from "../force-release.lua.ts";
import { LEAVE_QUEUE_LUA } from "../leave-queue.lua.ts";
import { RELEASE_LUA } from "../release.lua.ts";
import { defineScript, isNoScript, runScript } from "../script.ts";
import { startRedisCluster, type RedisClusterSet } from "./support/redis-cluster.ts";
import { until } from "./support/wait.ts";

describe("the scripts' cluster form", () => {
  const sources = { ACQUIRE_LUA, COMMIT_FENCE_LUA, EXTEND_LUA, FORCE_RELEASE_LUA, LEAVE_QUEUE_LUA, RELEASE_LUA };
  it.each(Object.entries(sources))("%s: every companion key in the resource's slot; the plain form untouched", (_name, source) => {
    const script = defineScript(source);
    expect(script.source).toBe(source);
    // No companion key left that a resource's name is simply appended to, and no read of the per-node marker.
    expect(script.cluster.source).not.toMatch(/"(fence|waitq|waitqd|waitqg):" \.\. [A-Za-z_]/);
    expect(script.cluster.source).not.toContain('"lockscope:fence-epoch"');
  });
});

describe("Redlock with a Redis Cluster client as its one node (three primaries, a replica each)", () => {
  let set: RedisClusterSet;
  let client: Cluster;
  const engines: Redlock[] = [];
  const engine = (settings?: ConstructorParameters<typeof Redlock>[1]) => {
    const redlock = new Redlock([client], settings);
    engines.push(redlock);
    return redlock;
  };
  /** Where a key actually is: the cluster's own answer (CLUSTER KEYSLOT), not the engine's. */
  const slotOnServer = async (key: string) => Number(await client.call("CLUSTER", "KEYSLOT", key));

  beforeAll(async () => {
    set = await startRedisCluster();
    client = set.client();
  }, 60_000);
  afterAll(async () => {
    await Promise.all(engines.map((e) => e.quit()));
    await set?.close();
  });

  it("locks, refuses a second holder, extends and releases; a quorum of one", async () => {
    const redlock = engine({ label: "orders worker", retryCount: 0 });
    expect(redlock.quorum).toBe(1);
    const lock = await redlock.acquire(["lock:orders/42"], 5_000);
    expect(decodeLockValue((await client.get("lock:orders/42")) ?? "")?.label).toBe("orders worker");
    const refused = await redlock.acquire(["lock:orders/42"], 5_000).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ResourceHeldError);
    expect((refused as ResourceHeldError).heldBy[0]?.holder?.label).toBe("orders worker");
    const extended = await lock.extend(10_000);
    expect(await client.pttl("lock:orders/42")).toBeGreaterThan(5_000);
    expect((await extended.release()).released).toBe(true);
    expect(await client.exists("lock:orders/42")).toBe(0);
  });

  it("keeps every key of a resource in the resource's slot: fences and the waiter queue", async () => {
    const redlock = engine({ fenced: true });
    const resources = ["lock:fenced/1", "lock:{tenant-7}/fenced"];
    for (const resource of resources) {
      const first = await redlock.acquire([resource], 5_000);
      await first.release();
      const second = await redlock.acquire([resource], 5_000);
      expect(BigInt(second.fence!)).toBeGreaterThan(BigInt(first.fence!));
      const fence = companionKey(FENCE_KEY_PREFIX, resource, "cluster");
      expect(await client.get(fence)).toBe(second.fence);
      expect(await slotOnServer(fence)).toBe(await slotOnServer(resource));
      await second.release();
    }
    // A resource with its own hash tag keeps it: the companion key is the plain prefix and the resource.
    expect(companionKey(FENCE_KEY_PREFIX, "lock:{tenant-7}/fenced", "cluster")).toBe("fence:lock:{tenant-7}/fenced");
    expect(companionKey(FENCE_KEY_PREFIX, "lock:fenced/1", "cluster")).toBe("fence:{lock:fenced/1}");

    // A waiter queues in the resource's slot and is handed the lock when the holder releases.
    const holder = await engine().acquire(["lock:queued"], 10_000);
    const waiting = engine({ retryCount: -1, retryDelayMs: 20_000, retryJitterMs: 0 }).acquire(["lock:queued"], 5_000);
    const queue = companionKey(WAIT_QUEUE_KEY_PREFIX, "lock:queued", "cluster");
    await until("the waiter is queued", async () => (await client.zcard(queue)) === 1);
    expect(await slotOnServer(queue)).toBe(keySlot("lock:queued"));
    await holder.release();
    const handed = await waiting;
    expect(await client.get("lock:queued")).toBe(handed.value);
    await handed.release();
  });

  it("locks several resources in one slot, and refuses resources in different slots naming them", async () => {
    const redlock = engine({ retryCount: 0 });
    const lock = await redlock.acquire(["{orders}:a", "{orders}:b"], 5_000);
    expect(await client.mget("{orders}:a", "{orders}:b")).toEqual([lock.value, lock.value]);
    await lock.release();

    const error = await redlock.acquire(["lock:a", "lock:b"], 5_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CrossSlotError);
    expect((error as CrossSlotError).resources).toEqual(["lock:a", "lock:b"]);
    expect((error as Error).message).toContain(`"lock:a" (slot ${keySlot("lock:a")})`);
    expect((error as Error).message).toContain(`"lock:b" (slot ${keySlot("lock:b")})`);
    expect([await client.exists("lock:a"), await client.exists("lock:b")]).toEqual([0, 0]);
    await expect(redlock.acquire(["lock:a}b"], 5_000)).rejects.toThrow(/has a `}` outside a hash tag/);
  });

  it("fenced writes on the cluster keep the last fence in the data key's slot and reject a stale fence", async () => {
    const redlock = engine({ fenced: true });
    const first = await redlock.acquire(["lock:stock"], 5_000);
    await first.release();
    const second = await redlock.acquire(["lock:stock"], 5_000);
    expect((await fencedWrite(client, "stock:7", second.fence!, { type: "set", value: "10" })).applied).toBe(true);
    const stale = await fencedWrite(client, "stock:7", first.fence!, { type: "set", value: "99" });
    expect(stale).toMatchObject({ applied: false, reason: "stale-fence", lastFence: second.fence });
    expect(await client.get("stock:7")).toBe("10");
    const lastFence = companionKey(LAST_FENCE_KEY_PREFIX, "stock:7", "cluster");
    expect(await client.get(lastFence)).toBe(second.fence);
    expect(await slotOnServer(lastFence)).toBe(keySlot("stock:7"));
    await second.release();
  });

  it("force release on the cluster deletes the lock, advances its fence and revokes the holder's using()", async () => {
    const redlock = engine({ fenced: true });
    let signal: AbortSignal | null = null;
    const routine = redlock.using(["lock:revoked"], 5_000, async (s) => {
      signal = s;
      await new Promise((resolve) => s.addEventListener("abort", resolve));
      throw s.reason;
    });
    await until("the routine runs", () => signal !== null);
    const value = (await client.get("lock:revoked"))!;
    const fence = decodeLockValue(value)!.fence!;
    const result = await forceRelease([client], "lock:revoked", { token: value });
    expect(result.nodes[0]?.result).toBe("deleted");
    await expect(routine).rejects.toBeInstanceOf(LockRevokedError);
    expect(await client.exists("lock:revoked")).toBe(0);
    expect(BigInt((await client.get(companionKey(FENCE_KEY_PREFIX, "lock:revoked", "cluster")))!)).toBeGreaterThan(BigInt(fence));
  });
});

/**
 * ioredis's cluster client tries a command again after a redirection, CLUSTERDOWN or a dropped connection, and once it
 * has tried `maxRedirections` times it rejects with its own error, the last reply in its text: a primary that restarted
 * empty while a command was being tried again answers the last try with NOSCRIPT, and the client says
 * `Too many Cluster redirections. Last error: ReplyError: NOSCRIPT …`. The node lacks the script all the same.
 */
describe("NOSCRIPT as a Redis Cluster client reports it after its tries", () => {
  let set: RedisClusterSet;
  /** A cluster client out of tries at its first error: every reply error comes wrapped, as after the last try. */
  let client: Cluster;
  const script = defineScript("return redis.call('GET', KEYS[1])");
  const failing = defineScript("return redis.error_reply('ERR refused by the script')");

  beforeAll(async () => {
    set = await startRedisCluster();
    client = new Redis.Cluster(set.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })), { maxRedirections: 0, redisOptions: { maxRetriesPerRequest: 1 } });
    client.on("error", () => undefined);
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await set?.close();
  });

  it("falls back to EVAL when the wrapped reply is NOSCRIPT, for a script and for the engine's rounds", async () => {
    await client.set("lock:wrapped", "held-by-someone");
    const wrapped = await client.evalsha(script.cluster.sha, 1, "lock:wrapped").catch((e: unknown) => e);
    expect(String((wrapped as Error).message)).toMatch(/^Too many Cluster redirections\. Last error: ReplyError: NOSCRIPT /);
    expect(isNoScript(wrapped)).toBe(true);
    expect(await runScript(client, script, ["lock:wrapped"])).toBe("held-by-someone");

    // The engine's round on a node whose script cache is empty (a primary that restarted empty).
    await Promise.all(set.nodes.map((n) => set.direct(n.port).script("FLUSH")));
    const redlock = new Redlock([client], { retryCount: 0 });
    try {
      const lock = await redlock.acquire(["lock:wrapped-engine"], 5_000);
      expect(await client.get("lock:wrapped-engine")).toBe(lock.value);
      expect((await lock.release()).released).toBe(true);
    } finally {
      await redlock.quit();
    }
  });

  it("does not take any other error the client wraps for NOSCRIPT", async () => {
    // Loaded on every node: the wrapped reply is the script's own error, which stands (no EVAL sent after it).
    for (const n of set.nodes) {
      await set.direct(n.port).script("LOAD", failing.cluster.source);
      await set.direct(n.port).config("RESETSTAT");
    }
    const wrapped = await client.evalsha(failing.cluster.sha, 1, "lock:wrapped-other").catch((e: unknown) => e);
    expect(String((wrapped as Error).message)).toBe("Too many Cluster redirections. Last error: ReplyError: ERR refused by the script");
    expect(isNoScript(wrapped)).toBe(false);
    await expect(runScript(client, failing, ["lock:wrapped-other"])).rejects.toThrow(/^Too many Cluster redirections\. Last error: ReplyError: ERR refused/);
    for (const n of set.nodes) expect(await set.direct(n.port).info("commandstats")).not.toContain("cmdstat_eval:");
    for (const message of [
      "Too many Cluster redirections. Last error: ReplyError: CLUSTERDOWN The cluster is down",
      "Too many Cluster redirections. Last error: Error: Connection is closed.",
      "ERR Error running script: NOSCRIPT is not a command",
      "Too many Cluster redirections. Last error: ReplyError: ERR user_script:1: NOSCRIPT No matching script",
    ]) {
      expect(isNoScript(new Error(message)), message).toBe(false);
    }
  });
});
