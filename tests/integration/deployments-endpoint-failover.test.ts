import { mkdtempSync } from "node:fs";
import net from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LockDetail } from "@/lib/locks/types";
import { RedisNode } from "@/lib/redis-node";
import { call, listedLosses, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A stand-in for an endpoint that follows the primary (a managed service's primary endpoint, a virtual IP): a TCP
 * proxy whose target the test moves to the promoted replica, dropping the connections it carried.
 */
async function startEndpoint(port: number): Promise<{ port: number; moveTo(port: number): void; close(): Promise<void> }> {
  let target = port;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => undefined);
      s.on("close", () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    moveTo(next) {
      target = next;
      for (const s of sockets) s.destroy();
    },
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

describe("a standalone deployment whose endpoint moves to a promoted replica", () => {
  let cluster: TestCluster;
  let replica: RedisNode;
  let replicaStartedAt = 0;
  let endpoint: Awaited<ReturnType<typeof startEndpoint>>;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    replicaStartedAt = Date.now();
    replica = await RedisNode.start({ dir: mkdtempSync(path.join(os.tmpdir(), "lockscope-endpoint-")), extraArgs: ["--replicaof", "127.0.0.1", String(cluster.ports[0])] });
    endpoint = await startEndpoint(cluster.ports[0]!);
    // A standalone instance (REDIS_URL), reached through the endpoint.
    delete process.env.REDIS_URLS;
    process.env.REDIS_URL = `redis://127.0.0.1:${endpoint.port}`;
  }, 60_000);
  afterAll(async () => {
    delete process.env.REDIS_URL;
    await tearDownConsole(cluster);
    await endpoint?.close();
    await replica?.stop();
  });

  it("reports the lock the promoted replica never got as lost in failover, not released, and the one it has as held across it", async () => {
    const locks = await import("@/app/api/locks/route");
    const one = await import("@/app/api/locks/[resource]/route");
    const ready = await import("@/app/api/ready/route");
    const detail = async (resource: string) =>
      (await call(one.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } })).body as LockDetail;
    const listed = async () => ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Array<{ resource: string; state: string }> }).locks;
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200);

    const primary = new Redis(cluster.ports[0]!, "127.0.0.1", { maxRetriesPerRequest: 0, retryStrategy: () => null });
    primary.on("error", () => undefined);
    const promoted = new Redis(replica.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    try {
      // The replica's first sync starts up to 5 s after it connects (Redis' diskless sync delay): it is in sync
      // before the copied lock is written, so that the write reaches it.
      await until("the replica in sync", async () => /master_link_status:up/.test(await promoted.info("replication")), 30_000);
      await primary.set("lock:copied", "holder-a", "PX", 60_000);
      expect(await primary.wait(1, 5_000)).toBe(1);
      // The console reads the node's run id and uptime at each connect and every 30 s: a server that started after
      // its last reading (whole seconds, a second of slack) is taken for a restart, not another server. A replica
      // in service is older than that reading; this one started a moment ago, so the reading is taken now, as
      // the next periodic one would be.
      await sleep(Math.max(0, replicaStartedAt + 2_500 - Date.now()));
      const { getDeploymentLives } = await import("@/server/live");
      await getDeploymentLives()[0]!.watchers[0]!.readRunFacts();
      // The replica is frozen and cut off: this one is on the primary alone.
      replica.pause();
      await primary.client("KILL", "TYPE", "replica");
      await primary.set("lock:lost", "holder-b", "PX", 60_000);
      await until("the console saw both", async () => {
        const shown = await listed();
        return ["lock:copied", "lock:lost"].every((r) => shown.some((l) => l.resource === r && l.state === "held"));
      });
      primary.disconnect();
      await cluster.kill(0);
      replica.resume();
      await promoted.replicaof("NO", "ONE");
      endpoint.moveTo(replica.port);

      await until("the lost lock ended", async () => (await detail("lock:lost")).state !== "held", 30_000);
      await until("the lost lock's loss on its timeline", async () => (await detail("lock:lost")).timeline?.some((t) => t.type === "lost-in-failover"), 10_000).catch(async (error: unknown) => {
        const d = await detail("lock:lost");
        throw new Error(`${String(error)}; lock:lost is ${d.state}, its timeline: ${JSON.stringify(d.timeline.map((t) => [t.type, t.detail]))}`);
      });
      await until("the lost lock ended as lost", async () => (await detail("lock:lost")).state === "lost");
      expect((await detail("lock:lost")).timeline.map((t) => t.type)).not.toContain("released");
      const copied = await detail("lock:copied");
      expect(copied.state).toBe("held");
      expect(copied.timeline.map((t) => t.type)).toContain("failover");
      expect((await listedLosses()).map((l) => [l.resource, l.kind])).toEqual([["lock:lost", "failover"]]);
      const metrics = await import("@/app/metrics/route");
      const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
      expect(text).toMatch(/^lockscope_locks_lost_in_failover_total\{deployment="default"\} 1$/m);
      expect(text).toMatch(/^lockscope_failovers_total\{deployment="default"\} 1$/m);
    } finally {
      primary.disconnect();
      promoted.disconnect();
    }
  }, 90_000);
});
