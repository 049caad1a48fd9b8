import type Redis from "ioredis";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import type * as ExportModule from "@/app/api/audit/export/route";
import type * as HistoryModule from "@/app/api/history/route";
import type * as LockHistoryModule from "@/app/api/locks/[resource]/history/route";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import type * as ServiceModule from "@/server/history/service";
import type { AuditEntry } from "@/server/audit/types";
import type { LockHold, StoredLockEvent } from "@/server/history/types";
import type { TestCluster } from "../support/redis";
import { startPostgres, type TestPostgres } from "../support/postgres";
import { call, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import { until } from "../support/wait";

interface AuditPage {
  entries: AuditEntry[];
  next: string | null;
  source: string;
}
interface EventsPage {
  events: StoredLockEvent[];
  next: string | null;
  recording: boolean;
  deployments: string[];
}
interface HoldsPage {
  holds: LockHold[];
  next: string | null;
}

describe("audit and lock history in PostgreSQL", () => {
  let server: TestPostgres;
  let url: string;
  let cluster: TestCluster;
  let nodes: Redis[];
  let auditRoute: typeof AuditModule;
  let exportRoute: typeof ExportModule;
  let historyRoute: typeof HistoryModule;
  let lockHistoryRoute: typeof LockHistoryModule;
  let release: typeof ReleaseModule;
  let service: typeof ServiceModule;
  const released: string[] = [];

  const releaseAs = async (resource: string, actor: string, reason: string) => {
    await Promise.all(nodes.map((n) => n.set(resource, `value-of-${resource}`, "PX", 30_000)));
    return call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
      params: { resource },
      body: { reason },
      headers: { "x-lockscope-actor": actor },
    });
  };
  const get = async <T>(handler: typeof auditRoute.GET, path: string, params?: Record<string, string>) => {
    const res = await call(handler, "GET", path, { token: VIEWER_TOKEN, params });
    return { status: res.status, body: res.body as T & { error?: { code: string; message: string } }, headers: res.headers };
  };

  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase("console");
    // (No node here stops answering: the node timeout only has to stay well above a stall of this process, whose first
    // releases below compile and load code while the nodes' answers wait in the sockets.)
    cluster = await setUpConsole({ nodes: 3, env: { AUDIT_DATABASE_URL: url, LOCKSCOPE_NODE_TIMEOUT_MS: "1000", HISTORY_RETENTION_DAYS: "7" } });
    nodes = cluster.clients();
    auditRoute = await import("@/app/api/audit/route");
    exportRoute = await import("@/app/api/audit/export/route");
    historyRoute = await import("@/app/api/history/route");
    lockHistoryRoute = await import("@/app/api/locks/[resource]/history/route");
    release = await import("@/app/api/locks/[resource]/release/route");
    service = await import("@/server/history/service");
    for (const [resource, actor, reason] of [
      ["lock:orders/1", "alice", "stuck after deploy"],
      ["lock:orders/2", "bob", "holder OOM-killed"],
      ["locks:billing", "alice", "billing cron hung"],
    ] as const) {
      const res = await releaseAs(resource, actor, reason);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      released.push((res.body as { auditId: string }).auditId);
    }
    // Held before the live view starts watching: its hold must still reach the history.
    await Promise.all(nodes.map((n) => n.set("lock:before-start", "pre-token", "PX", 60_000)));
    await startLiveReconciled();
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
    await server?.close();
  });

  it("writes each release to the database, with its outcome, and lists and pages it through the routes", async () => {
    const db = new pg.Client(url);
    await db.connect();
    try {
      const { rows } = await db.query<{ id: string; outcome: string; actor: string }>("SELECT id, outcome, actor FROM audit_entries ORDER BY id");
      expect(rows.map((r) => r.id)).toEqual(released);
      expect(rows.every((r) => r.outcome === "released")).toBe(true);
    } finally {
      await db.end();
    }
    const seen: string[] = [];
    let query = "?limit=2";
    for (;;) {
      const { status, body } = await get<AuditPage>(auditRoute.GET, `/api/audit${query}`);
      expect(status).toBe(200);
      expect(body.source).toBe("postgres");
      seen.push(...body.entries.map((e) => e.id));
      if (!body.next) break;
      query = `?limit=2&before=${body.next}`;
    }
    expect(seen).toEqual([...released].reverse());
    const alice = await get<AuditPage>(auditRoute.GET, "/api/audit?actor=ALICE&resource=orders");
    expect(alice.body.entries.map((e) => e.reason)).toEqual(["stuck after deploy"]);
    // LIKE wildcards typed in a filter are taken literally.
    const wildcard = await get<AuditPage>(auditRoute.GET, "/api/audit?resource=%25");
    expect(wildcard.body.entries).toEqual([]);
    const exported = await call(exportRoute.GET, "GET", "/api/audit/export?format=csv", { token: VIEWER_TOKEN });
    expect(exported.headers.get("x-audit-source")).toBe("postgres");
    expect(String(exported.body)).toContain("billing cron hung");
  });

  it("shares the audit between consoles: an entry written by another console's store is listed", async () => {
    const { createDatabase } = await import("@/server/postgres/pool");
    const { PostgresAudit } = await import("@/server/audit/postgres");
    const { newAuditId } = await import("@/server/audit/records");
    const other = createDatabase(url);
    try {
      const id = newAuditId();
      await new PostgresAudit(other).recordIntent({
        id,
        at: Date.now(),
        actor: "dave\u0000",
        role: "operator",
        action: "force-release",
        resource: "lock:elsewhere",
        token: null,
        holder: null,
        reason: "from the second console",
        outcome: "pending",
        nodes: [],
        ip: "10.0.0.2",
        userAgent: null,
      });
      const page = await get<AuditPage>(auditRoute.GET, "/api/audit?resource=elsewhere");
      expect(page.body.entries.map((e) => [e.id, e.outcome, e.reason])).toEqual([[id, "pending", "from the second console"]]);
    } finally {
      await other.pool.end();
    }
  });

  it("records the force release of a lock whose key takes 3,000 bytes (1,000 characters of three bytes each)", async () => {
    // Within the key length a lock page addresses, but more than a B-tree index entry holds (about 2,700 bytes;
    // characters drawn at random, so that PostgreSQL cannot compress the entry below that).
    const resource = `lock:${Array.from({ length: 1_000 }, () => String.fromCharCode(0x4e00 + Math.floor(Math.random() * 0x5000))).join("")}`;
    const res = await releaseAs(resource, "carol", "long key");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await Promise.all(nodes.map((n) => n.exists(resource)))).toEqual([0, 0, 0]);
    const page = await get<AuditPage>(auditRoute.GET, `/api/audit?resource=${encodeURIComponent(resource.slice(0, 40))}`);
    expect(page.body.entries.map((e) => [e.resource, e.outcome, e.reason])).toEqual([[resource, "released", "long key"]]);
  });

  it("refuses the release with 503 and deletes nothing while the database is down, and never shows its password", async () => {
    server.stop();
    try {
      const res = await releaseAs("lock:orders/9", "alice", "db is down");
      expect(res.status).toBe(503);
      const error = (res.body as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("unavailable");
      expect(error.message).toContain("nothing was deleted");
      expect(error.message).toContain("****");
      expect(JSON.stringify(res.body)).not.toContain(server.password);
      const values = await Promise.all(nodes.map((n) => n.get("lock:orders/9")));
      expect(values).toEqual(["value-of-lock:orders/9", "value-of-lock:orders/9", "value-of-lock:orders/9"]);
      const page = await get<AuditPage>(auditRoute.GET, "/api/audit");
      expect(page.status).toBe(503);
      expect(JSON.stringify(page.body)).not.toContain(server.password);
    } finally {
      server.start();
    }
    const again = await releaseAs("lock:orders/9", "alice", "db is back");
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(await nodes[0]!.get("lock:orders/9")).toBeNull();
  });

  it("tells the operator when the release's outcome could not be recorded, and records it once the database takes it", async () => {
    const admin = new pg.Client(url);
    await admin.connect();
    // The database takes the intent and refuses the outcome (as one that went away between the two would).
    await admin.query("CREATE FUNCTION refuse_outcome() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'outcome refused by the test'; END $$");
    await admin.query("CREATE TRIGGER refuse_outcome BEFORE UPDATE ON audit_entries FOR EACH ROW EXECUTE FUNCTION refuse_outcome()");
    let auditId: string;
    let answeredAt: number;
    try {
      const res = await releaseAs("lock:orders/unrecorded", "alice", "outcome refused");
      answeredAt = Date.now();
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(await Promise.all(nodes.map((n) => n.exists("lock:orders/unrecorded")))).toEqual([0, 0, 0]);
      const body = res.body as { auditId: string; outcomeRecorded?: boolean };
      expect(body.outcomeRecorded).toBe(false);
      auditId = body.auditId;
      const page = await get<AuditPage>(auditRoute.GET, "/api/audit?resource=orders/unrecorded");
      expect(page.body.entries.map((e) => [e.id, e.outcome])).toEqual([[auditId, "pending"]]);
    } finally {
      await admin.query("DROP TRIGGER refuse_outcome ON audit_entries");
      await admin.query("DROP FUNCTION refuse_outcome()");
      await admin.end();
    }
    const recorded = await until(
      "the outcome written once the database takes it",
      async () => {
        const page = await get<AuditPage>(auditRoute.GET, "/api/audit?resource=orders/unrecorded");
        const entry = page.body.entries[0];
        return entry && entry.outcome !== "pending" ? entry : null;
      },
      30_000,
      250,
    );
    expect(recorded).toMatchObject({ id: auditId, outcome: "released", nodes: [{ result: "deleted" }, { result: "deleted" }, { result: "deleted" }] });
    // The time it ended, not the time the retry went through.
    expect(recorded.finishedAt).toBeLessThanOrEqual(answeredAt);
  });

  it("closes the entry of a release refused while the database was too slow to commit as refused, though the database commits it late", async () => {
    const admin = new pg.Client(url);
    const probe = new pg.Client(url);
    await admin.connect();
    await probe.connect();
    await admin.query("CREATE TABLE IF NOT EXISTS sync_probe (n int)");
    // Every commit waits for a standby that never answers: the console's statement gives up (503, nothing deleted)
    // while the database has written its entry, which it commits once the wait ends.
    await admin.query("ALTER SYSTEM SET synchronous_standby_names = 'nobody'");
    await admin.query("SELECT pg_reload_conf()");
    const probes: Array<Promise<unknown>> = [];
    try {
      // The setting takes effect a moment after the reload: a probe's commit waiting for the standby says it has.
      let probeDone = true;
      await until(
        "commits waiting for the standby",
        async () => {
          if (probeDone) {
            probeDone = false;
            probes.push(
              probe.query("INSERT INTO sync_probe VALUES (1)").finally(() => {
                probeDone = true;
              }),
            );
          }
          const { rows } = await admin.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'SyncRep'");
          return (rows[0]?.n ?? 0) > 0;
        },
        20_000,
        50,
      );
      const res = await releaseAs("lock:orders/slow-db", "alice", "database too slow");
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      expect(await Promise.all(nodes.map((n) => n.get("lock:orders/slow-db")))).toEqual(Array(3).fill("value-of-lock:orders/slow-db"));
    } finally {
      await admin.query("ALTER SYSTEM RESET synchronous_standby_names");
      await admin.query("SELECT pg_reload_conf()");
      await Promise.all(probes);
    }
    try {
      let seen: unknown = [];
      const entry = await until(
        "the late entry closed",
        async () => {
          const { rows } = await admin.query<{ outcome: string; actor: string }>("SELECT outcome, actor FROM audit_entries WHERE resource = 'lock:orders/slow-db'");
          seen = rows;
          return rows.length === 1 && rows[0]!.outcome !== "pending" ? rows[0] : null;
        },
        30_000,
        250,
      ).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}; the entry reads ${JSON.stringify(seen)}`);
      });
      expect(entry).toEqual({ outcome: "refused", actor: "alice" });
    } finally {
      await admin.query("DROP TABLE sync_probe");
      await admin.end();
      await probe.end();
    }
  });

  it("keeps an entry's times on the console's clock: its outcome's time is never before its start when the database's clock runs behind", async () => {
    const { createDatabase } = await import("@/server/postgres/pool");
    const { PostgresAudit } = await import("@/server/audit/postgres");
    const { newAuditId } = await import("@/server/audit/records");
    const other = createDatabase(url);
    try {
      const store = new PostgresAudit(other);
      // A console whose clock runs an hour ahead of the database's: the release starts at its `at` and ends 25 ms
      // later by the same clock.
      const at = Date.now() + 3_600_000;
      const id = newAuditId(at);
      await store.recordIntent({
        id, at, actor: "erin", role: "operator", action: "force-release", resource: "lock:clock-ahead", token: null, holder: null,
        reason: "clock test", outcome: "pending", nodes: [], ip: "127.0.0.1", userAgent: null,
      });
      await store.recordOutcome(id, "released", [{ id: "node-0", result: "deleted" }], at + 25);
      const page = await store.list({ limit: 5, filters: { resource: "lock:clock-ahead" } });
      expect(page.entries.map((e) => [e.at, e.finishedAt])).toEqual([[at, at + 25]]);
    } finally {
      await other.pool.end();
    }
  });

  it("shows the history's backlog in /metrics while the database is down, and its end once it is back", async () => {
    const metrics = await import("@/app/metrics/route");
    const queued = async () => {
      const text = (await call(metrics.GET, "GET", "/metrics", { token: null })).body as string;
      return Number(/^lockscope_history_queue_events (\d+)/m.exec(text)?.[1] ?? Number.NaN);
    };
    // Every outcome is a series from the start (at 0 until something happens), the first drop visible to rate().
    const text = (await call(metrics.GET, "GET", "/metrics", { token: null })).body as string;
    for (const series of ['lockscope_history_events_total{outcome="dropped_queue_full"}', 'lockscope_history_events_total{outcome="dropped_write_failed"}', "lockscope_history_write_failures_total ", 'lockscope_audit_writes_total{sink="postgres",outcome="failed"}']) {
      expect(text).toContain(series);
    }
    server.stop();
    try {
      // Locks taken while the database is down: their events wait in the recorder's queue.
      for (let i = 0; i < 20; i++) await Promise.all(nodes.map((n) => n.set(`lock:backlog/${i}`, `v-${i}`, "PX", 60_000)));
      await until("the backlog in /metrics", async () => ((await queued()) >= 20 ? true : null), 20_000, 200);
      // The failed writes are counted too: with the backlog, what LockscopeHistoryNotRecorded fires on.
      await until(
        "failed history writes in /metrics",
        async () => {
          const text = (await call(metrics.GET, "GET", "/metrics", { token: null })).body as string;
          return Number(/^lockscope_history_write_failures_total (\d+)/m.exec(text)?.[1] ?? 0) > 0 ? true : null;
        },
        20_000,
        200,
      );
    } finally {
      server.start();
    }
    await until("the backlog written", async () => ((await queued()) === 0 ? true : null), 30_000, 200);
  });

  it("keeps the history's backlog while the database is down, however many writes fail, and writes all of it once it is back", async () => {
    const { createDatabase } = await import("@/server/postgres/pool");
    const { PostgresHistory } = await import("@/server/history/postgres");
    const { HistoryRecorder } = await import("@/server/history/recorder");
    const db = createDatabase(url);
    const store = new PostgresHistory(db);
    const drops: Array<[number, string]> = [];
    const failures: unknown[] = [];
    const recorder = new HistoryRecorder(store, { attempts: 2, flushMs: 60_000, onDrop: (n, why) => drops.push([n, why]), onError: (e) => failures.push(e) });
    const at = Date.now();
    try {
      server.stop();
      try {
        for (let i = 0; i < 3; i++) recorder.record({ at: at + i, resource: `lock:while-down/${i}`, deployment: "default", type: "acquired", token: `down-${i}` });
        // Each flush is one write, refused by a server that is not there: far more than `attempts` (a queue
        // that empties has given its events up).
        while (failures.length < 6 && recorder.pending > 0) await recorder.flush();
        expect(drops).toEqual([]);
        expect(recorder.pending).toBe(3);
      } finally {
        server.start();
      }
      await recorder.flush();
      expect(recorder.pending).toBe(0);
      const page = await store.events({ limit: 10, filters: { from: at, to: at + 3 } });
      expect(page.events.map((e) => e.resource).sort()).toEqual(["lock:while-down/0", "lock:while-down/1", "lock:while-down/2"]);
    } finally {
      await recorder.close();
      await db.pool.end();
    }
  });

  it("stores lock history of any key name and value: quotes, backslashes, commas, braces, a NUL and a lone surrogate", async () => {
    const sink = service.getHistory()!.recorder;
    const at = Date.parse("2026-03-02T03:00:00Z");
    const resource = 'lock:odd/"q",{b}\\x\u0000\ud800é😀';
    const token = 'v"1",{NULL}\\\u0000\udc00';
    sink.record({ deployment: "default", at, resource, type: "acquired", token, detail: "by a, {b} \"c\"" });
    sink.record({ deployment: "default", at: at + 1_000, resource, type: "released", token });
    await sink.flush();
    // NUL and a lone surrogate become U+FFFD; everything else is kept as it was.
    const stored = 'lock:odd/"q",{b}\\x\uFFFD\uFFFDé😀';
    const page = await get<EventsPage>(lockHistoryRoute.GET, `/api/locks/${encodeURIComponent(stored)}/history`, { resource: stored });
    expect(page.status, JSON.stringify(page.body)).toBe(200);
    expect(page.body.events.map((e) => [e.type, e.token, e.detail ?? null])).toEqual([
      ["released", 'v"1",{NULL}\\\uFFFD\uFFFD', null],
      ["acquired", 'v"1",{NULL}\\\uFFFD\uFFFD', "by a, {b} \"c\""],
    ]);
    const held = await get<HoldsPage>(lockHistoryRoute.GET, `/api/locks/x/history?at=${at + 500}`, { resource: stored });
    expect(held.body.holds.map((h) => [h.token, h.acquiredAt, h.endedAt, h.endType])).toEqual([['v"1",{NULL}\\\uFFFD\uFFFD', at, at + 1_000, "released"]]);
    // Asked for by the name the live view shows (with the NUL): looked up as it was stored, not refused by the database.
    const asShown = 'lock:odd/"q",{b}\\x\u0000\uFFFDé😀';
    const shown = await get<EventsPage>(lockHistoryRoute.GET, `/api/locks/${encodeURIComponent(asShown)}/history`, { resource: asShown });
    expect(shown.status, JSON.stringify(shown.body)).toBe(200);
    expect(shown.body.events.map((e) => e.type)).toEqual(["released", "acquired"]);
    // Filters with a NUL read the same way, in the audit too.
    for (const [handler, path] of [[auditRoute.GET, "/api/audit?actor=%00"], [auditRoute.GET, "/api/audit?resource=a%00b"], [historyRoute.GET, "/api/history?resource=%00"]] as const) {
      const res = await get<unknown>(handler, path);
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(200);
    }
  });

  it("stores an acquisition and an end two consoles saw a few milliseconds apart once, whichever 10 s mark lies between them", async () => {
    const { createDatabase } = await import("@/server/postgres/pool");
    const { PostgresHistory } = await import("@/server/history/postgres");
    const first = createDatabase(url);
    const second = createDatabase(url);
    try {
      // Two consoles, each with its own connections, whose clocks (or sightings) differ by a few milliseconds.
      const consoleA = new PostgresHistory(first);
      const consoleB = new PostgresHistory(second);
      const mark = Math.floor((Date.now() - 86_400_000) / 10_000) * 10_000;
      const event = (at: number, type: "acquired" | "released") => ({ at, resource: "lock:two-consoles", deployment: "default", type, token: "seen-twice" });
      // Across a 10 s mark, and across the 5 s between two marks.
      await consoleA.insert([event(mark - 3, "acquired")]);
      await consoleB.insert([event(mark + 2, "acquired")]);
      await consoleA.insert([event(mark + 4_999, "released")]);
      await consoleB.insert([event(mark + 5_001, "released")]);
      const page = await consoleA.events({ limit: 10, filters: { resource: "lock:two-consoles" } });
      expect(page.events.map((e) => [e.type, e.at])).toEqual([
        ["released", mark + 4_999],
        ["acquired", mark - 3],
      ]);
      const held = await consoleA.heldAt({ at: mark + 1_000, resource: "lock:two-consoles", deployment: "default", limit: 10 });
      expect(held.holds.map((h) => [h.acquiredAt, h.endedAt, h.endType])).toEqual([[mark - 3, mark + 4_999, "released"]]);
    } finally {
      await first.pool.end();
      await second.pool.end();
    }
  });

  it("stores each hold of a value taken again seconds after its release once, though two consoles saw every one", async () => {
    const { createDatabase } = await import("@/server/postgres/pool");
    const { PostgresHistory } = await import("@/server/history/postgres");
    const first = createDatabase(url);
    const second = createDatabase(url);
    try {
      const consoleA = new PostgresHistory(first);
      const consoleB = new PostgresHistory(second);
      const t = Math.floor((Date.now() - 86_400_000) / 10_000) * 10_000 + 1_000;
      // A Redisson thread's value, its next job taking the lock a second after the last: three holds within 6 s.
      const event = (at: number, type: "acquired" | "released") => ({ at, resource: "lock:retaken", deployment: "default", type, token: "client-uuid:57" });
      const seen = [event(t, "acquired"), event(t + 2_000, "released"), event(t + 3_000, "acquired"), event(t + 4_000, "released"), event(t + 5_000, "acquired"), event(t + 6_000, "released")];
      // Each console writes each event on its own, the second a few milliseconds after the first.
      for (const e of seen) {
        await consoleA.insert([e]);
        await consoleB.insert([{ ...e, at: e.at + 3 }]);
      }
      const page = await consoleA.events({ limit: 20, filters: { resource: "lock:retaken" } });
      expect(page.events.map((e) => [e.type, e.at - t])).toEqual([...seen].reverse().map((e) => [e.type, e.at - t]));
      const heldAt = async (at: number) => (await consoleA.heldAt({ at, resource: "lock:retaken", deployment: "default", limit: 10 })).holds.map((h) => [h.acquiredAt - t, h.endedAt === null ? null : h.endedAt - t]);
      expect(await heldAt(t + 1_000)).toEqual([[0, 2_000]]);
      expect(await heldAt(t + 3_500)).toEqual([[3_000, 4_000]]);
      expect(await heldAt(t + 5_500)).toEqual([[5_000, 6_000]]);
      expect(await heldAt(t + 4_500)).toEqual([]);
    } finally {
      await first.pool.end();
      await second.pool.end();
    }
  });

  it("stores a batch written again (its COMMIT went through, its answer was lost) once, extensions and gaps too", async () => {
    const store = service.getHistory()!.store;
    const t = Date.now() - 5_400_000;
    const batch = [
      { at: t, resource: "lock:written-twice", deployment: "default", type: "acquired" as const, token: "twice" },
      { at: t + 1_000, resource: "lock:written-twice", deployment: "default", type: "extended" as const, token: "twice", detail: "TTL end moved 10 s later" },
      { at: t + 1_500, resource: "lock:written-twice", deployment: "default", type: "gap" as const, node: "node-1", detail: "node-1 was away 2 s" },
      { at: t + 2_000, resource: "lock:written-twice", deployment: "default", type: "released" as const, token: "twice" },
    ];
    await store.insert(batch);
    await store.insert(batch);
    const page = await store.events({ limit: 10, filters: { resource: "lock:written-twice" } });
    expect(page.events.map((e) => [e.type, e.at - t])).toEqual([
      ["released", 2_000],
      ["gap", 1_500],
      ["extended", 1_000],
      ["acquired", 0],
    ]);
    const held = await store.heldAt({ at: t + 500, resource: "lock:written-twice", deployment: "default", limit: 10 });
    expect(held.holds.map((h) => [h.acquiredAt - t, h.endedAt === null ? null : h.endedAt - t])).toEqual([[0, 2_000]]);
  });

  it("stores one end of a hold two consoles saw as a release and as a force release, as the force release, whichever came first", async () => {
    const { createDatabase } = await import("@/server/postgres/pool");
    const { PostgresHistory } = await import("@/server/history/postgres");
    const first = createDatabase(url);
    const second = createDatabase(url);
    try {
      // The console that released knew it was forced; another saw the keys go before the release's word came (and
      // corrects its own record once it comes, or never, if it never comes).
      const releasing = new PostgresHistory(first);
      const watching = new PostgresHistory(second);
      const t = Date.now() - 3_600_000;
      const ev = (resource: string, at: number, type: "acquired" | "released" | "force-released", relabels?: "released") => ({
        at,
        resource,
        deployment: "default",
        type,
        token: "forced-value",
        ...(type === "force-released" ? { detail: "by carol: “stuck”" } : {}),
        ...(relabels ? { relabels } : {}),
      });
      const ends = async (resource: string) => {
        const page = await releasing.events({ limit: 10, filters: { resource } });
        const held = await releasing.heldAt({ at: t + 500, resource, deployment: "default", limit: 10 });
        return { events: page.events.map((e) => [e.type, e.detail]), holds: held.holds.map((h) => h.endType) };
      };
      const forced = [["force-released", "by carol: “stuck”"], ["acquired", null]];

      // The force release recorded first; the other console's release, then its correction.
      await releasing.insert([ev("lock:forced/1", t, "acquired"), ev("lock:forced/1", t + 1_000, "force-released")]);
      await watching.insert([ev("lock:forced/1", t + 1_003, "released")]);
      await watching.insert([ev("lock:forced/1", t + 1_003, "force-released", "released")]);
      expect(await ends("lock:forced/1")).toEqual({ events: forced, holds: ["force-released"] });

      // The release recorded first, never corrected by its console: the force release's word still stands.
      await watching.insert([ev("lock:forced/2", t, "acquired"), ev("lock:forced/2", t + 1_003, "released")]);
      await releasing.insert([ev("lock:forced/2", t + 1_000, "force-released")]);
      expect(await ends("lock:forced/2")).toEqual({ events: forced, holds: ["force-released"] });
    } finally {
      await first.pool.end();
      await second.pool.end();
    }
  });

  it("opens and ends holds in the order their events happened, also when one batch holds a value's end and its next acquisition", async () => {
    // After the database was down, one batch carries minutes of events: here a holder (a Redisson thread, whose value
    // is the same each time) takes the lock three times, 30 s apart, and a holder of a value not known ends it once.
    const store = service.getHistory()!.store;
    const t = Date.now() - 7_200_000;
    const ev = (at: number, type: "acquired" | "released" | "expired", token: string | null = "thread-1") => ({ at: t + at, resource: "lock:backlog/1", deployment: "default", type, token });
    await store.insert([
      ev(0, "acquired"),
      ev(10_000, "released"),
      ev(30_000, "acquired"),
      ev(40_000, "released"),
      ev(60_000, "acquired"),
      ev(70_000, "acquired", "thread-2"),
      ev(80_000, "expired", null),
    ]);
    const holdsAt = async (at: number) =>
      (await store.heldAt({ at: t + at, resource: "lock:backlog/1", deployment: "default", limit: 10 })).holds.map((h) => [h.token, h.acquiredAt - t, h.endedAt === null ? null : h.endedAt - t, h.endType]);
    expect(await holdsAt(5_000)).toEqual([["thread-1", 0, 10_000, "released"]]);
    expect(await holdsAt(20_000)).toEqual([]);
    expect(await holdsAt(35_000)).toEqual([["thread-1", 30_000, 40_000, "released"]]);
    expect(await holdsAt(75_000)).toEqual([
      ["thread-2", 70_000, 80_000, "expired"],
      ["thread-1", 60_000, 80_000, "expired"],
    ]);
    expect(await holdsAt(90_000)).toEqual([]);
  });

  it("records lock history, pages it newest first by resource and by time, and answers who held a lock at an instant", async () => {
    const history = service.getHistory();
    expect(history).not.toBeNull();
    const sink = history!.recorder;
    const t0 = Date.parse("2026-03-01T03:00:00Z");
    const min = 60_000;
    // Two holders of lock:orders/42, one after the other, and a lock held across the instant asked about.
    sink.record({ deployment: "default", at: t0, resource: "lock:orders/42", type: "acquired", token: "tok-a" });
    sink.record({ deployment: "default", at: t0 + 5 * min, resource: "lock:orders/42", type: "extended", token: "tok-a", detail: "by 30.0 s" });
    sink.record({ deployment: "default", at: t0 + 10 * min, resource: "lock:orders/42", type: "released", token: "tok-a" });
    sink.record({ deployment: "default", at: t0 + 11 * min, resource: "lock:orders/42", type: "acquired", token: "tok-b" });
    sink.record({ deployment: "default", at: t0 + 13 * min, resource: "lock:orders/42", type: "expired", token: "tok-b" });
    sink.record({ deployment: "default", at: t0 + 1 * min, resource: "lock:orders/7", type: "acquired", token: "tok-c" });
    // The same event seen by a second console a few ms later is stored once.
    sink.record({ deployment: "default", at: t0 + 1 * min + 3, resource: "lock:orders/7", type: "acquired", token: "tok-c" });
    await sink.flush();
    expect(sink.pending).toBe(0);

    const r42 = { resource: "lock:orders/42" };
    const pages: string[][] = [];
    let query = "?limit=2";
    for (;;) {
      const { status, body } = await get<EventsPage>(lockHistoryRoute.GET, `/api/locks/lock%3Aorders%2F42/history${query}`, r42);
      expect(status, JSON.stringify(body)).toBe(200);
      expect(body.recording).toBe(true);
      pages.push(body.events.map((e) => `${e.type}:${e.token}`));
      if (!body.next) break;
      query = `?limit=2&before=${body.next}`;
    }
    expect(pages).toEqual([["expired:tok-b", "acquired:tok-b"], ["released:tok-a", "extended:tok-a"], ["acquired:tok-a"]]);
    // One deployment: every event is its (`default`), and naming it changes nothing.
    const named = await get<EventsPage>(lockHistoryRoute.GET, "/api/locks/lock%3Aorders%2F42/history?deployment=default", r42);
    expect(named.body.deployments).toEqual(["default"]);
    expect(named.body.events.map((e) => `${e.deployment}:${e.type}:${e.token}`)).toEqual([
      "default:expired:tok-b",
      "default:acquired:tok-b",
      "default:released:tok-a",
      "default:extended:tok-a",
      "default:acquired:tok-a",
    ]);

    const at312 = t0 + 12 * min;
    const heldThen = await get<HoldsPage>(lockHistoryRoute.GET, `/api/locks/x/history?at=${new Date(at312).toISOString()}`, r42);
    expect(heldThen.body.holds.map((h) => [h.deployment, h.token, h.acquiredAt, h.endedAt, h.endType])).toEqual([["default", "tok-b", t0 + 11 * min, t0 + 13 * min, "expired"]]);
    const heldEarlier = await get<HoldsPage>(lockHistoryRoute.GET, `/api/locks/x/history?at=${t0 + 2 * min}`, r42);
    expect(heldEarlier.body.holds.map((h) => h.token)).toEqual(["tok-a"]);
    const heldNever = await get<HoldsPage>(lockHistoryRoute.GET, `/api/locks/x/history?at=${t0 + 10 * min + 30_000}`, r42);
    expect(heldNever.body.holds).toEqual([]);

    const everywhere = await get<HoldsPage>(historyRoute.GET, `/api/history?at=${t0 + 2 * min}`);
    expect(everywhere.body.holds.map((h) => `${h.resource}:${h.token}`)).toEqual(["lock:orders/7:tok-c", "lock:orders/42:tok-a"]);
    const firstOnly = await get<HoldsPage>(historyRoute.GET, `/api/history?at=${t0 + 2 * min}&limit=1`);
    const rest = await get<HoldsPage>(historyRoute.GET, `/api/history?at=${t0 + 2 * min}&limit=1&before=${firstOnly.body.next}`);
    expect([...firstOnly.body.holds, ...rest.body.holds].map((h) => h.token)).toEqual(["tok-c", "tok-a"]);

    const range = await get<EventsPage>(historyRoute.GET, `/api/history?from=${t0}&to=${t0 + 6 * min}`);
    expect(range.body.events.map((e) => `${e.resource}:${e.type}`)).toEqual(["lock:orders/42:extended", "lock:orders/7:acquired", "lock:orders/42:acquired"]);
    const rangeOfDefault = await get<EventsPage>(historyRoute.GET, `/api/history?from=${t0}&to=${t0 + 6 * min}&deployment=default`);
    expect(rangeOfDefault.body.events.map((e) => e.id)).toEqual(range.body.events.map((e) => e.id));

    const bad = await get<EventsPage>(historyRoute.GET, "/api/history?at=yesterday");
    expect(bad.status).toBe(400);
    const both = await get<EventsPage>(historyRoute.GET, `/api/history?at=${t0}&from=${t0}`);
    expect(both.status).toBe(400);
    for (const res of [
      await get<EventsPage>(historyRoute.GET, "/api/history?deployment=billing"),
      await get<EventsPage>(lockHistoryRoute.GET, "/api/locks/lock%3Aorders%2F42/history?deployment=billing", r42),
    ]) {
      expect(res.status).toBe(400);
      expect(res.body.error?.message).toBe("No deployment is named `billing`: this console watches `default`.");
    }
    const malformed = await get<EventsPage>(historyRoute.GET, "/api/history?deployment=Not%20a%20name");
    expect(malformed.status).toBe(400);
    expect(malformed.body.error?.message).toMatch(/deployment/);
    const notLock = await get<EventsPage>(lockHistoryRoute.GET, "/api/locks/session%3A1/history", { resource: "session:1" });
    expect(notLock.status).toBe(404);
  });

  it("records what the live view sees of real locks: acquired, extended, released, and locks held before it started", async () => {
    const resource = "lock:live-history/1";
    const path = `/api/locks/${encodeURIComponent(resource)}/history`;
    const types = async () => (await get<EventsPage>(lockHistoryRoute.GET, path, { resource })).body.events;
    await Promise.all(nodes.map((n) => n.set(resource, "live-token-1", "PX", 30_000)));
    await until("the acquisition in the history", async () => (await types()).some((e) => e.type === "acquired"));
    await Promise.all(nodes.map((n) => n.pexpire(resource, 120_000)));
    await until("the extension in the history", async () => (await types()).some((e) => e.type === "extended"));
    await Promise.all(nodes.map((n) => n.del(resource)));
    await until("the release in the history", async () => (await types()).some((e) => e.type === "released"));
    const events = await types();
    expect(events.map((e) => [e.type, e.token])).toEqual([
      ["released", "live-token-1"],
      ["extended", "live-token-1"],
      ["acquired", "live-token-1"],
    ]);
    const [releasedAt, , acquiredAt] = events.map((e) => e.at);
    const during = Math.round((acquiredAt! + releasedAt!) / 2);
    const held = await get<HoldsPage>(lockHistoryRoute.GET, `${path}?at=${during}`, { resource });
    expect(held.body.holds.map((h) => [h.token, h.acquiredAt, h.endedAt, h.endType])).toEqual([["live-token-1", acquiredAt, releasedAt, "released"]]);

    const before = await until("the hold found at start", async () => {
      const page = await get<HoldsPage>(historyRoute.GET, `/api/history?at=${Date.now()}&resource=lock%3Abefore-start`);
      return page.body.holds[0];
    });
    expect(before).toMatchObject({ resource: "lock:before-start", token: "pre-token", endedAt: null });
  });

  it("ends the hold of a fenced acquisition, whose value is rewritten with its fence, with the lock's release", async () => {
    const { encodeLockValue } = await import("@lockscope/redlock");
    const resource = "lock:fenced-history/1";
    const path = `/api/locks/${encodeURIComponent(resource)}/history`;
    const events = async () => (await get<EventsPage>(lockHistoryRoute.GET, path, { resource })).body.events;
    // The engine writes a fenced acquisition twice: its value without the fence, then the same value id with it.
    const unfenced = encodeLockValue({ label: "billing", host: "web-1", pid: 42, fence: null, acquiredAt: Date.now() });
    const fields = unfenced.split(":");
    fields[4] = "17";
    const fenced = fields.join(":");
    await Promise.all(nodes.map((n) => n.set(resource, unfenced, "PX", 60_000)));
    await until("the acquisition in the history", async () => (await events()).some((e) => e.type === "acquired"));
    await Promise.all(nodes.map((n) => n.set(resource, fenced, "PX", 60_000)));
    const { getDeploymentLives } = await import("@/server/live");
    const live = getDeploymentLives()[0]!;
    await until("the fence in the live view", () => Promise.resolve(live.store.holdsValue(resource, fenced)));
    // Held for minutes by then: the check for holds whose end nobody saw finds it held, by its value id.
    await service.getHistory()!.recorder.flush();
    const db = new pg.Client(url);
    await db.connect();
    try {
      await db.query("UPDATE lock_holds_current SET acquired_at = acquired_at - interval '2 minutes' WHERE resource = $1", [resource]);
    } finally {
      await db.end();
    }
    await live.endUnseenHolds();
    const stillHeld = await get<HoldsPage>(lockHistoryRoute.GET, `${path}?at=${Date.now()}`, { resource });
    expect(stillHeld.body.holds.map((h) => [h.token, h.endType])).toEqual([[unfenced, null]]);
    await Promise.all(nodes.map((n) => n.del(resource)));
    await until("the release in the history", async () => (await events()).some((e) => e.type === "released"));
    await service.getHistory()!.recorder.flush();
    const after = await events();
    const held = await get<HoldsPage>(lockHistoryRoute.GET, `${path}?at=${Math.round((after[0]!.at + after.at(-1)!.at) / 2)}`, { resource });
    // Ended, it reads as the lock ended: with its fence.
    expect(held.body.holds.map((h) => [h.endType, h.endedAt, h.token, h.fence])).toEqual([["released", after[0]!.at, fenced, "17"]]);
    const open = await get<HoldsPage>(lockHistoryRoute.GET, `${path}?at=${Date.now()}`, { resource });
    expect(open.body.holds).toEqual([]);

    // Two consoles, one of which read the value before its fence and one after: one acquisition, one hold.
    const store = service.getHistory()!.store;
    const t = Date.now() - 600_000;
    const other = "lock:fenced-history/2";
    await store.insert([{ at: t, resource: other, deployment: "default", type: "acquired", token: unfenced }]);
    await store.insert([{ at: t + 3, resource: other, deployment: "default", type: "acquired", token: fenced }]);
    await store.insert([{ at: t + 1_000, resource: other, deployment: "default", type: "released", token: fenced }]);
    const page = await store.events({ limit: 10, filters: { resource: other } });
    expect(page.events.map((e) => [e.type, e.token])).toEqual([
      ["released", fenced],
      ["acquired", unfenced],
    ]);
    const holds = await store.heldAt({ at: t + 500, resource: other, deployment: "default", limit: 10 });
    expect(holds.holds.map((h) => [h.token, h.fence, h.endedAt, h.endType])).toEqual([[fenced, "17", t + 1_000, "released"]]);
  });

  it("corrects a recorded release into a force release when the operator's release is learnt a moment after the keys went", async () => {
    const resource = "lock:relabel-history/1";
    const path = `/api/locks/${encodeURIComponent(resource)}/history`;
    const events = async () => (await get<EventsPage>(lockHistoryRoute.GET, path, { resource })).body.events;
    await Promise.all(nodes.map((n) => n.set(resource, "relabel-token", "PX", 30_000)));
    await until("the acquisition in the history", async () => (await events()).some((e) => e.type === "acquired"));
    // Deleted on every node, as another console's force release does before its revocation arrives here.
    await Promise.all(nodes.map((n) => n.del(resource)));
    await until("the release written to the history", async () => (await events()).some((e) => e.type === "released"));
    const { getDeploymentLives } = await import("@/server/live");
    getDeploymentLives()[0]!.store.noteForceRelease(resource, { value: "relabel-token", actor: "carol", reason: "stuck after a deploy" });
    await service.getHistory()!.recorder.flush();
    const after = await events();
    expect(after.map((e) => [e.type, e.token])).toEqual([
      ["force-released", "relabel-token"],
      ["acquired", "relabel-token"],
    ]);
    expect(after[0]?.detail).toBe("by carol: “stuck after a deploy”");
    const held = await get<HoldsPage>(lockHistoryRoute.GET, `${path}?at=${Math.round((after[0]!.at + after[1]!.at) / 2)}`, { resource });
    expect(held.body.holds.map((h) => [h.token, h.endType])).toEqual([["relabel-token", "force-released"]]);
  });

  it("ends the holds whose end no console saw as unseen, and keeps those still held, too recent, or another deployment's", async () => {
    await Promise.all(nodes.map((n) => n.set("lock:unseen/held", "tok-held", "PX", 60_000)));
    const { getDeploymentLives } = await import("@/server/live");
    const live = getDeploymentLives()[0]!;
    await until("the held lock in the live view", () => Promise.resolve(live.store.holdsValue("lock:unseen/held", "tok-held")));
    // The live view's own record of the held lock first.
    await service.getHistory()!.recorder.flush();
    // As a console that was down when they ended would have left them: open, acquired minutes ago.
    const db = new pg.Client(url);
    await db.connect();
    try {
      await db.query(`INSERT INTO lock_holds_current (resource, deployment, token, acquired_at) VALUES
        ('lock:unseen/gone', 'default', 'tok-gone', now() - interval '2 minutes'),
        ('lock:unseen/held', 'default', 'tok-held', now() - interval '2 minutes'),
        ('lock:unseen/held', 'default', 'tok-held-before', now() - interval '3 minutes'),
        ('lock:unseen/recent', 'default', 'tok-recent', now() - interval '10 seconds'),
        ('lock:unseen/gone', 'cache', 'tok-gone', now() - interval '150 seconds')
        ON CONFLICT DO NOTHING`);
      await db.query("UPDATE lock_holds_current SET acquired_at = now() - interval '2 minutes' WHERE resource = 'lock:unseen/held' AND token = 'tok-held'");
      const checkedAt = Date.now();
      // These two, and whatever the earlier tests left open of locks not held now.
      expect(await live.endUnseenHolds()).toBeGreaterThanOrEqual(2);
      const holds = async (resource: string) =>
        (await get<HoldsPage>(historyRoute.GET, `/api/history?at=${checkedAt - 30_000}&resource=${encodeURIComponent(resource)}`)).body.holds.map((h) => [h.deployment, h.token, h.endType]);
      // Held at that time (the end is not known), ended since: each ended as unseen at the check.
      expect(await holds("lock:unseen/gone")).toEqual([["default", "tok-gone", "unseen"], ["cache", "tok-gone", null]]);
      expect(await holds("lock:unseen/held")).toEqual([["default", "tok-held", null], ["default", "tok-held-before", "unseen"]]);
      const ended = await db.query<{ ended_ms: string }>("SELECT (extract(epoch FROM ended_at) * 1000)::bigint AS ended_ms FROM lock_holds WHERE token = 'tok-gone'");
      expect(Number(ended.rows[0]?.ended_ms)).toBeGreaterThanOrEqual(checkedAt);
      const open = await db.query<{ token: string }>("SELECT token FROM lock_holds_current WHERE resource LIKE 'lock:unseen/%' ORDER BY token");
      expect(open.rows.map((r) => r.token)).toEqual(["tok-gone", "tok-held", "tok-recent"]);
      // Nothing more to end the next time.
      expect(await live.endUnseenHolds()).toBe(0);
    } finally {
      await db.end();
    }
  });

  it("deletes history older than the retention, in batches, and keeps the rest", async () => {
    const history = service.getHistory()!;
    const old = Date.now() - 8 * 86_400_000;
    for (let i = 0; i < 25; i++) history.recorder.record({ deployment: "default", at: old + i, resource: `lock:old/${i}`, type: "acquired", token: `old-${i}` });
    for (let i = 0; i < 25; i++) history.recorder.record({ deployment: "default", at: old + 100 + i, resource: `lock:old/${i}`, type: "released", token: `old-${i}` });
    history.recorder.record({ deployment: "default", at: Date.now(), resource: "lock:recent", type: "acquired", token: "recent" });
    await history.recorder.flush();
    const cutoff = Date.now() - 7 * 86_400_000;
    const count = async () => {
      const db = new pg.Client(url);
      await db.connect();
      try {
        const { rows } = await db.query<{ events: string; holds: string }>(
          "SELECT (SELECT count(*) FROM lock_events WHERE resource LIKE 'lock:old/%') AS events, (SELECT count(*) FROM lock_holds WHERE resource LIKE 'lock:old/%') AS holds",
        );
        return rows[0];
      } finally {
        await db.end();
      }
    };
    expect(await count()).toEqual({ events: "50", holds: "25" });
    // Ten rows per DELETE: the 75 take several batches. (The console's own hourly pass may have run first.)
    await history.store.prune(cutoff, 10);
    expect(await count()).toEqual({ events: "0", holds: "0" });
    const oldPage = await history.store.events({ limit: 10, filters: { to: cutoff } });
    expect(oldPage.events).toEqual([]);
    const recent = await history.store.events({ limit: 10, filters: { resource: "lock:recent" } });
    expect(recent.events.map((e) => e.token)).toEqual(["recent"]);
    expect(await history.store.prune(cutoff, 10)).toBe(0);
  });
});
