import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LocksModule from "@/app/api/locks/route";
import type * as GroupsModule from "@/app/api/locks/groups/route";
import type * as StreamModule from "@/app/api/locks/stream/route";
import type { LockGroup, LockGroupsPage, LocksPage } from "@/lib/locks/groups";
import type { Lock } from "@/lib/locks/types";
import type { TestCluster } from "../support/redis";
import { streamsThrough, type StreamReader } from "../support/stream";
import { until } from "../support/wait";
import { call, lockDetail, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";

const ORDERS = 30;
const pad = (i: number) => String(i).padStart(2, "0");

describe("grouped view and server-paged locks", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let locks: typeof LocksModule;
  let groups: typeof GroupsModule;
  let stream: typeof StreamModule;
  const streams = streamsThrough(() => stream.GET);
  const openStream = streams.open;
  const oldestAt = Date.now() - 3_600_000;

  const get = async <T>(path: string) => {
    const handler = path.startsWith("/api/locks/groups") ? groups.GET : locks.GET;
    const res = await call(handler, "GET", path, { token: VIEWER_TOKEN });
    return { status: res.status, body: res.body as T };
  };
  const page = async (query: string) => {
    const res = await get<LocksPage>(`/api/locks?${query}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };
  const groupRow = async (name: string): Promise<LockGroup | undefined> => (await get<LockGroupsPage>("/api/locks/groups")).body.groups.find((g) => g.group === name);

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    clients = cluster.clients();
    locks = await import("@/app/api/locks/route");
    groups = await import("@/app/api/locks/groups/route");
    stream = await import("@/app/api/locks/stream/route");
    await startLiveReconciled();
    const { encodeLockValue } = await import("@lockscope/redlock");
    // 30 order locks held by engine clients (one an hour old, one about to expire), 5 billing locks held by a foreign client.
    const values = Array.from({ length: ORDERS }, (_, i) =>
      encodeLockValue({ label: i === 7 ? "nightly-report" : "checkout", host: `web-${i % 3}`, pid: 100 + i, fence: null, acquiredAt: i === 7 ? oldestAt : Date.now() - i * 1_000 }),
    );
    for (const node of clients) {
      const pipeline = node.pipeline();
      values.forEach((value, i) => pipeline.set(`lock:orders/order-${pad(i)}`, value, "PX", i === 12 ? 300_000 : 600_000 + i * 1_000));
      for (let i = 0; i < 5; i++) pipeline.set(`lock:billing/invoice-${i}`, `foreign-token-${i}`, "PX", 600_000);
      await pipeline.exec();
    }
    await until("every seeded lock listed", async () => (await groupRow("lock:orders"))?.held === ORDERS && (await groupRow("lock:billing"))?.held === 5, 15_000, 50);
  });

  afterAll(async () => {
    streams.closeAll();
    await tearDownConsole(cluster);
  });

  it("answers one row per group with its counts, oldest holder and shortest TTL", async () => {
    const { body } = await get<LockGroupsPage>("/api/locks/groups");
    expect(body.groups.map((g) => g.group)).toEqual(["lock:billing", "lock:orders"]);
    expect(body.locks).toBe(ORDERS + 5);
    const orders = body.groups.find((g) => g.group === "lock:orders")!;
    expect(orders).toMatchObject({ locks: ORDERS, held: ORDERS, partial: 0, elapsed: 0, ended: 0 });
    expect(orders.oldest).toEqual({ resource: "lock:orders/order-07", acquiredAt: oldestAt, holder: "nightly-report (web-1 pid 107)" });
    expect(orders.shortestTtl?.resource).toBe("lock:orders/order-12");
    // The engine's clients report their failed attempts (none here); a foreign client's leave no trace: not known, never 0.
    expect(orders.contention).toEqual({ attemptsPerMin: 0, waiters: 0 });
    expect(body.groups.find((g) => g.group === "lock:billing")!.contention).toEqual({ attemptsPerMin: null, waiters: null });

    const bySize = await get<LockGroupsPage>("/api/locks/groups?sort=locks&order=desc&limit=1");
    expect(bySize.body.groups.map((g) => g.group)).toEqual(["lock:orders"]);
    expect(bySize.body.total).toBe(2);
    expect((await get<LockGroupsPage>("/api/locks/groups?q=BILL")).body.groups.map((g) => g.group)).toEqual(["lock:billing"]);
  });

  it("counts the engine's failed attempts under the lock's group", async () => {
    const { Redlock } = await import("@lockscope/redlock");
    const holder = new Redlock(clients, { label: "holder" });
    const waiter = new Redlock(clients, { label: "waiter", retryCount: 3, retryDelayMs: 50, retryJitterMs: 10 });
    const held = await holder.acquire(["lock:billing/contended"], 30_000);
    await expect(waiter.acquire(["lock:billing/contended"], 5_000)).rejects.toThrow();
    await until("contention in the billing group", async () => (await groupRow("lock:billing"))?.contention.attemptsPerMin === 4, 15_000, 50);
    await holder.release(held);
    await Promise.all([holder.quit(), waiter.quit()]);
    await until("contended lock gone", async () => (await page("group=lock:billing&q=contended")).total === 0, 15_000, 50);
  });

  it("pages one group's locks in order, without gaps or repeats", async () => {
    const seen: string[] = [];
    for (let offset = 0; offset < ORDERS; offset += 12) {
      const body = await page(`group=lock:orders&sort=resource&order=asc&offset=${offset}&limit=12`);
      expect(body.total).toBe(ORDERS);
      expect(body.offset).toBe(offset);
      seen.push(...body.locks.map((l) => l.resource));
    }
    expect(seen).toEqual(Array.from({ length: ORDERS }, (_, i) => `lock:orders/order-${pad(i)}`));
    const last = await page("group=lock:orders&order=desc&limit=1");
    expect(last.locks.map((l) => l.resource)).toEqual([`lock:orders/order-${pad(ORDERS - 1)}`]);
    // Full locks, as the table shows them.
    expect(last.locks[0]).toMatchObject({ state: "held", quorumHeld: 3, holder: { label: "checkout" } });
    expect((await page("group=lock:nothing-here")).total).toBe(0);
  });

  it("keeps a group paged by name current as its locks come and go", async () => {
    const names = async () => (await page("group=lock:orders&sort=resource&order=asc&offset=6&limit=3")).locks.map((l) => `${l.resource} ${l.state}`);
    expect(await names()).toEqual([6, 7, 8].map((i) => `lock:orders/order-${pad(i)} held`));
    const added = `lock:orders/order-${pad(6)}a`;
    await Promise.all(clients.map((c) => c.set(added, "foreign-token-new", "PX", 600_000)));
    // In its place as soon as the console lists it: the order is kept as locks join, not rebuilt once a list of a
    // second ago is let go (however long the console took to read the new lock).
    await until("the new lock listed", async () => (await lockDetail(added))?.state === "held");
    expect(await names()).toEqual([`lock:orders/order-${pad(6)} held`, `${added} held`, `lock:orders/order-${pad(7)} held`]);
    expect((await page("group=lock:orders&limit=1")).total).toBe(ORDERS + 1);
    await Promise.all(clients.map((c) => c.del(added)));
    // Ended, it stays listed a few seconds as released, then leaves the group's pages.
    await until("the lock's end read", async () => (await lockDetail(added))?.state === "released");
    expect((await names())[1]).toBe(`${added} released`);
    await until("the ended lock gone from the group", async () => (await page("group=lock:orders&limit=1")).total === ORDERS, 15_000, 100);
    expect(await names()).toEqual([6, 7, 8].map((i) => `lock:orders/order-${pad(i)} held`));
  });

  it("searches resources and holders over every lock, and sorts by a column", async () => {
    const byName = await page("q=ORDER-1&limit=100");
    expect(byName.locks.map((l) => l.resource)).toEqual(Array.from({ length: 10 }, (_, i) => `lock:orders/order-1${i}`));
    const byHolder = await page("q=nightly-report");
    expect(byHolder.locks.map((l) => l.resource)).toEqual(["lock:orders/order-07"]);
    expect((await page("q=foreign-token&group=lock:billing")).total).toBe(5);

    expect((await page("group=lock:orders&sort=ttl&order=asc&limit=1")).locks[0]?.resource).toBe("lock:orders/order-12");
    expect((await page("group=lock:orders&sort=heldFor&order=desc&limit=1")).locks[0]?.resource).toBe("lock:orders/order-07");
    const byHolderSort = await page("group=lock:orders&sort=holder&order=desc&limit=1");
    expect(byHolderSort.locks[0]?.resource).toBe("lock:orders/order-07");
    const state = await page("state=held&group=lock:billing&sort=state");
    expect(state.total).toBe(5);
  });

  it("refuses bad paging, search and sort parameters with 400 and a message", async () => {
    const bad = [
      ["/api/locks?sort=size", "sort"],
      ["/api/locks?group=lock:orders&order=up", "order"],
      ["/api/locks?offset=-1", "offset"],
      ["/api/locks?offset=ten", "offset"],
      ["/api/locks?group=lock:orders&limit=5000", "limit"],
      ["/api/locks?group=", "group"],
      [`/api/locks?q=${"x".repeat(201)}`, "q"],
      ["/api/locks?page=2", "page"],
      ["/api/locks/groups?sort=name", "sort"],
      ["/api/locks/groups?limit=0", "limit"],
      ["/api/locks/groups?group=lock:orders", "group"],
    ] as const;
    for (const [path, field] of bad) {
      const res = await get<{ error: { code: string; message: string } }>(path);
      expect(res.status, path).toBe(400);
      expect(res.body.error.code).toBe("bad_request");
      expect(res.body.error.message, path).toContain(field);
    }
    // The full list stays as it was.
    const all = await get<{ total: number; locks: Lock[] }>("/api/locks?limit=2");
    expect(all.status).toBe(200);
    expect(all.body.locks).toHaveLength(2);
    expect(all.body.total).toBeGreaterThanOrEqual(ORDERS + 5);
  });

  it("streams one group's changes only, and resumes them from Last-Event-ID", async () => {
    const billing = await openStream({ query: "group=lock:billing" });
    const everything = await openStream();
    const snapshot = await billing.until("billing snapshot", () => billing.events.find((e) => e.event === "snapshot"));
    expect((JSON.parse(snapshot.data) as { locks: Lock[] }).locks.map((l) => l.resource).sort()).toEqual(Array.from({ length: 5 }, (_, i) => `lock:billing/invoice-${i}`));
    await everything.until("full snapshot", () => everything.events.some((e) => e.event === "snapshot"));

    await Promise.all(clients.map((c) => c.set("lock:orders/order-new", "new-order", "PX", 60_000)));
    await Promise.all(clients.map((c) => c.set("lock:billing/invoice-new", "new-invoice", "PX", 60_000)));
    await everything.until("both new locks on the full stream", () => everything.lock("lock:orders/order-new")?.state === "held" && everything.lock("lock:billing/invoice-new")?.state === "held");
    await billing.until("the new invoice on the billing stream", () => billing.lock("lock:billing/invoice-new")?.state === "held");
    const resources = (s: StreamReader) =>
      s.events.filter((e) => e.event === "lock" || e.event === "lock-removed" || e.event === "contention").map((e) => (JSON.parse(e.data) as { resource: string }).resource);
    expect(resources(billing).every((r) => r.startsWith("lock:billing/"))).toBe(true);

    const lastId = billing.lastId!;
    billing.close();
    await Promise.all(clients.map((c) => c.del("lock:orders/order-new")));
    await Promise.all(clients.map((c) => c.del("lock:billing/invoice-new")));
    await everything.until("both removals on the full stream", () => everything.lock("lock:orders/order-new") === null && everything.lock("lock:billing/invoice-new") === null);
    const resumed = await openStream({ query: "group=lock:billing", lastEventId: lastId });
    await resumed.until("the invoice's end replayed", () => resumed.lock("lock:billing/invoice-new")?.state === "released" || resumed.lock("lock:billing/invoice-new") === null);
    expect(resumed.events.some((e) => e.event === "snapshot")).toBe(false);
    expect(resources(resumed).every((r) => r.startsWith("lock:billing/"))).toBe(true);
    expect(resources(resumed)).toContain("lock:billing/invoice-new");
  });

  it("streams one group's changes without a snapshot of its rows with locks=changes", async () => {
    const changes = await openStream({ query: "group=lock:billing&locks=changes" });
    const snapshot = await changes.until("the snapshot", () => changes.events.find((e) => e.event === "snapshot"));
    // The group holds five invoices (see beforeAll): none is in this snapshot, which only marks where the changes start.
    expect(JSON.parse(snapshot.data) as { parts: number; locks: Lock[] }).toMatchObject({ parts: 1, locks: [] });
    await Promise.all(clients.map((c) => c.set("lock:orders/order-changes", "o", "PX", 60_000)));
    await Promise.all(clients.map((c) => c.set("lock:billing/invoice-changes", "i", "PX", 60_000)));
    await changes.until("the new invoice", () => changes.lock("lock:billing/invoice-changes")?.state === "held");
    const resources = changes.events.filter((e) => e.event === "lock").map((e) => (JSON.parse(e.data) as { resource: string }).resource);
    expect(resources.every((r) => r.startsWith("lock:billing/"))).toBe(true);
    await Promise.all(clients.map((c) => c.del("lock:orders/order-changes", "lock:billing/invoice-changes")));
  });

  it("streams nodes and stats without any lock with locks=none, and refuses a bad stream filter", async () => {
    const quiet = await openStream({ query: "locks=none" });
    const everything = await openStream();
    const snapshot = await quiet.until("empty snapshot", () => quiet.events.find((e) => e.event === "snapshot"));
    expect((JSON.parse(snapshot.data) as { locks: Lock[] }).locks).toEqual([]);
    await everything.until("full snapshot", () => everything.events.some((e) => e.event === "snapshot"));
    await Promise.all(clients.map((c) => c.set("lock:orders/quiet", "q", "PX", 60_000)));
    await everything.until("the lock on the full stream", () => everything.lock("lock:orders/quiet")?.state === "held");
    await quiet.until("stats", () => quiet.events.some((e) => e.event === "stats"));
    expect(quiet.events.filter((e) => e.event === "lock" || e.event === "lock-removed")).toEqual([]);

    for (const query of ["group=lock:orders&locks=none", "group=", "locks=some", "locks=changes&group="]) {
      const res = await call(stream.GET, "GET", `/api/locks/stream?${query}`, { token: VIEWER_TOKEN });
      expect(res.status, query).toBe(400);
    }
  });
});
