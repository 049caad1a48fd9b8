import { randomBytes } from "node:crypto";
import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HistoryModule from "@/app/api/history/route";
import type * as LockHistoryModule from "@/app/api/locks/[resource]/history/route";
import type * as ServiceModule from "@/server/history/service";
import type { AuditAnswer } from "@/lib/audit/types";
import type { EventsAnswer, HoldsAnswer } from "@/lib/history/types";
import { call, setUpConsole, tearDownConsole, useDeployments, VIEWER_TOKEN } from "../support/console";
import { startPostgres, type TestPostgres } from "../support/postgres";
import { startCluster, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

type ErrorBody = { error?: { code: string; message: string; details?: { deployments?: string[] } } };

/**
 * Lock history of a console watching two deployments, `orders` and `cache`, that both have a lock named
 * `lock:shared`: two locks, recorded, read and ended apart, even when their holders write the same value.
 */
describe("lock history with several deployments", () => {
  let postgres: TestPostgres;
  let orders: TestCluster;
  let cache: TestCluster;
  let ordersNode: Redis;
  let cacheNode: Redis;
  let historyRoute: typeof HistoryModule;
  let lockHistoryRoute: typeof LockHistoryModule;
  let service: typeof ServiceModule;

  beforeAll(async () => {
    postgres = await startPostgres();
    const url = await postgres.createDatabase("console");
    orders = await setUpConsole({ nodes: 1, env: { AUDIT_DATABASE_URL: url, LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
    cache = await startCluster(1);
    useDeployments([
      { name: "orders", kind: "redlock", urls: orders.urls },
      { name: "cache", kind: "standalone", url: cache.urls[0] },
    ]);
    ordersNode = orders.client(0);
    cacheNode = cache.client(0);
    historyRoute = await import("@/app/api/history/route");
    lockHistoryRoute = await import("@/app/api/locks/[resource]/history/route");
    service = await import("@/server/history/service");
    const { waitUntilReconciled } = await import("@/server/live");
    expect(await waitUntilReconciled(20_000)).toBe(true);
  }, 60_000);

  afterAll(async () => {
    await tearDownConsole(orders);
    await cache?.close();
    await postgres?.close();
  });

  const lockHistory = async <T>(resource: string, query = "") => {
    const res = await call(lockHistoryRoute.GET, "GET", `/api/locks/${encodeURIComponent(resource)}/history${query}`, { token: VIEWER_TOKEN, params: { resource } });
    return { status: res.status, body: res.body as T & ErrorBody };
  };
  const allHistory = async <T>(query: string) => {
    const res = await call(historyRoute.GET, "GET", `/api/history${query}`, { token: VIEWER_TOKEN });
    return { status: res.status, body: res.body as T & ErrorBody };
  };

  it("records what each deployment's live view sees of the same resource apart, and ends only that deployment's hold", async () => {
    // Both holders write the same value: still two locks, two acquisitions, two holds.
    await ordersNode.set("lock:shared", "same-token", "PX", 120_000);
    await cacheNode.set("lock:shared", "same-token", "PX", 120_000);
    const eventsOn = async (deployment: string) => (await lockHistory<EventsAnswer>("lock:shared", `?deployment=${deployment}`)).body.events ?? [];
    await until("the acquisition recorded on orders", async () => (await eventsOn("orders")).some((e) => e.type === "acquired"));
    await until("the acquisition recorded on cache", async () => (await eventsOn("cache")).some((e) => e.type === "acquired"));

    const onOrders = await lockHistory<EventsAnswer>("lock:shared", "?deployment=orders");
    expect(onOrders.status).toBe(200);
    expect(onOrders.body.deployments).toEqual(["orders", "cache"]);
    expect(onOrders.body.events.map((e) => `${e.deployment}:${e.type}:${e.token}`)).toEqual(["orders:acquired:same-token"]);
    expect((await eventsOn("cache")).map((e) => `${e.deployment}:${e.type}:${e.token}`)).toEqual(["cache:acquired:same-token"]);

    // Held on both and not said which: a 409 naming them, as the lock's page answers.
    const ambiguous = await lockHistory<EventsAnswer>("lock:shared");
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.error?.code).toBe("conflict");
    expect(ambiguous.body.error?.message).toContain("orders, cache");
    expect(ambiguous.body.error?.details?.deployments).toEqual(["orders", "cache"]);

    // The cache's holder releases: its hold ends; the orders' hold of the same value stays open.
    await cacheNode.del("lock:shared");
    await until("the release recorded on cache", async () => (await eventsOn("cache")).some((e) => e.type === "released"));
    const now = Date.now();
    const heldOn = async (deployment: string) => (await lockHistory<HoldsAnswer>("lock:shared", `?deployment=${deployment}&at=${now}`)).body.holds;
    expect((await heldOn("orders")).map((h) => [h.deployment, h.token, h.endedAt])).toEqual([["orders", "same-token", null]]);
    expect(await heldOn("cache")).toEqual([]);
    expect((await eventsOn("orders")).map((e) => e.type)).toEqual(["acquired"]);
    const everywhere = await allHistory<HoldsAnswer>(`?at=${now}&resource=lock%3Ashared`);
    expect(everywhere.body.holds.map((h) => `${h.deployment}:${h.token}`)).toEqual(["orders:same-token"]);
  });

  it("pages, filters and answers who held it per deployment, and an end of unknown value closes only its own deployment's holds", async () => {
    const sink = service.getHistory()!.recorder;
    const t0 = Date.parse("2026-03-01T03:00:00Z");
    const min = 60_000;
    const resource = "lock:past";
    sink.record({ at: t0, resource, deployment: "orders", type: "acquired", token: "tok-o" });
    sink.record({ at: t0 + min, resource, deployment: "cache", type: "acquired", token: "tok-c" });
    sink.record({ at: t0 + 2 * min, resource, deployment: "orders", type: "extended", token: "tok-o", detail: "by 30.0 s" });
    // An end whose value was not known (null): it closes the lock's open holds, on its own deployment only.
    sink.record({ at: t0 + 3 * min, resource, deployment: "cache", type: "evicted", token: null });
    sink.record({ at: t0 + 5 * min, resource, deployment: "orders", type: "released", token: "tok-o" });
    await sink.flush();

    const store = service.getHistory()!.store;
    const ofOrders = await store.events({ limit: 10, filters: { resource, deployment: "orders" } });
    expect(ofOrders.events.map((e) => `${e.deployment}:${e.type}`)).toEqual(["orders:released", "orders:extended", "orders:acquired"]);
    const ofCache = await store.events({ limit: 10, filters: { resource, deployment: "cache" } });
    expect(ofCache.events.map((e) => `${e.deployment}:${e.type}`)).toEqual(["cache:evicted", "cache:acquired"]);

    const at = t0 + 4 * min;
    const holdsOf = async (deployment: string) => (await store.heldAt({ at, resource, deployment, limit: 10 })).holds.map((h) => [h.deployment, h.token, h.endedAt, h.endType]);
    expect(await holdsOf("orders")).toEqual([["orders", "tok-o", t0 + 5 * min, "released"]]);
    expect(await holdsOf("cache")).toEqual([]);
    const cacheEarlier = await store.heldAt({ at: t0 + 2 * min, resource, deployment: "cache", limit: 10 });
    expect(cacheEarlier.holds.map((h) => [h.token, h.endedAt, h.endType])).toEqual([["tok-c", t0 + 3 * min, "evicted"]]);

    // The route: known live on neither deployment, so it asks which; named, it reads that one's history only.
    const unsaid = await lockHistory<EventsAnswer>(resource);
    expect(unsaid.status).toBe(409);
    expect(unsaid.body.error?.message).toContain("?deployment=orders (or cache)");
    expect(unsaid.body.error?.details?.deployments).toEqual(["orders", "cache"]);
    const named = await lockHistory<EventsAnswer>(resource, "?deployment=cache");
    expect(named.body.events.map((e) => `${e.deployment}:${e.type}`)).toEqual(["cache:evicted", "cache:acquired"]);
    const pages: string[] = [];
    let query = "?deployment=orders&limit=2";
    for (;;) {
      const page = await lockHistory<EventsAnswer>(resource, query);
      expect(page.status).toBe(200);
      pages.push(...page.body.events.map((e) => `${e.deployment}:${e.type}`));
      if (!page.body.next) break;
      query = `?deployment=orders&limit=2&before=${page.body.next}`;
    }
    expect(pages).toEqual(["orders:released", "orders:extended", "orders:acquired"]);
    const heldThen = await lockHistory<HoldsAnswer>(resource, `?deployment=cache&at=${t0 + 2 * min}`);
    expect(heldThen.body.holds.map((h) => `${h.deployment}:${h.token}`)).toEqual(["cache:tok-c"]);

    // Across every lock: each row names its deployment, and `deployment` narrows to one.
    const range = `?from=${t0}&to=${t0 + 6 * min}`;
    const both = await allHistory<EventsAnswer>(range);
    expect(both.body.events.map((e) => `${e.deployment}:${e.type}`)).toEqual(["orders:released", "cache:evicted", "orders:extended", "cache:acquired", "orders:acquired"]);
    const cacheOnly = await allHistory<EventsAnswer>(`${range}&deployment=cache`);
    expect(cacheOnly.body.events.map((e) => `${e.deployment}:${e.type}`)).toEqual(["cache:evicted", "cache:acquired"]);
    // One resource on every deployment, page by page: each deployment's events merged newest first.
    const merged: string[] = [];
    let next = "?resource=lock%3Apast&limit=2";
    for (;;) {
      const page = await allHistory<EventsAnswer>(next);
      expect(page.status).toBe(200);
      merged.push(...page.body.events.map((e) => `${e.deployment}:${e.type}`));
      if (!page.body.next) break;
      next = `?resource=lock%3Apast&limit=2&before=${page.body.next}`;
    }
    expect(merged).toEqual(both.body.events.map((e) => `${e.deployment}:${e.type}`));
    const heldAcross = await allHistory<HoldsAnswer>(`?at=${t0 + 2 * min}&resource=lock%3Apast`);
    expect(heldAcross.body.holds.map((h) => `${h.deployment}:${h.token}`)).toEqual(["cache:tok-c", "orders:tok-o"]);
    const heldOnOrders = await allHistory<HoldsAnswer>(`?at=${t0 + 2 * min}&deployment=orders`);
    expect(heldOnOrders.body.holds.map((h) => `${h.deployment}:${h.resource}:${h.token}`)).toEqual(["orders:lock:past:tok-o"]);
  });

  it("records the other locks when one lock's key is longer than the database can index, and counts that one as dropped", async () => {
    const metrics = await import("@/app/metrics/route");
    const droppedTooLong = async () => {
      const text = (await call(metrics.GET, "GET", "/metrics", { token: null })).body as string;
      return Number(/^lockscope_history_events_total\{outcome="dropped_key_too_long"\} (\d+)/m.exec(text)?.[1] ?? Number.NaN);
    };
    const before = await droppedTooLong();
    expect(before).toBe(0);
    // 3,200 characters that do not compress: no B-tree entry can hold them. Taken with others, in one batch.
    const long = `lock:${randomBytes(1_600).toString("hex")}`;
    await Promise.all([ordersNode.set(long, "long-token", "PX", 120_000), ...[1, 2, 3].map((i) => ordersNode.set(`lock:beside-long/${i}`, `t-${i}`, "PX", 120_000))]);
    for (const i of [1, 2, 3]) {
      await until(`lock:beside-long/${i} recorded`, async () => ((await lockHistory<EventsAnswer>(`lock:beside-long/${i}`, "?deployment=orders")).body.events ?? []).some((e) => e.type === "acquired"), 20_000);
    }
    await until("the long key counted as dropped", async () => (await droppedTooLong()) >= 1);
    const text = (await call(metrics.GET, "GET", "/metrics", { token: null })).body as string;
    expect(/^lockscope_history_events_total\{outcome="dropped_write_failed"\} (\d+)/m.exec(text)?.[1]).toBe("0");
  });

  it("answers a cursor past the database's numbers with a 400, and reads a name with a NUL as it was recorded", async () => {
    for (const res of [await allHistory<EventsAnswer>("?before=1-9999999999999999999"), await lockHistory<EventsAnswer>("lock:shared", "?deployment=orders&before=1-9999999999999999999")]) {
      expect(res.status).toBe(400);
      expect(res.body.error?.message).toMatch(/`before`/);
    }
    // PostgreSQL refuses a NUL in text: the key is recorded with U+FFFD there, and looked up the same way.
    const key = "lock:n\u0000ul";
    await ordersNode.set(key, "nul-token", "PX", 120_000);
    await until("the NUL key's acquisition recorded", async () => {
      const res = await lockHistory<EventsAnswer>(key, "?deployment=orders");
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.events.some((e) => e.type === "acquired" && e.token === "nul-token");
    });
    for (const query of ["?resource=lock%3An%00ul", "?resource=%00"]) {
      const res = await allHistory<EventsAnswer>(query);
      expect(res.status, `${query}: ${JSON.stringify(res.body)}`).toBe(200);
    }
    await ordersNode.del(key);
  });

  it("refuses a deployment it does not watch with a 400 naming those it does", async () => {
    for (const res of [await allHistory<EventsAnswer>("?deployment=billing"), await lockHistory<EventsAnswer>("lock:shared", "?deployment=billing")]) {
      expect(res.status).toBe(400);
      expect(res.body.error?.message).toBe("No deployment is named `billing`: this console watches `orders`, `cache`.");
      expect(res.body.error?.details?.deployments).toEqual(["orders", "cache"]);
    }
    const malformed = await allHistory<EventsAnswer>("?deployment=Orders%20EU");
    expect(malformed.status).toBe(400);
    expect(malformed.body.error?.message).toMatch(/deployment/);
  });

  it("lists the audit entries of one deployment from the database, each release under the deployment it acted on", async () => {
    const release = (await import("@/app/api/locks/[resource]/release/route")).POST;
    const audit = (await import("@/app/api/audit/route")).GET;
    const resource = "lock:audited-shared";
    await ordersNode.set(resource, "orders-holder", "PX", 120_000);
    await cacheNode.set(resource, "cache-holder", "PX", 120_000);
    for (const deployment of ["orders", "cache"]) {
      const res = await call(release, "POST", `/api/locks/${encodeURIComponent(resource)}/release?deployment=${deployment}`, { body: { reason: `${deployment} worker hung` }, params: { resource } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    const listed = async (query: string) => {
      const res = await call(audit, "GET", `/api/audit?resource=${encodeURIComponent(resource)}${query}`, { token: VIEWER_TOKEN });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body as AuditAnswer;
    };
    const all = await listed("");
    expect(all.source).toBe("postgres");
    expect(all.deployments).toEqual(["orders", "cache"]);
    expect(all.entries.map((e) => [e.deployment, e.reason])).toEqual([
      ["cache", "cache worker hung"],
      ["orders", "orders worker hung"],
    ]);
    expect((await listed("&deployment=orders")).entries.map((e) => [e.deployment, e.reason])).toEqual([["orders", "orders worker hung"]]);
    // A deployment no entry names (not watched either): none of its entries, as for one since removed from the configuration.
    const unknown = await call(audit, "GET", "/api/audit?deployment=billing", { token: VIEWER_TOKEN });
    expect(unknown.status).toBe(200);
    expect((unknown.body as AuditAnswer).entries).toEqual([]);
  });
});
