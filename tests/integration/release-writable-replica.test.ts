import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisNode } from "@/lib/redis-node";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * The console's URL names a writable replica (`replica-read-only no`): a delete there stays there, never reaches
 * its primary, which keeps the lock. A force release must not say it released it.
 */
describe("a force release on a node that is a writable replica", () => {
  let cluster: TestCluster;
  let primaryNode: RedisNode;
  const clients: Redis[] = [];

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1, env: { AUDIT_FILE: path.join(mkdtempSync(path.join(os.tmpdir(), "lockscope-writable-replica-")), "audit.jsonl") } });
    primaryNode = await RedisNode.start({ dir: mkdtempSync(path.join(os.tmpdir(), "lockscope-writable-replica-primary-")) });
    const consoleNode = new Redis(cluster.ports[0]!, "127.0.0.1", { maxRetriesPerRequest: 1 });
    clients.push(consoleNode);
    await consoleNode.config("SET", "replica-read-only", "no");
    await consoleNode.replicaof("127.0.0.1", String(primaryNode.port));
    await until("the replica in sync", async () => /master_link_status:up/.test(await consoleNode.info("replication")), 20_000);
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await tearDownConsole(cluster);
    await primaryNode?.stop();
  });

  it("deletes nothing, not even on the replica, and says the node is a replica of its primary, not that the lock was released", async () => {
    const primary = new Redis(primaryNode.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    const onReplica = new Redis(cluster.ports[0]!, "127.0.0.1", { maxRetriesPerRequest: 1 });
    clients.push(primary, onReplica);
    await primary.set("lock:on-writable-replica", "holder-a", "PX", 60_000);
    await until("the lock copied to the replica", async () => (await onReplica.get("lock:on-writable-replica")) === "holder-a");

    // The nodes the live view shows: a writable replica, not called read-only.
    const locks = await import("@/app/api/locks/route");
    await until("the node shown as a writable replica of its primary", async () => {
      const body = (await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { nodes: Array<{ readOnly?: { primary: string | null; writable?: boolean } }> };
      return body.nodes[0]?.readOnly?.primary === `127.0.0.1:${primaryNode.port}` && body.nodes[0]?.readOnly?.writable === true;
    });

    const release = await import("@/app/api/locks/[resource]/release/route");
    const res = await call(release.POST, "POST", "/api/locks/lock%3Aon-writable-replica/release", {
      body: { reason: "stuck job", token: "holder-a" },
      params: { resource: "lock:on-writable-replica" },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(503);
    const { error } = res.body as { error: { message: string; details?: { nodes?: Array<{ id: string; result: string; error?: string }> } } };
    expect(error.message).toMatch(/nothing was deleted/);
    expect(error.details?.nodes?.[0]?.error).toMatch(new RegExp(`replica of 127\\.0\\.0\\.1:${primaryNode.port}.*not asked`));
    expect(await primary.get("lock:on-writable-replica")).toBe("holder-a");
    expect(await onReplica.get("lock:on-writable-replica")).toBe("holder-a");

    const audit = await import("@/app/api/audit/route");
    const entries = (await call(audit.GET, "GET", "/api/audit?resource=lock%3Aon-writable-replica", { token: VIEWER_TOKEN })).body as {
      entries: Array<{ outcome: string; nodes: Array<{ result: string; error?: string }> }>;
    };
    expect(entries.entries[0]).toMatchObject({ outcome: "failed", nodes: [{ result: "error" }] });
    expect(entries.entries[0]?.nodes[0]?.error).toMatch(/replica of .*nothing was deleted there/);
  }, 60_000);
});
