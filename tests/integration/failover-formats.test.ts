import Redis from "ioredis";
import { Semaphore } from "redis-semaphore";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LockDetail } from "@/lib/locks/types";
import { call, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { RedissonWriter } from "../support/redisson";
import { promotedPrimary, setUpConsoleOverSentinels, type SentinelSet } from "../support/sentinel";
import { until } from "../support/wait";

/**
 * A failover compares what the console saw with what the promoted replica holds, format by format: a hash
 * (Redisson) or a sorted set (redis-semaphore) is the same lock when it has the same holders, not when GET
 * answers the same (GET answers WRONGTYPE on both).
 */
describe("a Sentinel failover with locks of several libraries", () => {
  let cluster: TestCluster;
  let set: SentinelSet;

  beforeAll(async () => {
    ({ cluster, set } = await setUpConsoleOverSentinels("lockscope-sentinel-formats-"));
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(cluster);
    await set?.close();
  });

  it("reports neither a Redisson lock nor a redis-semaphore semaphore the promoted replica holds as lost, and a lock it lacks as lost", async () => {
    const one = await import("@/app/api/locks/[resource]/route");
    const ready = await import("@/app/api/ready/route");
    const metrics = await import("@/app/metrics/route");
    const detail = async (resource: string) =>
      (await call(one.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } })).body as LockDetail;
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200);

    const primary = new Redis(set.primary.port, "127.0.0.1", { maxRetriesPerRequest: 0, retryStrategy: () => null });
    primary.on("error", () => undefined);
    const redisson = new RedissonWriter(primary);
    expect(await redisson.lock("lock:rlock", 7, 60_000)).toBeNull();
    const semaphore = new Semaphore(primary, "uploads", 3, { lockTimeout: 60_000, acquireTimeout: 1_000, refreshInterval: 0 });
    await semaphore.acquire();
    await primary.set("lock:plain", "holder-a", "PX", 60_000);
    // Copied to both replicas before anything goes wrong.
    expect(await primary.wait(2, 5_000)).toBe(2);
    await until("the console saw the three held", async () => {
      const [rlock, sem, plain] = await Promise.all([detail("lock:rlock"), detail("semaphore:uploads"), detail("lock:plain")]);
      return rlock.state === "held" && rlock.format === "redisson" && sem.state === "held" && sem.format === "redis-semaphore" && plain.state === "held";
    });

    // Cut the replicas off: this one is on the primary alone.
    for (const r of set.replicas) r.pause();
    await primary.client("KILL", "TYPE", "replica");
    await primary.set("lock:lost", "holder-b", "PX", 60_000);
    await until("the console saw the lock only the primary has", async () => (await detail("lock:lost")).state === "held");
    primary.disconnect();
    await set.primary.kill();
    for (const r of set.replicas) r.resume();

    await until("the lost lock on its timeline", async () => (await detail("lock:lost")).timeline?.some((t) => t.type === "lost-in-failover"), 45_000);
    for (const resource of ["lock:rlock", "semaphore:uploads", "lock:plain"]) {
      const timeline = (await detail(resource)).timeline.map((t) => t.type);
      expect(timeline, resource).not.toContain("lost-in-failover");
      expect(timeline, resource).toContain("failover");
    }
    const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
    expect(text).toMatch(/^lockscope_locks_lost_in_failover_total\{deployment="default"\} 1$/m);
    expect(text).toMatch(/^lockscope_failovers_total\{deployment="default"\} 1$/m);

    // The promoted replica does hold both, unchanged.
    const { client: promoted } = await promotedPrimary(set);
    try {
      expect(await promoted.hgetall("lock:rlock")).toEqual({ [redisson.holder(7)]: "1" });
      expect(await promoted.zrange("semaphore:uploads", 0, -1)).toEqual([semaphore.identifier]);
    } finally {
      promoted.disconnect();
    }
  });
});
