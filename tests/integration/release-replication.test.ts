import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisNode } from "@/lib/redis-node";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

type Released = { outcome: string; replication?: { primary: string; replicas: Array<{ address: string; state: string; lagBytes: number; hasRelease: boolean }> } };

/**
 * A force release deletes the lock on the primary; its replicas copy the delete later. One promoted before it has
 * the delete serves the lock again: the answer says which replicas have it.
 */
describe("a force release on a primary with a replica", () => {
  let cluster: TestCluster;
  let replica: RedisNode;
  let primary: Redis;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    replica = await RedisNode.start({ dir: mkdtempSync(path.join(os.tmpdir(), "lockscope-release-replica-")), extraArgs: ["--replicaof", "127.0.0.1", String(cluster.ports[0])] });
    primary = new Redis(cluster.ports[0]!, "127.0.0.1", { maxRetriesPerRequest: 1 });
  }, 60_000);
  afterAll(async () => {
    replica?.resume();
    primary?.disconnect();
    await tearDownConsole(cluster);
    await replica?.stop();
  });

  it("says the replica has the release once it copied it, and says it has not while the replica is behind", async () => {
    const ready = await import("@/app/api/ready/route");
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200);
    const locks = await import("@/app/api/locks/route");
    const release = await import("@/app/api/locks/[resource]/release/route");
    const listed = async (resource: string) =>
      ((await call(locks.GET, "GET", "/api/locks")).body as { locks: Array<{ resource: string; state: string }> }).locks.some((l) => l.resource === resource && l.state === "held");
    const forceRelease = async (resource: string, token: string) => {
      const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, { body: { reason: "replication check", token }, params: { resource } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body as Released;
    };
    const address = `127.0.0.1:${replica.port}`;

    await until("the replica in sync", async () => (await primary.wait(1, 1_000)) === 1);
    await primary.set("lock:replicated", "holder-a", "PX", 60_000);
    expect(await primary.wait(1, 5_000)).toBe(1);
    await until("the lock listed", () => listed("lock:replicated"));
    const copied = await forceRelease("lock:replicated", "holder-a");
    expect(copied.outcome).toBe("released");
    expect(copied.replication?.replicas).toEqual([expect.objectContaining({ address, state: "online", lagBytes: 0, hasRelease: true })]);
    const onReplica = new Redis(replica.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    expect(await onReplica.exists("lock:replicated").finally(() => onReplica.disconnect())).toBe(0);

    await primary.set("lock:behind", "holder-b", "PX", 60_000);
    expect(await primary.wait(1, 5_000)).toBe(1);
    await until("the lock listed", () => listed("lock:behind"));
    // Frozen: it has the lock, and cannot copy the delete.
    replica.pause();
    const behind = await forceRelease("lock:behind", "holder-b");
    expect(behind.outcome).toBe("released");
    expect(behind.replication?.replicas).toEqual([expect.objectContaining({ address, hasRelease: false })]);
    expect(behind.replication!.replicas[0]!.lagBytes).toBeGreaterThan(0);
    expect(await primary.exists("lock:behind")).toBe(0);
    replica.resume();
  }, 60_000);
});
