import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keySlot } from "@lockscope/redlock";
import { call, listedLocks, lockDetail, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { setUpConsoleOverCluster, type RedisClusterSet } from "../support/redis-cluster";
import { until } from "../support/wait";

/**
 * A slot half-way through a resharding (MIGRATING on its primary, IMPORTING on the next, some of its keys moved)
 * and a manual failover (CLUSTER FAILOVER on a replica): locks held throughout stay shown as held by their
 * holders, and a force release deletes exactly the lock named, wherever its key is at that moment.
 */
describe("a Redis Cluster resharding and failing over by hand", () => {
  let unused: TestCluster;
  let set: RedisClusterSet;
  let cluster: InstanceType<typeof Redis.Cluster>;

  beforeAll(async () => {
    ({ unused, set } = await setUpConsoleOverCluster({ consoleNodeTimeoutMs: 300, clusterNodeTimeoutMs: 2_000 }));
    cluster = set.client();
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  const detail = async (resource: string) => (await lockDetail(resource))!;
  const listed = listedLocks;
  const heldAs = async (resource: string, token: string) => (await listed()).some((l) => l.resource === resource && l.state === "held" && l.token === token);
  const release = async (resource: string, token: string) => {
    const route = await import("@/app/api/locks/[resource]/release/route");
    return call(route.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, { body: { reason: "resharding", token }, params: { resource } });
  };

  it("a slot with its keys half moved: every lock held as it was, and a release deletes the named one on whichever primary has it", async () => {
    const ready = await import("@/app/api/ready/route");
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000);
    const from = (await set.shardOf(0)).primary;
    const to = (await set.shardOf(16000)).primary;
    // Three locks in one slot (one hash tag): one will have moved, two not yet.
    const moved = await set.keyOn(from, "resharded");
    const tag = /\{(.*)\}/.exec(moved)![1]!;
    const [stays, later] = [`lock:{${tag}}/stays`, `lock:{${tag}}/later`];
    const slot = keySlot(moved);
    for (const key of [moved, stays, later]) await cluster.set(key, `holder-${key}`, "PX", 120_000);
    await until("the three listed", async () => (await Promise.all([moved, stays, later].map((k) => heldAs(k, `holder-${k}`)))).every(Boolean));

    const source = set.direct(from);
    const target = set.direct(to);
    const [sourceId, targetId] = [String(await source.call("CLUSTER", "MYID")), String(await target.call("CLUSTER", "MYID"))];
    await target.call("CLUSTER", "SETSLOT", slot, "IMPORTING", sourceId);
    await source.call("CLUSTER", "SETSLOT", slot, "MIGRATING", targetId);
    await source.call("MIGRATE", "127.0.0.1", to, "", 0, 5_000, "KEYS", moved);
    // (On the target, a key of a slot it imports is read after ASKING.)
    const onTarget = async (key: string) => ((await target.pipeline().call("ASKING").exists(key).exec()) ?? [])[1]?.[1];
    expect(await onTarget(moved)).toBe(1);
    expect(await source.exists(stays)).toBe(1);
    // The move deleted the key on one primary and restored it on the other: the same lock, still held.
    await until("a new lock in the migrating slot seen", async () => {
      await cluster.set(`lock:{${tag}}/probe`, "holder-probe", "PX", 120_000);
      return heldAs(`lock:{${tag}}/probe`, "holder-probe");
    });
    for (const key of [moved, stays, later]) {
      expect(await heldAs(key, `holder-${key}`)).toBe(true);
      expect((await detail(key)).timeline.map((t) => t.type)).toEqual(["acquired"]);
    }

    // The moved one is released on the target, the other on the source; the third is untouched.
    const first = await release(moved, `holder-${moved}`);
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(await onTarget(moved)).toBe(0);
    const second = await release(stays, `holder-${stays}`);
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    // (Gone from the source, a key of the slot it migrates is answered by ASK: asked through the cluster client.)
    expect(await cluster.exists(stays)).toBe(0);
    expect(await source.get(later)).toBe(`holder-${later}`);
    await until("both shown force-released", async () => (await detail(moved)).state === "force-released" && (await detail(stays)).state === "force-released");

    // The move ends: the last lock still held, now on the target.
    await source.call("MIGRATE", "127.0.0.1", to, "", 0, 5_000, "KEYS", later, `lock:{${tag}}/probe`);
    for (const n of set.nodes) await set.direct(n.port).call("CLUSTER", "SETSLOT", slot, "NODE", targetId).catch(() => undefined);
    await until("every node sees the slot moved", async () => (await set.shardOf(slot)).primary === to);
    await until("the lock page names the new primary", async () => (await detail(later)).replication?.primary === `127.0.0.1:${to}`);
    expect(await heldAs(later, `holder-${later}`)).toBe(true);
    expect((await detail(later)).timeline.map((t) => t.type)).toEqual(["acquired"]);
  });

  it("a manual failover (CLUSTER FAILOVER on a replica): the lock held across it, and released on the promoted replica", async () => {
    const shard = await set.shardOf(8000);
    const key = await set.keyOn(shard.primary, "manual-failover");
    await cluster.set(key, "holder-manual", "PX", 120_000);
    expect(await set.direct(shard.primary).wait(1, 5_000)).toBe(1);
    await until("the lock listed", () => heldAs(key, "holder-manual"));
    await set.direct(shard.replicas[0]!).call("CLUSTER", "FAILOVER");
    await until("the replica serves the slots", async () => (await set.shardOf(8000)).primary === shard.replicas[0], 30_000);
    const page = await until("the failover on the lock's timeline", async () => {
      const d = await detail(key);
      return d.timeline.some((t) => t.type === "failover") ? d : null;
    }, 30_000);
    expect(page.timeline.map((t) => t.type)).not.toContain("lost-in-failover");
    expect(page.timeline.map((t) => t.type)).not.toContain("released");
    expect(await heldAs(key, "holder-manual")).toBe(true);
    const res = await release(key, "holder-manual");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await set.direct(shard.replicas[0]!).exists(key)).toBe(0);
  });
});
