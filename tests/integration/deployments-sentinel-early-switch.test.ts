import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LockDetail } from "@/lib/locks/types";
import { call, listedLosses, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { setUpConsoleOverSentinels, type SentinelSet } from "../support/sentinel";
import { until } from "../support/wait";

/**
 * A sentinel that leads a failover names the promoted replica to clients (SENTINEL GET-MASTER-ADDR-BY-NAME) from
 * the moment it starts reconfiguring the other replicas, and announces `+switch-master` only once they follow it.
 * Here that stretch is made long (the other replica has a write the promoted one lacks, so it needs a full sync,
 * which the promoted one delays): the console's connections, retrying every second or two, reach the promoted
 * replica and read it before the failover is announced.
 */
describe("a Sentinel failover whose promoted replica the console reaches before +switch-master", () => {
  let cluster: TestCluster;
  let set: SentinelSet;

  beforeAll(async () => {
    ({ cluster, set } = await setUpConsoleOverSentinels("lockscope-sentinel-early-"));
  }, 90_000);
  afterAll(async () => {
    for (let i = 0; i < 3; i++) set?.resumeSentinel(i);
    await tearDownConsole(cluster);
    await set?.close();
  });

  it("reports the lock the promoted replica never got as lost in failover, not released", async () => {
    const locks = await import("@/app/api/locks/route");
    const one = await import("@/app/api/locks/[resource]/route");
    const ready = await import("@/app/api/ready/route");
    const metrics = await import("@/app/metrics/route");
    const detail = async (resource: string) =>
      (await call(one.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } })).body as LockDetail;
    const listed = async () => ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Array<{ resource: string; state: string }> }).locks;
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200);

    const [promoted, other] = set.replicas as [(typeof set.replicas)[number], (typeof set.replicas)[number]];
    const admin = (port: number) => {
      const c = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1, retryStrategy: () => null });
      c.on("error", () => undefined);
      return c;
    };
    const sentinel = admin(set.sentinelPorts[0]!);
    const toPromote = admin(promoted.port);
    const toFollow = admin(other.port);
    const primary = admin(set.primary.port);
    try {
      // The sentinel picks `promoted` (a lower priority number wins), and `promoted` waits 5 s before a full sync.
      await toPromote.config("SET", "replica-priority", "10");
      await toPromote.config("SET", "repl-diskless-sync", "yes");
      await toPromote.config("SET", "repl-diskless-sync-delay", "5");
      const replicaFields = async () =>
        ((await sentinel.call("SENTINEL", "REPLICAS", set.master)) as string[][]).map((flat) => new Map(flat.flatMap((v, i) => (i % 2 === 0 ? [[v, flat[i + 1] as string]] : []))));
      await until("the sentinel knows the priority", async () => (await replicaFields()).some((r) => r.get("port") === String(promoted.port) && r.get("slave-priority") === "10"), 30_000, 200);

      await primary.set("lock:copied", "holder-a", "PX", 60_000);
      expect(await primary.wait(2, 5_000)).toBe(2);
      // `promoted` is frozen and cut off; `other` reconnects and copies the next lock, which `promoted` never gets.
      promoted.pause();
      await primary.client("KILL", "TYPE", "replica");
      await primary.set("lock:lost", "holder-b", "PX", 60_000);
      expect(await primary.wait(1, 5_000)).toBe(1);
      await until("the console saw both", async () => {
        const shown = await listed();
        return ["lock:copied", "lock:lost"].every((r) => shown.some((l) => l.resource === r && l.state === "held"));
      });

      // Only the first sentinel (the one the console asks) acts: it fails over by hand, alone.
      set.pauseSentinel(1);
      set.pauseSentinel(2);
      primary.disconnect();
      await set.primary.kill();
      promoted.resume();
      await until(
        "the sentinel sees the replica back",
        async () => (await replicaFields()).some((r) => r.get("port") === String(promoted.port) && !/s_down|disconnected/.test(r.get("flags") ?? "")),
        30_000,
        100,
      );
      expect(await sentinel.call("SENTINEL", "FAILOVER", set.master)).toBe("OK");

      await until(
        "the lost lock's loss on its timeline",
        async () => (await detail("lock:lost")).timeline?.some((t) => t.type === "lost-in-failover"),
        45_000,
      ).catch(async (error: unknown) => {
        const d = await detail("lock:lost");
        throw new Error(`${String(error)}; lock:lost is ${d.state}, its timeline: ${JSON.stringify(d.timeline.map((t) => [t.type, t.detail]))}`);
      });
      await until("the lost lock ended as lost", async () => (await detail("lock:lost")).state === "lost");
      expect((await detail("lock:lost")).timeline.map((t) => t.type)).not.toContain("released");
      const copied = (await detail("lock:copied")).timeline.map((t) => t.type);
      expect(copied).not.toContain("lost-in-failover");
      expect(copied.filter((t) => t === "failover")).toHaveLength(1);
      expect((await listedLosses()).map((l) => [l.resource, l.kind])).toEqual([["lock:lost", "failover"]]);
      const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
      expect(text).toMatch(/^lockscope_locks_lost_in_failover_total\{deployment="default"\} 1$/m);
      expect(text).toMatch(/^lockscope_failovers_total\{deployment="default"\} 1$/m);
    } finally {
      for (const c of [sentinel, toPromote, toFollow, primary]) c.disconnect();
    }
  }, 150_000);
});
