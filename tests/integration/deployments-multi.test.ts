import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditPage } from "@/lib/audit/types";
import type { LockGroupsPage } from "@/lib/locks/groups";
import type { Lock, LockDetail, WatcherStatus } from "@/lib/locks/types";
import { call, setUpConsole, tearDownConsole, useDeployments, VIEWER_TOKEN } from "../support/console";
import { promtool } from "../support/prometheus";
import { startCluster, type TestCluster } from "../support/redis";
import { startRedisCluster, type RedisClusterSet } from "../support/redis-cluster";
import { openStream, type StreamReader } from "../support/stream";
import { until } from "../support/wait";

type ErrorBody = { error: { code: string; message: string; details?: { deployments?: string[] } } };

/**
 * One console watching three deployments of different kinds from one deployments file: a Redlock set of three
 * nodes (`orders`), a standalone instance (`cache`) and a Redis Cluster (`sessions`). The same resource is held
 * on two of them: it is two locks, each shown, read and force-released on its own deployment only.
 */
describe("several deployments in one console", () => {
  let orders: TestCluster;
  let cache: TestCluster;
  let sessions: RedisClusterSet;
  let ordersNodes: Redis[];
  let cacheNode: Redis;
  const streams: StreamReader[] = [];

  beforeAll(async () => {
    // No node here stops answering: the node timeout only has to stay well above a stall of this process, or a release
    // that reads every deployment takes nodes that answered for silent ones.
    orders = await setUpConsole({ nodes: 3, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "1000" } });
    cache = await startCluster(1);
    sessions = await startRedisCluster({ nodeTimeoutMs: 2_000 });
    useDeployments([
      { name: "orders", kind: "redlock", urls: orders.urls },
      { name: "cache", kind: "standalone", url: cache.urls[0] },
      { name: "sessions", kind: "cluster", seeds: sessions.urls.slice(0, 2) },
    ]);
    ordersNodes = orders.clients();
    cacheNode = cache.client(0);
    // As the server's start does: the metrics count the live view's events from the beginning.
    (await import("@/server/console-metrics")).startConsoleMetrics();
  }, 90_000);

  afterAll(async () => {
    for (const s of streams) s.close();
    await tearDownConsole(orders);
    await cache?.close();
    await sessions?.close();
  });

  const routes = async () => ({
    list: (await import("@/app/api/locks/route")).GET,
    one: (await import("@/app/api/locks/[resource]/route")).GET,
    release: (await import("@/app/api/locks/[resource]/release/route")).POST,
    groups: (await import("@/app/api/locks/groups/route")).GET,
    stream: (await import("@/app/api/locks/stream/route")).GET,
    health: (await import("@/app/api/health/route")).GET,
    ready: (await import("@/app/api/ready/route")).GET,
    audit: (await import("@/app/api/audit/route")).GET,
    history: (await import("@/app/api/locks/[resource]/history/route")).GET,
    metrics: (await import("@/app/metrics/route")).GET,
  });
  const listed = async (query = "") => {
    const { list } = await routes();
    const res = await call(list, "GET", `/api/locks${query}`, { token: VIEWER_TOKEN });
    expect(res.status).toBe(200);
    return res.body as { nodes: WatcherStatus[]; locks: Lock[] };
  };
  const detail = async (resource: string, query = "") => {
    const { one } = await routes();
    return call(one, "GET", `/api/locks/${encodeURIComponent(resource)}${query}`, { token: VIEWER_TOKEN, params: { resource } });
  };
  const rowsOf = async (resource: string) =>
    (await listed())
      .locks.filter((l) => l.resource === resource)
      .map((l) => [l.deployment, l.state, l.token])
      .sort();

  it("watches every deployment: the same resource held on two is two rows, each naming its deployment", async () => {
    for (const n of ordersNodes) await n.set("lock:shared", "orders-holder", "PX", 120_000);
    await cacheNode.set("lock:shared", "cache-holder", "PX", 120_000);
    await cacheNode.set("lock:only-cache", "cache-only", "PX", 120_000);
    await sessions.client().set("lock:{sessions}-1", "sessions-holder", "PX", 120_000);

    const { ready } = await routes();
    const answer = await until("ready", async () => {
      const res = await call(ready, "GET", "/api/ready");
      return res.status === 200 ? res : null;
    }, 30_000);
    expect((answer.body as { deployments: Array<{ name: string }> }).deployments.map((d) => d.name)).toEqual(["orders", "cache", "sessions"]);

    await until("lock:shared listed on both deployments", async () => (await rowsOf("lock:shared")).length === 2);
    expect(await rowsOf("lock:shared")).toEqual([
      ["cache", "held", "cache-holder"],
      ["orders", "held", "orders-holder"],
    ]);
    await until("the cluster's lock", async () => (await listed()).locks.some((l) => l.resource === "lock:{sessions}-1" && l.deployment === "sessions"));
    const body = await listed();
    // Each deployment's nodes, named by it (node ids repeat across deployments).
    expect(body.nodes.map((n) => `${n.deployment}/${n.nodeId}`)).toEqual(["orders/node-0", "orders/node-1", "orders/node-2", "cache/node-0", "sessions/node-0"]);
    const sharedOnOrders = body.locks.find((l) => l.resource === "lock:shared" && l.deployment === "orders");
    const sharedOnCache = body.locks.find((l) => l.resource === "lock:shared" && l.deployment === "cache");
    expect(sharedOnOrders).toMatchObject({ quorum: 2, quorumHeld: 3 });
    expect(sharedOnOrders?.nodes).toHaveLength(3);
    expect(sharedOnCache?.nodes).toHaveLength(1);

    // The deployment filter of the list, paged list and groups.
    expect((await listed("?deployment=cache")).locks.map((l) => [l.deployment, l.resource]).sort()).toEqual([
      ["cache", "lock:only-cache"],
      ["cache", "lock:shared"],
    ]);
    const paged = await listed("?deployment=orders&sort=resource");
    expect(paged.locks.map((l) => [l.deployment, l.resource])).toEqual([["orders", "lock:shared"]]);
    const { groups } = await routes();
    const grouped = (await call(groups, "GET", "/api/locks/groups?deployment=cache", { token: VIEWER_TOKEN })).body as LockGroupsPage;
    expect(grouped.locks).toBe(2);
  });

  it("asks which deployment when a resource is a lock on several, and reads each one's on its own", async () => {
    const ambiguous = await detail("lock:shared");
    expect(ambiguous.status).toBe(409);
    const error = (ambiguous.body as ErrorBody).error;
    expect(error.code).toBe("conflict");
    expect(error.message).toContain("orders, cache");
    expect(error.message).toContain("?deployment=");
    expect(error.details?.deployments).toEqual(["orders", "cache"]);

    const onOrders = await detail("lock:shared", "?deployment=orders");
    expect(onOrders.status).toBe(200);
    expect(onOrders.body as LockDetail).toMatchObject({ deployment: "orders", token: "orders-holder", quorum: 2 });
    expect((onOrders.body as LockDetail).nodes.map((n) => n.token)).toEqual(["orders-holder", "orders-holder", "orders-holder"]);
    const onCache = await detail("lock:shared", "?deployment=cache");
    expect(onCache.body as LockDetail).toMatchObject({ deployment: "cache", token: "cache-holder" });
    expect((onCache.body as LockDetail).nodes.map((n) => n.token)).toEqual(["cache-holder"]);

    // On one deployment only: no need to say which.
    expect((await detail("lock:only-cache")).body as LockDetail).toMatchObject({ deployment: "cache", token: "cache-only" });
    // Named on a deployment that does not hold it: a 404 that says where it looked.
    const elsewhere = await detail("lock:only-cache", "?deployment=orders");
    expect(elsewhere.status).toBe(404);
    expect((elsewhere.body as ErrorBody).error.message).toContain("on deployment `orders`");

    // An unknown deployment, on every route that takes one: a 400 naming those watched.
    const { list, groups, stream, history } = await routes();
    for (const res of [
      await detail("lock:shared", "?deployment=billing"),
      await call(list, "GET", "/api/locks?deployment=billing", { token: VIEWER_TOKEN }),
      await call(groups, "GET", "/api/locks/groups?deployment=billing", { token: VIEWER_TOKEN }),
      await call(stream, "GET", "/api/locks/stream?deployment=billing", { token: VIEWER_TOKEN }),
      await call(history, "GET", "/api/locks/lock%3Ashared/history?deployment=billing", { token: VIEWER_TOKEN, params: { resource: "lock:shared" } }),
    ]) {
      expect(res.status).toBe(400);
      expect((res.body as ErrorBody).error.message).toBe("No deployment is named `billing`: this console watches `orders`, `cache`, `sessions`.");
    }
    const malformed = await detail("lock:shared", "?deployment=Not%20a%20name");
    expect(malformed.status).toBe(400);
    expect((malformed.body as ErrorBody).error.message).toMatch(/deployment/);
  });

  it("streams every deployment's locks, each naming its deployment, and one deployment's with ?deployment=", async () => {
    const { stream } = await routes();
    const all = await openStream(stream);
    const onlyCache = await openStream(stream, { query: "deployment=cache" });
    streams.push(all, onlyCache);
    const snapshotted = (reader: StreamReader) =>
      reader.until("the snapshot", () => {
        const parts = reader.events.filter((e) => e.event === "snapshot").map((e) => JSON.parse(e.data) as { locks: Lock[] });
        return parts.length > 0 ? parts.flatMap((p) => p.locks) : null;
      });
    const seen = await snapshotted(all);
    expect(seen.filter((l) => l.resource === "lock:shared").map((l) => l.deployment).sort()).toEqual(["cache", "orders"]);
    expect((await snapshotted(onlyCache)).every((l) => l.deployment === "cache")).toBe(true);

    // A change on each deployment: each arrives as a lock event naming its deployment.
    for (const n of ordersNodes) await n.set("lock:late", "orders-late", "PX", 120_000);
    await cacheNode.set("lock:late", "cache-late", "PX", 120_000);
    const lateEvents = (reader: StreamReader) =>
      reader.events
        .filter((e) => e.event === "lock")
        .map((e) => JSON.parse(e.data) as Lock)
        .filter((l) => l.resource === "lock:late" && l.state === "held")
        .map((l) => `${l.deployment}:${l.token}`);
    await all.until("lock:late on both deployments", () => new Set(lateEvents(all)).size === 2);
    expect([...new Set(lateEvents(all))].sort()).toEqual(["cache:cache-late", "orders:orders-late"]);
    await onlyCache.until("lock:late on cache", () => lateEvents(onlyCache).includes("cache:cache-late"));
    expect(lateEvents(onlyCache).every((e) => e.startsWith("cache:"))).toBe(true);

    // A removal names its deployment too.
    await cacheNode.del("lock:late");
    await all.until("lock:late removed from cache", () =>
      all.events.some((e) => e.event === "lock-removed" && JSON.stringify(JSON.parse(e.data)) === JSON.stringify({ resource: "lock:late", deployment: "cache" })),
    );
    const nodes = all.latest<{ nodes: WatcherStatus[] }>("node");
    expect(nodes?.nodes.map((n) => n.deployment)).toEqual(["orders", "orders", "orders", "cache", "sessions"]);
  });

  it("force-releases only on the deployment named, audits it, and refuses to guess between two", async () => {
    const { release, audit } = await routes();
    const path = "/api/locks/lock%3Ashared/release";
    const guess = await call(release, "POST", path, { body: { reason: "stuck worker" }, params: { resource: "lock:shared" } });
    expect(guess.status).toBe(409);
    expect((guess.body as ErrorBody).error.message).toContain("orders, cache");
    expect((guess.body as ErrorBody).error.details?.deployments).toEqual(["orders", "cache"]);
    // Nothing was touched anywhere.
    expect(await cacheNode.get("lock:shared")).toBe("cache-holder");
    for (const n of ordersNodes) expect(await n.get("lock:shared")).toBe("orders-holder");

    const unknown = await call(release, "POST", `${path}?deployment=billing`, { body: { reason: "stuck worker" }, params: { resource: "lock:shared" } });
    expect(unknown.status).toBe(400);
    expect((unknown.body as ErrorBody).error.message).toContain("this console watches `orders`, `cache`, `sessions`");

    const done = await call(release, "POST", `${path}?deployment=cache`, { body: { reason: "stuck cache worker" }, params: { resource: "lock:shared" } });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ released: true, deployment: "cache", nodes: [{ id: "node-0", result: "deleted" }] });
    expect(await cacheNode.exists("lock:shared")).toBe(0);
    // The other deployment's lock of the same name: untouched on every node, value and TTL.
    for (const n of ordersNodes) {
      expect(await n.get("lock:shared")).toBe("orders-holder");
      expect(await n.pttl("lock:shared")).toBeGreaterThan(60_000);
    }
    const { auditId } = done.body as { auditId: string };
    const page = (await call(audit, "GET", "/api/audit?resource=lock:shared", { token: VIEWER_TOKEN })).body as AuditPage;
    expect(page.entries.find((e) => e.id === auditId)).toMatchObject({ action: "force-release", resource: "lock:shared", deployment: "cache", outcome: "released", reason: "stuck cache worker" });

    // Now held on one deployment only: the page and a release resolve it without being told.
    await until("the cache's lock:shared force-released", async () => ((await detail("lock:shared", "?deployment=cache")).body as LockDetail).state === "force-released");
    await until("lock:shared gone from cache's list", async () => (await rowsOf("lock:shared")).length === 1, 20_000);
    expect(await rowsOf("lock:shared")).toEqual([["orders", "held", "orders-holder"]]);
    const resolved = await call(release, "POST", "/api/locks/lock%3Aonly-cache/release", { body: { reason: "cache flush" }, params: { resource: "lock:only-cache" } });
    expect(resolved.body).toMatchObject({ released: true, deployment: "cache" });
    expect(await cacheNode.exists("lock:only-cache")).toBe(0);
  });

  it("does not guess the deployment of a release while another deployment does not answer, which may hold the key too", async () => {
    const { release } = await routes();
    await Promise.all(ordersNodes.map((n) => n.set("lock:maybe-both", "orders-holder", "PX", 120_000)));
    await cacheNode.set("lock:maybe-both", "cache-holder", "PX", 120_000);
    const path = "/api/locks/lock%3Amaybe-both/release";
    cache.pause(0);
    try {
      const refused = await call(release, "POST", path, { body: { reason: "stuck worker" }, params: { resource: "lock:maybe-both" } });
      expect(refused.status, JSON.stringify(refused.body)).toBe(503);
      const error = (refused.body as ErrorBody).error;
      expect(error.message).toContain("cache did not answer");
      expect(error.message).toContain("?deployment=orders");
      expect(error.message).toContain("nothing was touched");
      for (const n of ordersNodes) expect(await n.get("lock:maybe-both")).toBe("orders-holder");
      // Named, it goes ahead on that deployment alone.
      const named = await call(release, "POST", `${path}?deployment=orders`, { body: { reason: "stuck worker" }, params: { resource: "lock:maybe-both" } });
      expect(named.body).toMatchObject({ released: true, deployment: "orders" });
    } finally {
      cache.resume(0);
    }
    expect(await cacheNode.get("lock:maybe-both")).toBe("cache-holder");
    await cacheNode.del("lock:maybe-both");
  });

  it("lists every deployment's nodes in health and labels node and lock metrics with their deployment", async () => {
    const { health, metrics } = await routes();
    const h = (await call(health, "GET", "/api/health")).body as { nodes: Array<{ id: string; deployment: string; up: boolean }>; deployments: Array<{ name: string; kind: string; quorum: { size: number } }> };
    expect(h.nodes.map((n) => `${n.deployment}/${n.id}`)).toEqual(["orders/node-0", "orders/node-1", "orders/node-2", "cache/node-0", "sessions/node-0"]);
    expect(h.nodes.every((n) => n.up)).toBe(true);
    expect(h.deployments.map((d) => [d.name, d.kind, d.quorum.size])).toEqual([
      ["orders", "redlock", 2],
      ["cache", "standalone", 1],
      ["sessions", "cluster", 1],
    ]);
    const text = (await call(metrics, "GET", "/metrics")).body as string;
    // Every series of a metric, as its labels (in any order) and value.
    const series = (name: string) =>
      text
        .split("\n")
        .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
        .map((line) => {
          const m = /^[^{ ]+(?:\{(.*)\})? (\S+)$/.exec(line);
          const labels: Record<string, string> = {};
          for (const [, k, v] of (m?.[1] ?? "").matchAll(/(\w+)="([^"]*)"/g)) labels[k as string] = v as string;
          return { labels, value: Number(m?.[2]) };
        });
    const value = (name: string, labels: Record<string, string>) =>
      series(name).find((s) => Object.keys(labels).length === Object.keys(s.labels).length && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
    expect(value("lockscope_node_up", { node: "node-0", deployment: "cache" })).toBe(1);
    expect(value("lockscope_node_up", { node: "node-2", deployment: "orders" })).toBe(1);
    expect(value("lockscope_quorum_size", { deployment: "orders" })).toBe(2);
    expect(value("lockscope_nodes", { deployment: "orders" })).toBe(3);
    // Each deployment's kind, for the alerts to say what is down (a Redlock quorum, the one instance, the cluster).
    expect(series("lockscope_deployment_info").map((s) => [s.labels.deployment, s.labels.kind, s.value]).sort()).toEqual([
      ["cache", "standalone", 1],
      ["orders", "redlock", 1],
      ["sessions", "cluster", 1],
    ]);
    expect(value("lockscope_locks_held", { deployment: "orders", state: "held" })).toBeGreaterThanOrEqual(1);
    expect(value("lockscope_keyspace_events_total", { node: "node-0", deployment: "cache", event: "set" })).toBeGreaterThanOrEqual(1);
    // No series of these without its deployment: `node-0` alone would stand for three different nodes.
    for (const name of ["lockscope_node_up", "lockscope_locks_held", "lockscope_quorum_size", "lockscope_keyspace_events_total", "lockscope_lock_events_total", "lockscope_watcher_connected"]) {
      const all = series(name);
      expect(all.length).toBeGreaterThan(0);
      expect(all.filter((s) => s.labels.deployment === undefined)).toEqual([]);
    }
    const check = promtool(["check", "metrics"], text);
    expect(check.output).toBe("");
    expect(check.status).toBe(0);
  });

  it("counts contention per deployment: the same group on two deployments is two series", async () => {
    const { metrics } = await routes();
    const { Redlock } = await import("@lockscope/redlock");
    const onOrders = new Redlock(ordersNodes, { retryCount: 0, label: "multi-contention" });
    const onCache = new Redlock([cacheNode], { retryCount: 0, label: "multi-contention" });
    try {
      const counted = (text: string, deployment: string | null) =>
        text
          .split("\n")
          .filter((l) => l.startsWith("lockscope_lock_contention_events_total{") && l.includes('group="lock:contended"') && l.includes('traffic="production"'))
          .filter((l) => (deployment === null ? !l.includes("deployment=") : l.includes(`deployment="${deployment}"`)))
          .map((l) => Number(l.slice(l.lastIndexOf(" ") + 1)));
      const scrape = async () => String((await call(metrics, "GET", "/metrics")).body);
      // Conflicts on orders only: counted on orders, nothing on the cache.
      const heldOnOrders = await onOrders.acquire(["lock:contended/1"], 10_000);
      await expect(onOrders.acquire(["lock:contended/1"], 10_000)).rejects.toThrow();
      const first = await until("contention counted on orders", async () => {
        const t = await scrape();
        return (counted(t, "orders")[0] ?? 0) >= 1 ? t : null;
      });
      expect(counted(first, "cache").filter((n) => n > 0)).toEqual([]);
      // Then one on the cache, the same group: its own series.
      const heldOnCache = await onCache.acquire(["lock:contended/1"], 10_000);
      await expect(onCache.acquire(["lock:contended/1"], 10_000)).rejects.toThrow();
      const text = await until("contention counted on the cache", async () => {
        const t = await scrape();
        return (counted(t, "cache")[0] ?? 0) >= 1 ? t : null;
      });
      expect(counted(text, "orders")).toHaveLength(1);
      expect(counted(text, null)).toEqual([]);
      await heldOnOrders.release();
      await heldOnCache.release();
    } finally {
      await onOrders.quit();
      await onCache.quit();
    }
  });
});
