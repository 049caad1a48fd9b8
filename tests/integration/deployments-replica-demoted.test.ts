import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nodePills } from "@/lib/locks/node-pills";
import type { WatcherStatus } from "@/lib/locks/types";
import { RedisNode } from "@/lib/redis-node";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

type Replication = { role: string; primary?: string; linkUp?: boolean };
type HealthBody = { status: string; quorum: { size: number; up: number; ok: boolean; readOnly?: number }; nodes: Array<{ id: string; up: boolean; replication?: Replication }> };

/**
 * A standalone primary failed over by hand (its replica made primary, the old primary made its replica): the
 * console's URL still names the old one, now a read-only replica, where no lock can be taken or released.
 */
describe("a standalone node demoted to a replica by a manual failover", () => {
  let cluster: TestCluster;
  let replica: RedisNode;
  const clients: Redis[] = [];

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    replica = await RedisNode.start({ dir: mkdtempSync(path.join(os.tmpdir(), "lockscope-demoted-")), extraArgs: ["--replicaof", "127.0.0.1", String(cluster.ports[0])] });
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await tearDownConsole(cluster);
    await replica?.stop();
  });

  it("is shown degraded in the health, naming the primary it now follows", async () => {
    const ready = await import("@/app/api/ready/route");
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200);
    const health = await import("@/app/api/health/route");
    const read = async () => (await call(health.GET, "GET", "/api/health", { token: VIEWER_TOKEN })).body as HealthBody;
    await until("the replica online in the primary's replication", async () => (await read()).nodes[0]?.replication?.role === "master");
    expect((await read()).status).toBe("ok");
    const metrics = await import("@/app/metrics/route");
    expect((await call(metrics.GET, "GET", "/metrics")).body as string).toMatch(/^lockscope_node_read_only\{node="node-0"\} 0$/m);

    const oldPrimary = new Redis(cluster.ports[0]!, "127.0.0.1", { maxRetriesPerRequest: 1 });
    const newPrimary = new Redis(replica.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    clients.push(oldPrimary, newPrimary);
    await newPrimary.replicaof("NO", "ONE");
    await oldPrimary.replicaof("127.0.0.1", String(replica.port));

    const demoted = await until("the node shown as a replica", async () => {
      const body = await read();
      return body.nodes[0]?.replication?.role === "replica" ? body : null;
    }, 20_000);
    expect(demoted.status).toBe("degraded");
    expect(demoted.nodes[0]).toMatchObject({ up: true, replication: { role: "replica", primary: `127.0.0.1:${replica.port}` } });
    // It answers, but no lock can be taken there: it counts for no quorum.
    expect(demoted.quorum).toEqual({ size: 1, up: 0, ok: false, readOnly: 1 });
  }, 60_000);

  it("is shown read-only in the header's node pill, with the primary it follows, and in /metrics", async () => {
    const locks = await import("@/app/api/locks/route");
    // The node statuses the header's pills are made of (the live stream sends the same).
    const statuses = async () => ((await call(locks.GET, "GET", "/api/locks?limit=1", { token: VIEWER_TOKEN })).body as { nodes: WatcherStatus[] }).nodes;
    const shown = await until("the watcher's status says read-only", async () => ((await statuses())[0]?.readOnly ? await statuses() : null), 20_000);
    expect(shown[0]?.readOnly).toEqual({ primary: `127.0.0.1:${replica.port}` });
    const pills = nodePills(shown);
    expect(pills.status).toBe("degraded");
    expect(pills.nodes[0]?.title).toContain(`a read-only replica of 127.0.0.1:${replica.port}`);

    const metrics = await import("@/app/metrics/route");
    const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
    expect(text).toMatch(/^lockscope_node_read_only\{node="node-0"\} 1$/m);
  }, 60_000);

  it("refuses a force release there, saying the node is a read-only replica", async () => {
    const newPrimary = new Redis(replica.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    clients.push(newPrimary);
    await newPrimary.set("lock:on-replica", "holder-a", "PX", 60_000);
    const oldPrimary = new Redis(cluster.ports[0]!, "127.0.0.1", { maxRetriesPerRequest: 1 });
    clients.push(oldPrimary);
    await until("the lock copied to the demoted node", async () => (await oldPrimary.get("lock:on-replica")) === "holder-a");
    const release = await import("@/app/api/locks/[resource]/release/route");
    const res = await call(release.POST, "POST", "/api/locks/lock%3Aon-replica/release", { body: { reason: "demoted node", token: "holder-a" }, params: { resource: "lock:on-replica" } });
    expect(res.status).toBe(503);
    expect(JSON.stringify(res.body), JSON.stringify(res.body)).toMatch(/read-only replica/);
    expect(await newPrimary.get("lock:on-replica")).toBe("holder-a");
  }, 60_000);
});
