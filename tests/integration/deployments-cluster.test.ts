import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keySlot, Redlock } from "@lockscope/redlock";
import type { LockDetail } from "@/lib/locks/types";
import { call, listedLocks, lockDetail, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { setUpConsoleOverCluster, type RedisClusterSet } from "../support/redis-cluster";
import { until } from "../support/wait";

describe("a Redis Cluster of three primaries with a replica each", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;
  let cluster: InstanceType<typeof Redis.Cluster>;
  const keyOn = (port: number, name: string) => set.keyOn(port, name);

  beforeAll(async () => {
    // No plain nodes: the console watches the cluster alone.
    ({ unused, set } = await setUpConsoleOverCluster({ consoleNodeTimeoutMs: 300, clusterNodeTimeoutMs: 2_000 }));
    cluster = set.client();
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  const detail = async (resource: string) => (await lockDetail(resource))!;
  const listed = listedLocks;
  /** The `lost-in-restart` entry on `resource`'s timeline, once it is there. */
  const lostInRestart = (resource: string, timeoutMs: number) =>
    until(`${resource}'s timeline says it was lost in the restart`, async () => (await detail(resource)).timeline.find((t) => t.type === "lost-in-restart"), timeoutMs, 200);
  const heldAs = async (resource: string, token: string) => (await listed()).some((l) => l.resource === resource && l.state === "held" && l.token === token);

  it("watches every primary: locks found by SCAN at start and by each primary's notifications, the slot's primary and replicas on the lock page, force release", async () => {
    const primaries = [...new Set(await Promise.all([0, 8000, 15000].map(async (slot) => (await set.shardOf(slot)).primary)))];
    expect(primaries).toHaveLength(3);
    // Held before the console starts: the first SCAN of every primary finds them.
    const before = await Promise.all(primaries.map((port, i) => keyOn(port, `before-${i}`)));
    for (const key of before) await cluster.set(key, `holder-${key}`, "PX", 60_000);
    // Lock-shaped keys outside the patterns, spread over the primaries, for discovery to suggest.
    const outside = ["app:lock:orders", "app:lock:payments", "app:lock:stock", "app:lock:users"];
    for (const key of outside) await cluster.set(key, "0123456789abcdef0123456789abcdef", "PX", 600_000);
    expect(new Set(await Promise.all(outside.map(async (k) => (await set.shardOf(keySlot(k))).primary))).size).toBeGreaterThan(1);

    const ready = await import("@/app/api/ready/route");
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000);
    await until("the locks held at start, on all three primaries", async () => (await Promise.all(before.map((k) => heldAs(k, `holder-${k}`)))).every(Boolean));

    // Taken while the console watches: each primary's keyspace notifications.
    const after = await Promise.all(primaries.map((port, i) => keyOn(port, `after-${i}`)));
    for (const key of after) await cluster.set(key, `holder-${key}`, "PX", 60_000);
    await until("the new locks, on all three primaries", async () => (await Promise.all(after.map((k) => heldAs(k, `holder-${k}`)))).every(Boolean));
    // When each foreign lock was first seen is shared through the cluster (one script per hash slot).
    const { firstSeenKey } = await import("@/server/live/first-seen");
    await until("first sightings recorded on the cluster", async () => (await Promise.all(after.map((k) => cluster.exists(firstSeenKey(k, `holder-${k}`))))).every((n) => n === 1));
    const row = (await listed()).find((l) => l.resource === after[0]);
    expect(row).toMatchObject({ deployment: "default", scope: "single", format: "token" });

    // The lock page: the key's slot, the primary serving it, and its replica with the lock copied.
    const shard = await set.shardOf(keySlot(after[1]!));
    const page = await until("the replica has the lock", async () => {
      const d = await detail(after[1]!);
      return d.replication?.replicas[0]?.hasLock ? d : null;
    });
    expect(page.replication).toMatchObject({ slot: keySlot(after[1]!), primary: `127.0.0.1:${shard.primary}`, replicas: [{ address: `127.0.0.1:${shard.replicas[0]}`, hasLock: true }] });

    // The health lists the cluster's shards: each primary with its replica.
    const health = await import("@/app/api/health/route");
    const node = ((await call(health.GET, "GET", "/api/health")).body as { nodes: Array<{ cluster?: { shards: Array<{ primary: string; replicas: unknown[] }> } }> }).nodes[0];
    expect(node?.cluster?.shards.map((s) => s.primary).sort()).toEqual(primaries.map((p) => `127.0.0.1:${p}`).sort());
    expect(node?.cluster?.shards.every((s) => s.replicas.length === 1)).toBe(true);

    // An engine lock on the cluster client, force-released through the console (its fence advances in the slot).
    const redlock = new Redlock([cluster], { fenced: true, label: "billing" });
    const lock = await redlock.acquire(["lock:engine/1"], 30_000);
    await until("the engine's lock shown", async () => (await listed()).some((l) => l.resource === "lock:engine/1" && l.state === "held" && l.format === "lockscope"));
    const release = await import("@/app/api/locks/[resource]/release/route");
    const res = await call(release.POST, "POST", "/api/locks/lock%3Aengine%2F1/release", { body: { reason: "cluster release", token: lock.value }, params: { resource: "lock:engine/1" } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ released: true, nodes: [{ id: "node-0", result: "deleted" }] });
    expect(await cluster.exists("lock:engine/1")).toBe(0);
    // (The last page seen goes in the failure message: its state and timeline say how the lock ended instead.)
    let seen: LockDetail | null = null;
    await until("shown force-released", async () => (seen = await detail("lock:engine/1")).state === "force-released").catch((error: Error) => {
      throw new Error(`${error.message}; the lock page last said: ${JSON.stringify(seen)}`);
    });
    await redlock.quit();

    // Discovery walks every primary and reads each slot's keys on its own.
    const discovery = await import("@/app/api/discovery/route");
    const found = await until("discovery's pass over every primary", async () => {
      const body = (await call(discovery.GET, "GET", "/api/discovery", { token: VIEWER_TOKEN })).body as { complete: boolean; candidates: Array<{ pattern: string; keys: number }> };
      return body.complete ? body : null;
    }, 30_000, 200);
    expect(found.candidates).toContainEqual(expect.objectContaining({ pattern: "app:lock:*", keys: 4 }));
  });

  it("follows a slot moved to a primary added while it runs: the lock stays held, and the new primary is watched", async () => {
    const key = await keyOn((await set.shardOf(0)).primary, "moved");
    await cluster.set(key, "holder-moved", "PX", 60_000);
    await until("the lock shown", () => heldAs(key, "holder-moved"));
    const added = await set.addPrimary();
    await set.moveSlot(keySlot(key), added);
    expect(await cluster.get(key)).toBe("holder-moved");
    // The move deleted the key on the old primary and restored it on the new one: still the same lock.
    const moved = await until("the lock page names the new primary", async () => {
      const d = await detail(key);
      return d.replication?.primary === `127.0.0.1:${added}` ? d : null;
    });
    // The new primary has no replica yet.
    expect(moved).toMatchObject({ state: "held", token: "holder-moved", replication: { slot: keySlot(key), replicas: [] } });
    expect(moved.timeline.map((t) => t.type)).not.toContain("released");
    // The console subscribed to the new primary: a lock written there now is seen by its notifications.
    await cluster.set(key, "holder-moved-2", "PX", 60_000);
    await until("the new holder shown from the new primary", () => heldAs(key, "holder-moved-2"));
  });

  it("a primary that restarts empty before any failover: the locks in its slots are reported lost in the restart, the others not", async () => {
    const metrics = await import("@/app/metrics/route");
    // (Counting from now, as the console's start-up does.)
    (await import("@/server/console-metrics")).startConsoleMetrics();
    const shard = await set.shardOf(3000);
    const primaryNode = set.nodes.find((n) => n.port === shard.primary)!;
    const replicaNode = set.nodes.find((n) => n.port === shard.replicas[0])!;
    const [lost, elsewhere] = [await keyOn(shard.primary, "restart-lost"), await keyOn((await set.shardOf(15000)).primary, "restart-elsewhere")];
    await cluster.set(lost, "holder-restart-lost", "PX", 60_000);
    await cluster.set(elsewhere, "holder-restart-elsewhere", "PX", 60_000);
    await until("the console saw both", async () => (await heldAs(lost, "holder-restart-lost")) && (await heldAs(elsewhere, "holder-restart-elsewhere")));
    // Every lock held in the restarting primary's slots (the earlier tests' too) is lost with it.
    const held = (await listed()).filter((l) => l.state === "held").map((l) => l.resource);
    const onPrimary: string[] = [];
    for (const resource of held) if ((await set.shardOf(keySlot(resource))).primary === shard.primary) onPrimary.push(resource);
    expect(onPrimary).toContain(lost);
    expect(onPrimary).not.toContain(elsewhere);
    // The replica is frozen, so nothing fails over: the primary comes back as the primary of its slots, empty
    // (no persistence), and the replica syncs to that once it runs again.
    replicaNode.pause();
    await primaryNode.restart();
    replicaNode.resume();

    const entry = await lostInRestart(lost, 30_000);
    expect(entry.detail).toContain(`primary 127.0.0.1:${shard.primary} restarted without an append-only file and came back without this lock`);
    expect((await detail(lost)).state).not.toBe("held");
    // A lock on another primary stays held, and is no part of it.
    expect(await heldAs(elsewhere, "holder-restart-elsewhere")).toBe(true);
    expect((await detail(elsewhere)).timeline.map((t) => t.type)).not.toContain("lost-in-restart");
    const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
    expect(text).toMatch(new RegExp(`^lockscope_locks_lost_in_restart_total\\{[^}]*outcome="gone"[^}]*\\} ${onPrimary.length}$`, "m"));
    for (const resource of onPrimary) expect((await detail(resource)).timeline.map((t) => t.type)).toContain("lost-in-restart");
    // The cluster's nodes panel row and /metrics carry the restart hazard: a primary without persistence started
    // sooner ago than the longest TTL seen.
    const health = await import("@/app/api/health/route");
    const row = ((await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ id: string; restartRisk: boolean; restartedAt: number | null; uptimeSec: number | null }> }).nodes[0]!;
    expect(row).toMatchObject({ restartRisk: true });
    expect(row.restartedAt).not.toBeNull();
    expect(row.uptimeSec).toBeLessThan(30);
    const afterRestart = (await call(metrics.GET, "GET", "/metrics")).body as string;
    expect(afterRestart).toMatch(/^lockscope_node_restart_hazard\{node="node-0"\} 1$/m);
    // Counted once, as the console saw the primary restart (the gauge above can miss a hazard shorter than a scrape).
    expect(afterRestart).toMatch(/^lockscope_node_restart_hazards_total\{node="node-0"\} 1$/m);
    // The same primary is a baseline from then on: a lock taken on it now is held.
    await cluster.set(lost, "holder-after-restart", "PX", 60_000);
    await until("a lock taken on the restarted primary listed", () => heldAs(lost, "holder-after-restart"), 30_000);
  });

  it("a failover: exactly the locks the promoted replica never got are reported lost, the others held across it", async () => {
    const metrics = await import("@/app/metrics/route");
    const shard = await set.shardOf(8000);
    const primaryNode = set.nodes.find((n) => n.port === shard.primary)!;
    const replicaNode = set.nodes.find((n) => n.port === shard.replicas[0])!;
    const primary = set.direct(shard.primary);
    const [copied, lost1, lost2, elsewhere] = [await keyOn(shard.primary, "copied"), await keyOn(shard.primary, "lost-a"), await keyOn(shard.primary, "lost-b"), await keyOn((await set.shardOf(15000)).primary, "elsewhere")];
    await primary.set(copied, "holder-copied", "PX", 60_000);
    expect(await primary.wait(1, 5_000)).toBe(1);
    await cluster.set(elsewhere, "holder-elsewhere", "PX", 60_000);
    // The replica is frozen and cut off, so these two are on the primary alone.
    replicaNode.pause();
    await primary.client("KILL", "TYPE", "replica");
    await primary.set(lost1, "holder-lost-a", "PX", 60_000);
    await primary.set(lost2, "holder-lost-b", "PX", 60_000);
    await until("the console saw all four", async () => (await Promise.all([[copied, "holder-copied"], [lost1, "holder-lost-a"], [lost2, "holder-lost-b"], [elsewhere, "holder-elsewhere"]].map(([k, v]) => heldAs(k!, v!)))).every(Boolean));
    await primaryNode.kill();
    replicaNode.resume();

    // The cluster promotes the replica; the console follows it and compares.
    await until(
      "the lost locks on their timelines",
      async () => (await detail(lost1)).timeline.some((t) => t.type === "lost-in-failover") && (await detail(lost2)).timeline.some((t) => t.type === "lost-in-failover"),
      45_000,
      200,
    );
    const copiedTimeline = (await detail(copied)).timeline.map((t) => t.type);
    expect(copiedTimeline).toContain("failover");
    expect(copiedTimeline).not.toContain("lost-in-failover");
    // A lock on another primary is no part of this failover.
    expect((await detail(elsewhere)).timeline.map((t) => t.type)).not.toContain("failover");
    const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
    expect(text).toMatch(/^lockscope_locks_lost_in_failover_total\{deployment="default"\} 2$/m);
    expect(text).toMatch(/^lockscope_failovers_total\{deployment="default"\} 1$/m);
    // The watcher is on the promoted replica: the copied lock held there, a new lock there seen.
    await until("the copied lock held on the new primary", () => heldAs(copied, "holder-copied"), 30_000);
    // Nobody released the lost ones: they end as lost, whichever of the watcher and the comparison read the promoted replica first.
    await until("the lost locks ended as lost", async () => (await detail(lost1)).state === "lost" && (await detail(lost2)).state === "lost");
    expect((await detail(lost1)).timeline.map((t) => t.type)).not.toContain("released");
    const promoted = set.direct(replicaNode.port);
    const fresh = await keyOn(replicaNode.port, "after-failover");
    await promoted.set(fresh, "holder-fresh", "PX", 60_000);
    await until("a lock taken on the promoted replica listed", () => heldAs(fresh, "holder-fresh"));
  });

  it("a primary read while the cluster flags it failed, then restarted empty before any failover: its locks are reported lost in the restart", async () => {
    const { getDeploymentLives } = await import("@/server/live");
    const watcher = getDeploymentLives()[0]!.watchers[0]!;
    const shard = await set.shardOf(15000);
    const primaryNode = set.nodes.find((n) => n.port === shard.primary)!;
    const replicaNode = set.nodes.find((n) => n.port === shard.replicas[0])!;
    const lost = await keyOn(shard.primary, "failed-then-restarted");
    await set.direct(shard.primary).set(lost, "holder-failed-then-restarted", "PX", 60_000);
    await until("the console saw it", () => heldAs(lost, "holder-failed-then-restarted"));
    // Another primary tells what the cluster thinks of this one (asked before: the harness may be asking this one).
    const witness = set.direct((await set.shardOf(3000)).primary);
    // Down long enough for the cluster to flag it failed; its replica told never to take over, so nothing fails over.
    await set.direct(replicaNode.port).config("SET", "cluster-replica-no-failover", "yes");
    await primaryNode.kill();
    await until(
      "the cluster flags the primary failed",
      async () => String(await witness.call("CLUSTER", "NODES")).split("\n").some((line) => line.includes(`:${shard.primary}@`) && /\bfail\b/.test(line)),
      30_000,
      100,
    );
    // The console reads its primaries meanwhile (as its periodic check does), once its topology (read every
    // second) has the primary failed: the read passes over it, which does not answer.
    await until("a read of the primaries with this one failed", () => watcher.readRunFacts().then(() => true, () => false), 15_000, 200);
    await primaryNode.restart();

    const entry = await lostInRestart(lost, 45_000);
    expect(entry.detail).toContain(`primary 127.0.0.1:${shard.primary} restarted without an append-only file and came back without this lock`);
    expect((await set.shardOf(15000)).primary).toBe(shard.primary);
  }, 120_000);
});
