import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import { startProxy, type TcpProxy } from "../../lib/redlock/test/support/proxy.ts";
import { call, lockDetail, OPERATOR_TOKEN, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A force release whose answer is lost with its connection: the node deleted the lock, the console's client reconnects
 * and sends the script again (as ioredis does with what a dropped connection left unanswered), and that second run
 * finds the key gone. The operator and the audit log are told the lock was released, not that no node held it.
 */
describe("a force release whose answer is lost with the connection", () => {
  let cluster: TestCluster;
  let proxy: TcpProxy;
  let node: Redis;
  let release: typeof ReleaseModule;
  let audit: typeof AuditModule;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    [node] = cluster.clients() as [Redis];
    proxy = await startProxy(Number(new URL(cluster.urls[0]!).port));
    process.env.REDIS_URLS = `redis://127.0.0.1:${proxy.port}`;
    release = await import("@/app/api/locks/[resource]/release/route");
    audit = await import("@/app/api/audit/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
    await proxy?.close();
  });

  it("answers released, and the audit entry says the node deleted it", async () => {
    const resource = "lock:reply-lost/1";
    await node.set(resource, "stuck-holder", "PX", 600_000);
    await until(`${resource} held`, async () => (await lockDetail(resource))?.state === "held");

    proxy.loseReply("$7\r\ndeleted\r\n");
    const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
      token: OPERATOR_TOKEN,
      params: { resource },
      body: { reason: "holder crashed", token: "stuck-holder" },
    });
    expect(await node.exists(resource)).toBe(0);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ outcome: "released", nodes: [{ id: "node-0", result: "deleted" }] });
    const auditId = (res.body as { auditId: string }).auditId;
    const listed = (await call(audit.GET, "GET", "/api/audit", { token: VIEWER_TOKEN })).body as { entries: Array<{ id: string; outcome: string; nodes: Array<{ id: string; result: string }> }> };
    expect(listed.entries.find((e) => e.id === auditId)).toMatchObject({ outcome: "released", nodes: [{ id: "node-0", result: "deleted" }] });
  });
  it("answers released when the named holder of a Redisson lock with several holder fields is taken out and the answer lost", async () => {
    // The script took out the named field and left the other holder's: read again, another holder has the lock,
    // which is what the release does here, not a sign that the lock changed hands first.
    const resource = "lock:reply-lost/redisson";
    const a = "8e7c2a0e-6a0d-4c3f-9a43-0f5d1e2b3c4d:1";
    const b = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d:2";
    await node.hset(resource, a, "1", b, "1");
    await node.pexpire(resource, 600_000);
    await until(`${resource} held`, async () => (await lockDetail(resource))?.state === "held");

    proxy.loseReply("$7\r\ndeleted\r\n");
    const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
      token: OPERATOR_TOKEN,
      params: { resource },
      body: { reason: "thread stuck", token: a },
    });
    expect(await node.hgetall(resource)).toEqual({ [b]: "1" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ outcome: "released", nodes: [{ id: "node-0", result: "deleted" }] });
  });
});
