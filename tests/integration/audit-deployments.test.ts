import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditAnswer } from "@/lib/audit/types";
import { call, setUpConsole, startLiveReconciled, tearDownConsole, useDeployments, VIEWER_TOKEN } from "../support/console";
import { startCluster, type TestCluster } from "../support/redis";

type ErrorBody = { error: { code: string; message: string; details?: { deployments?: string[] } } };

/**
 * The audit log of a console watching two deployments, `orders` (a Redlock set) and `cache` (a standalone
 * instance), both holding a lock named `lock:shared`: each force release names its deployment, and the list and
 * the export filter by it, a deployment since removed from the configuration too (its entries still name it).
 */
describe("the audit log filtered by deployment", () => {
  let orders: TestCluster;
  let cache: TestCluster;
  let ordersNodes: Redis[];
  let cacheNode: Redis;

  beforeAll(async () => {
    orders = await setUpConsole({ nodes: 3 });
    cache = await startCluster(1);
    useDeployments([
      { name: "orders", kind: "redlock", urls: orders.urls },
      { name: "cache", kind: "standalone", url: cache.urls[0] },
    ]);
    ordersNodes = orders.clients();
    cacheNode = cache.client(0);
    await startLiveReconciled();
    // As the server's start does: lock-pattern changes are audited.
    (await import("@/server/patterns-audit")).registerPatternsAuditor();
  }, 60_000);

  afterAll(async () => {
    await tearDownConsole(orders);
    await cache?.close();
  });

  const routes = async () => ({
    release: (await import("@/app/api/locks/[resource]/release/route")).POST,
    audit: (await import("@/app/api/audit/route")).GET,
    exported: (await import("@/app/api/audit/export/route")).GET,
    patterns: (await import("@/app/api/patterns/route")).PUT,
  });
  const list = async (query: string) => {
    const { audit } = await routes();
    return call(audit, "GET", `/api/audit${query}`, { token: VIEWER_TOKEN });
  };

  it("lists each deployment's releases under its name, with the deployments the console watches", async () => {
    const { release } = await routes();
    for (const n of ordersNodes) await n.set("lock:shared", "orders-holder", "PX", 120_000);
    await cacheNode.set("lock:shared", "cache-holder", "PX", 120_000);
    const path = "/api/locks/lock%3Ashared/release";
    const onOrders = await call(release, "POST", `${path}?deployment=orders`, { body: { reason: "orders worker hung" }, params: { resource: "lock:shared" } });
    expect(onOrders.status, JSON.stringify(onOrders.body)).toBe(200);
    const onCache = await call(release, "POST", `${path}?deployment=cache`, { body: { reason: "cache worker hung" }, params: { resource: "lock:shared" } });
    expect(onCache.status, JSON.stringify(onCache.body)).toBe(200);

    const all = await list("?resource=lock:shared");
    expect(all.status).toBe(200);
    const body = all.body as AuditAnswer;
    expect(body.deployments).toEqual(["orders", "cache"]);
    expect(body.entries.map((e) => [e.deployment, e.reason])).toEqual([
      ["cache", "cache worker hung"],
      ["orders", "orders worker hung"],
    ]);

    const ofCache = (await list("?resource=lock:shared&deployment=cache")).body as AuditAnswer;
    expect(ofCache.entries.map((e) => [e.deployment, e.reason])).toEqual([["cache", "cache worker hung"]]);
    const ofOrders = (await list("?deployment=orders")).body as AuditAnswer;
    expect(ofOrders.entries.map((e) => [e.deployment, e.reason])).toEqual([["orders", "orders worker hung"]]);
  });

  it("leaves out lock-pattern changes, which name no deployment, when filtering by one", async () => {
    const { patterns } = await routes();
    const changed = await call(patterns, "PUT", "/api/patterns", { body: { patterns: [{ glob: "lock:*" }, { glob: "job-lock:*" }], reason: "job locks too" } });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    const everything = ((await list("")).body as AuditAnswer).entries;
    expect(everything.find((e) => e.action === "patterns-changed")).toMatchObject({ reason: expect.stringContaining("job locks too") as string });
    expect(everything.find((e) => e.action === "patterns-changed")?.deployment).toBeUndefined();
    const ofOrders = ((await list("?deployment=orders")).body as AuditAnswer).entries;
    expect(ofOrders.map((e) => e.action)).toEqual(["force-release"]);
  });

  it("exports one deployment's entries, CSV and JSON, each naming it", async () => {
    const { exported } = await routes();
    const csv = await call(exported, "GET", "/api/audit/export?format=csv&deployment=cache", { token: VIEWER_TOKEN });
    expect(csv.status).toBe(200);
    const [header, ...rows] = (csv.body as string).trim().split("\r\n");
    const column = header!.split(",").indexOf("deployment");
    expect(column).toBeGreaterThan(-1);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.split(",")[column]).toBe("cache");
    expect(rows[0]).toContain("cache worker hung");
    const json = await call(exported, "GET", "/api/audit/export?format=json&deployment=orders", { token: VIEWER_TOKEN });
    expect(json.status).toBe(200);
    expect((json.body as AuditAnswer).entries.map((e) => [e.deployment, e.reason])).toEqual([["orders", "orders worker hung"]]);
  });

  it("finds the releases of a deployment since removed from the configuration by its name, and none of a name no entry carries", async () => {
    const { exported } = await routes();
    // A release recorded while the console watched `payments` too, as the log keeps it after the deployment is gone.
    const { getAuditStore } = await import("@/server/audit/current");
    const { newAuditId } = await import("@/server/audit/records");
    const ofOrders = ((await list("?deployment=orders")).body as AuditAnswer).entries[0]!;
    const removed = { ...ofOrders, id: newAuditId(), at: Date.now(), deployment: "payments", reason: "payments worker hung" };
    await getAuditStore().recordIntent(removed);
    await getAuditStore().recordOutcome(removed.id, "released", removed.nodes, Date.now());

    const everything = (await list("")).body as AuditAnswer;
    expect(everything.deployments).toEqual(["orders", "cache"]);
    expect(everything.entries.map((e) => e.deployment)).toContain("payments");
    for (const res of [await list("?deployment=payments"), await call(exported, "GET", "/api/audit/export?format=json&deployment=payments", { token: VIEWER_TOKEN })]) {
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect((res.body as AuditAnswer).entries.map((e) => [e.deployment, e.reason])).toEqual([["payments", "payments worker hung"]]);
    }
    const none = await list("?deployment=billing");
    expect(none.status).toBe(200);
    expect((none.body as AuditAnswer).entries).toEqual([]);
    // Exactly a name: a part of one finds nothing.
    expect(((await list("?deployment=ord")).body as AuditAnswer).entries).toEqual([]);
  });

  it("refuses a malformed deployment name with a 400 that says what a name is", async () => {
    const { exported } = await routes();
    for (const res of [await list("?deployment=Orders%20EU"), await call(exported, "GET", "/api/audit/export?format=csv&deployment=Orders%20EU", { token: VIEWER_TOKEN })]) {
      expect(res.status).toBe(400);
      const { error } = res.body as ErrorBody;
      expect(error.code).toBe("bad_request");
      expect(error.message).toMatch(/deployment's name: lower-case letters, digits or '-'/);
    }
    expect((await list("?deployment=")).status).toBe(400);
    expect((await list(`?deployment=${"a".repeat(41)}`)).status).toBe(400);
  });
});
