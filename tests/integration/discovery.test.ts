import type Redis from "ioredis";
import { Semaphore } from "redis-semaphore";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeLockValue } from "@lockscope/redlock";
import { Discovery } from "@/server/discovery";
import { README_CONSOLE_ACL } from "../support/acl";
import { startCluster, type TestCluster } from "../support/redis";
import { RedissonWriter } from "../support/redisson";
import { until } from "../support/wait";

/**
 * Discovery on a node with 1,000,000 other keys (made by DEBUG POPULATE): it finds the lock-shaped keys
 * outside the patterns, suggests globs, completes, and prints the command rate it put on the node (the
 * rate is measured and shown, not asserted: timing belongs in benchmarks).
 */
const OTHER_KEYS = 1_000_000;

function commandCalls(info: string): number {
  let total = 0;
  for (const match of info.matchAll(/^cmdstat_[^:]+:calls=(\d+)/gm)) total += Number(match[1]);
  return total;
}

describe("lock discovery", () => {
  let cluster: TestCluster;
  let redis: Redis;
  let probe: Redis;

  beforeAll(async () => {
    cluster = await startCluster(1, ["--enable-debug-command", "yes"]);
    redis = cluster.client(0);
    probe = cluster.client(0);
    await redis.call("DEBUG", "POPULATE", OTHER_KEYS, "bulk:item");
    const redisson = new RedissonWriter(redis);
    // Every lock outlives the pass (a million keys take a minute or more on a busy machine): one that expired
    // before the scan reached it would rightly go unfound.
    for (let i = 0; i < 12; i++) await redisson.lock(`billing:invoice-${i}`, 40 + i, 600_000);
    await redisson.lock("myLock", 1, 600_000);
    await redis.set("app:lock:orders", "0123456789abcdef0123456789abcdef", "PX", 600_000);
    await redis.set("app:lock:payments", "fedcba9876543210fedcba9876543210", "PX", 600_000);
    await redis.set("cache:order:9", encodeLockValue({ label: "worker", host: "h", pid: 1, fence: null, acquiredAt: Date.now() }), "PX", 600_000);
    const semaphore = new Semaphore(redis, "thumbnails", 2, { lockTimeout: 600_000, acquireTimeout: 1_000 });
    await semaphore.acquire();
    semaphore.stopRefresh();
    // Under the patterns already: shown as locks, never suggested.
    await redisson.lock("lock:already-shown", 1, 600_000);
    // Companions and caches: never suggested.
    await redis.rpush("redisson_lock_queue:{billing:invoice-0}", "x:1");
    await redis.set("session:abc", "not a lock");
    await redis.hset("user:1", "name", "Ada");
    await redis.zadd("leaderboard", 10, "ada");
  }, 120_000);
  afterAll(async () => {
    await cluster.close();
  });

  it("finds lock-shaped keys among a million others, grouped by glob, and completes", async () => {
    const total = await redis.dbsize();
    expect(total).toBeGreaterThan(OTHER_KEYS);
    let patterns = ["lock:*", "locks:*", "semaphore:*"];
    const discovery = new Discovery([{ id: "node-0", client: redis }], {
      patterns: () => patterns,
      count: 2_000,
      stepsPerSecond: 50,
    });
    expect(discovery.result()).toMatchObject({ complete: false });

    const before = commandCalls(await probe.info("commandstats"));
    const opsSamples: number[] = [];
    const sampler = setInterval(() => {
      void probe.info("stats").then((text) => {
        const ops = /instantaneous_ops_per_sec:(\d+)/.exec(text)?.[1];
        if (ops) opsSamples.push(Number(ops));
      });
    }, 500);
    const started = performance.now();
    await discovery.runPass();
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
    // The probe's own INFO calls are few (two a second) and counted out roughly by reading after.
    const calls = commandCalls(await probe.info("commandstats")) - before;

    const result = discovery.result();
    console.log(
      `discovery over ${total} keys: ${seconds.toFixed(1)} s, ${calls} commands on the node (${Math.round(calls / seconds)}/s, ` +
        `${Math.round(total / seconds)} keys/s), instantaneous_ops_per_sec sampled: max ${Math.max(0, ...opsSamples)}, ` +
        `median ${opsSamples.sort((a, b) => a - b)[Math.floor(opsSamples.length / 2)] ?? 0}`,
    );

    expect(result.complete).toBe(true);
    // SCAN may return a key twice across a pass, never miss one that stayed: at least every key was visited.
    expect(result.scannedKeys).toBeGreaterThanOrEqual(total);
    expect(result.candidates).toEqual([
      { pattern: "billing:*", format: "redisson", keys: 12, examples: ["billing:invoice-0", "billing:invoice-1", "billing:invoice-10", "billing:invoice-11", "billing:invoice-2"] },
      { pattern: "app:lock:*", format: "token", keys: 2, examples: ["app:lock:orders", "app:lock:payments"] },
      { pattern: "cache:order:*", format: "lockscope", keys: 1, examples: ["cache:order:9"] },
      { pattern: "myLock", format: "redisson", keys: 1, examples: ["myLock"] },
    ]);
    // The cost per key: one SCAN per step and, inside one script per step, one bounded read per string key
    // (TYPE and a read more only for the few keys of other types).
    expect(calls).toBeLessThan(total * 1.1);

    // A suggestion goes as soon as the patterns cover it.
    patterns = [...patterns, "billing:*"];
    expect(discovery.result().candidates.map((c) => c.pattern)).not.toContain("billing:*");
  }, 300_000);

  it("says a node's failure without the arguments Redis repeats in it (a key's name, a value)", async () => {
    // A node without scripts: Redis answers the read script with `ERR unknown command 'evalsha', with args
    // beginning with: …`, repeating the script's first keys.
    const local = await startCluster(1, ["--rename-command", "EVALSHA", "", "--rename-command", "EVAL", ""]);
    try {
      const node = local.client(0);
      await node.set("session:user-7:tok-3f9a1c77e2", "a session, not a lock");
      const discovery = new Discovery([{ id: "node-0", client: node }], { patterns: () => ["lock:*"] });
      await discovery.runPass();
      const [state] = discovery.result().nodes;
      expect(state?.error).toMatch(/^ERR unknown command 'evalsha', with args beginning with: \[redacted\]/);
      expect(state?.error).not.toContain("tok-3f9a1c77e2");
    } finally {
      await local.close();
    }
  });

  it("scans a healthy node once per pass interval while another node is down and retried", async () => {
    const local = await startCluster(2);
    try {
      const healthy = local.client(0);
      const down = local.client(1, { lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null });
      await local.kill(1);
      await healthy.set("app:lock:x", "0123456789abcdef0123456789abcdef", "PX", 600_000);
      const scans = async () => Number(/^cmdstat_scan:calls=(\d+)/m.exec(await healthy.info("commandstats"))?.[1] ?? 0);
      const before = await scans();
      const discovery = new Discovery(
        [
          { id: "node-0", client: healthy },
          { id: "node-1", client: down, ready: () => Promise.resolve(false) },
        ],
        { patterns: () => ["lock:*"], passIntervalMs: 600_000, retryMs: 50 },
      );
      discovery.start();
      // The down node is retried many times meanwhile.
      await new Promise((r) => setTimeout(r, 1_500));
      await discovery.stop();
      const result = discovery.result();
      expect(result.nodes.map((n) => [n.id, n.complete, n.error])).toEqual([
        ["node-0", true, null],
        ["node-1", false, "not connected"],
      ]);
      // One pass of a near-empty node is one SCAN (the cursor comes back 0): not one per retry of the other.
      expect((await scans()) - before).toBe(1);
      expect(result.candidates.map((c) => c.pattern)).toEqual(["app:lock:*"]);
    } finally {
      await local.close();
    }
  });
});

