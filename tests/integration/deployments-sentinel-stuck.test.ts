import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, listedLocks, OPERATOR_TOKEN, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { promotedPrimary, setUpConsoleOverSentinels, type SentinelSet } from "../support/sentinel";
import { until } from "../support/wait";

/**
 * One sentinel of three stops answering for good (a frozen process, a host that still accepts connections but
 * answers nothing) and then the primary dies: the other two fail over, and the console must follow them rather
 * than wait on the stuck one for ever.
 */
describe("a Sentinel deployment with one sentinel stuck through a failover", () => {
  let cluster: TestCluster;
  let set: SentinelSet;

  beforeAll(async () => {
    ({ cluster, set } = await setUpConsoleOverSentinels("lockscope-sentinel-stuck-"));
  }, 90_000);
  afterAll(async () => {
    set?.resumeSentinel(0);
    await tearDownConsole(cluster);
    await set?.close();
  });

  it("follows the promoted primary: ready again, a lock taken there listed, and force-released there", async () => {
    const ready = await import("@/app/api/ready/route");
    const release = await import("@/app/api/locks/[resource]/release/route");
    const listed = listedLocks;
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000);
    const primary = new Redis(set.primary.port, "127.0.0.1", { maxRetriesPerRequest: 0, retryStrategy: () => null });
    primary.on("error", () => undefined);
    await primary.set("lock:stuck/copied", "holder-copied", "PX", 120_000);
    expect(await primary.wait(2, 5_000)).toBe(2);
    await until("the lock listed", async () => (await listed()).some((l) => l.resource === "lock:stuck/copied" && l.state === "held"));
    primary.disconnect();

    // The first sentinel the console asks stops answering and stays so; then the primary dies.
    set.pauseSentinel(0);
    await set.primary.kill();
    const promoted = await promotedPrimary(set);
    await promoted.client.set("lock:stuck/after", "holder-after", "PX", 120_000);

    await until("a lock taken on the promoted primary listed", async () => (await listed()).some((l) => l.resource === "lock:stuck/after" && l.state === "held" && l.token === "holder-after"), 45_000);
    expect((await call(ready.GET, "GET", "/api/ready")).status).toBe(200);
    expect((await listed()).find((l) => l.resource === "lock:stuck/copied")).toMatchObject({ state: "held", token: "holder-copied" });
    // Each of the console's connections passes over the stuck sentinel on its own: until the one that releases
    // has, the release is refused with nothing touched (503), and asked again.
    const res = await until("the release reaches the promoted primary", async () => {
      const answer = await call(release.POST, "POST", "/api/locks/lock%3Astuck%2Fafter/release", { body: { reason: "sentinel stuck", token: "holder-after" }, params: { resource: "lock:stuck/after" } });
      return answer.status === 503 ? null : answer;
    }, 30_000);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await promoted.client.get("lock:stuck/after")).toBeNull();
    expect(await promoted.client.get("lock:stuck/copied")).toBe("holder-copied");
    promoted.client.disconnect();
  }, 180_000);

  it("answers a lock pattern change while no sentinel answers, judging no node", async () => {
    const patterns = await import("@/app/api/patterns/route");
    (await import("@/server/patterns")).setPatternsAuditor({ recordIntent: () => Promise.resolve(), recordOutcome: () => Promise.resolve() });
    const before = (await call(patterns.GET, "GET", "/api/patterns", { token: OPERATOR_TOKEN })).body as { patterns: Array<{ glob: string }> };
    // The watcher's connections to the primary stay; every sentinel stops answering (one already has).
    set.pauseSentinel(1);
    set.pauseSentinel(2);
    try {
      const changed = await call(patterns.PUT, "PUT", "/api/patterns", { body: { patterns: [...before.patterns, { glob: "orders:*" }], reason: "watch the order locks" } });
      expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    } finally {
      set.resumeSentinel(1);
      set.resumeSentinel(2);
    }
  }, 120_000);
});