describe("lock discovery as the patterns change", () => {
  it("scans again at once when a pattern is taken out, and meanwhile does not say every lock-shaped key is under one", async () => {
    const local = await startCluster(1);
    try {
      const node = local.client(0);
      await new RedissonWriter(node).lock("billing:invoice-1", 1, 600_000);
      let patterns = ["lock:*", "billing:*"];
      const discovery = new Discovery([{ id: "node-0", client: node }], { patterns: () => patterns, passIntervalMs: 600_000 });
      discovery.start();
      try {
        await until("the first pass ends", () => discovery.result().complete);
        expect(discovery.result().candidates).toEqual([]);
        // The operator takes `billing:*` out: the pass that ended passed over its keys as locks.
        patterns = ["lock:*"];
        expect(discovery.result()).toMatchObject({ complete: false, nodes: [{ id: "node-0", complete: false }] });
        const found = await until("billing's lock suggested, by a pass started at once (not ten minutes later)", () => discovery.result().candidates.find((c) => c.pattern === "billing:*"));
        expect(found).toMatchObject({ format: "redisson", keys: 1, examples: ["billing:invoice-1"] });
        expect(discovery.result().complete).toBe(true);
      } finally {
        await discovery.stop();
      }
    } finally {
      await local.close();
    }
  });
});

describe("lock discovery as a least-privilege user", () => {
  it("as a least-privilege user, carries on past the keys its ACL refuses, finds those it may read, and says how many it could not", async () => {
    const local = await startCluster(1);
    try {
      const admin = local.client(0);
      // The README's user, allowed at `orders:*` besides (as the README advises, to let discovery look there).
      await admin.call("ACL", "SETUSER", "lockscope", ...`${README_CONSOLE_ACL} ~orders:* >discovery-password-0123`.split(" "));
      const redisson = new RedissonWriter(admin);
      // Readable and lock-shaped, among many keys the user may not read (several SCAN steps of them).
      await redisson.lock("orders:invoice-1", 1, 600_000);
      await redisson.lock("orders:invoice-2", 1, 600_000);
      await admin.set("app:lock:payments", "fedcba9876543210fedcba9876543210", "PX", 600_000);
      const pipeline = admin.pipeline();
      for (let i = 0; i < 300; i++) pipeline.set(`session:${i}`, "not a lock");
      await pipeline.exec();
      await admin.set("lock:shown", "x", "PX", 600_000);
      const refusedKeys = 301; // the sessions and app:lock:payments
      const node = local.client(0, { username: "lockscope", password: "discovery-password-0123" });
      const discovery = new Discovery([{ id: "node-0", client: node }], { patterns: () => ["lock:*"], count: 50, stepsPerSecond: 1_000 });
      await discovery.runPass();
      const result = discovery.result();
      expect(result.nodes).toEqual([expect.objectContaining({ id: "node-0", complete: true, error: null, refusedKeys })]);
      expect(result.complete).toBe(true);
      expect(result.candidates.map((c) => c.pattern)).toEqual(["orders:*"]);
    } finally {
      await local.close();
    }
  });
});
