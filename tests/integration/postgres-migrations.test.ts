import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PostgresHistory } from "@/server/history/postgres";
import { MIGRATIONS } from "@/server/postgres/migrations";
import { isDatabaseUnreachable } from "@/server/postgres/errors";
import { migrate, MIGRATION_LOCK_ID } from "@/server/postgres/migrate";
import { createDatabase } from "@/server/postgres/pool";
import { startPostgres, type TestPostgres } from "../support/postgres";

describe("PostgreSQL migrations", () => {
  let server: TestPostgres;
  const pools: pg.Pool[] = [];
  const pool = (url: string) => {
    const p = new pg.Pool({ connectionString: url, max: 2 });
    pools.push(p);
    return p;
  };

  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await server?.close();
  });

  it("applies every step once when four consoles start at once, and nothing on a later start", async () => {
    const url = await server.createDatabase("concurrent");
    const results = await Promise.all([pool(url), pool(url), pool(url), pool(url)].map((p) => migrate(p)));
    // Each step was applied by exactly one of them; the others waited on the advisory lock and found it done.
    expect(results.flat().sort()).toEqual(MIGRATIONS.map((m) => m.version));
    const { rows } = await pool(url).query<{ version: number; name: string }>("SELECT version, name FROM lockscope_migrations ORDER BY version");
    expect(rows).toEqual(MIGRATIONS.map((m) => ({ version: m.version, name: m.name })));
    expect(await migrate(pool(url))).toEqual([]);
    const tables = await pool(url).query<{ tablename: string }>("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename");
    expect(tables.rows.map((r) => r.tablename)).toEqual(["audit_entries", "history_deployments", "lock_events", "lock_holds", "lock_holds_current", "lockscope_migrations"]);
  });

  it("starts with a user that may only read and write the tables once the schema is current", async () => {
    const url = await server.createDatabase("least_privilege");
    const owner = pool(url);
    await migrate(owner);
    await owner.query("CREATE ROLE console LOGIN PASSWORD 'console-pw-123'");
    await owner.query("GRANT USAGE ON SCHEMA public TO console");
    await owner.query("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO console");
    const asConsole = pool(`postgres://console:console-pw-123@127.0.0.1:${server.port}/least_privilege`);
    // PostgreSQL 15 and later give nobody but the owner CREATE on `public`; make sure of it on older ones.
    await owner.query("REVOKE CREATE ON SCHEMA public FROM PUBLIC");
    expect(await migrate(asConsole)).toEqual([]);
    // With table privileges only, it records a hold and its end, and reads them back.
    const history = new PostgresHistory({ pool: asConsole, display: "least_privilege", ready: () => Promise.resolve() });
    const at = Date.parse("2026-03-01T03:00:00Z");
    await history.insert([{ at, resource: "lock:orders/1", deployment: "default", type: "acquired", token: "tok-1" }]);
    expect((await history.heldAt({ at: at + 1, limit: 10 })).holds.map((h) => [h.token, h.endedAt])).toEqual([["tok-1", null]]);
    await history.insert([{ at: at + 5, resource: "lock:orders/1", deployment: "default", type: "released", token: "tok-1" }]);
    expect((await history.heldAt({ at: at + 1, limit: 10 })).holds.map((h) => [h.token, h.endedAt])).toEqual([["tok-1", at + 5]]);
  });

  it("upgrades lock history recorded before deployments were named: its rows are `default`'s, and its open holds still end", async () => {
    const url = await server.createDatabase("upgraded");
    const p = pool(url);
    expect(await migrate(p, MIGRATIONS.filter((m) => m.version <= 3))).toEqual([1, 2, 3]);
    // As the previous version wrote them: two events and the hold they opened and closed, and a hold still open.
    await p.query(`INSERT INTO lock_events (at, resource, type, token) VALUES
      ('2026-03-01T03:00:00Z', 'lock:orders/1', 'acquired', 'tok-1'), ('2026-03-01T03:01:00Z', 'lock:orders/1', 'released', 'tok-1'),
      ('2026-03-01T03:02:00Z', 'lock:orders/2', 'acquired', 'tok-2')`);
    await p.query(`INSERT INTO lock_holds (resource, token, acquired_at, ended_at, end_type) VALUES
      ('lock:orders/1', 'tok-1', '2026-03-01T03:00:00Z', '2026-03-01T03:01:00Z', 'released'), ('lock:orders/2', 'tok-2', '2026-03-01T03:02:00Z', NULL, NULL)`);

    expect(await migrate(p)).toEqual(MIGRATIONS.filter((m) => m.version > 3).map((m) => m.version));
    const events = await p.query<{ resource: string; type: string; deployment: string }>("SELECT resource, type, deployment FROM lock_events ORDER BY at");
    expect(events.rows.map((r) => `${r.deployment}:${r.resource}:${r.type}`)).toEqual(["default:lock:orders/1:acquired", "default:lock:orders/1:released", "default:lock:orders/2:acquired"]);
    // The ended hold stays in lock_holds; the open one moved to lock_holds_current, each with its id.
    const ids = async (table: string) => (await p.query<{ id: string; resource: string; deployment: string }>(`SELECT id, resource, deployment FROM ${table} ORDER BY acquired_at`)).rows;
    expect(await ids("lock_holds")).toEqual([{ id: "1", resource: "lock:orders/1", deployment: "default" }]);
    expect(await ids("lock_holds_current")).toEqual([{ id: "2", resource: "lock:orders/2", deployment: "default" }]);

    const history = new PostgresHistory({ pool: p, display: "upgraded", ready: () => Promise.resolve() });
    const at = Date.parse("2026-03-01T03:05:00Z");
    const open = async () => (await history.heldAt({ at: at + 60_000, resource: "lock:orders/2", deployment: "default", limit: 10 })).holds;
    expect((await open()).map((h) => [h.deployment, h.token, h.endedAt])).toEqual([["default", "tok-2", null]]);
    // The same value of the same resource on another deployment is another lock: its end leaves the old hold open.
    await history.insert([{ at, resource: "lock:orders/2", deployment: "cache", type: "released", token: "tok-2" }]);
    expect((await open()).map((h) => h.endedAt)).toEqual([null]);
    await history.insert([{ at, resource: "lock:orders/2", deployment: "default", type: "released", token: "tok-2" }]);
    expect(await open()).toEqual([]);
    // It ended with the id it had; a hold acquired after the upgrade gets a new one.
    expect(await ids("lock_holds")).toEqual([{ id: "1", resource: "lock:orders/1", deployment: "default" }, { id: "2", resource: "lock:orders/2", deployment: "default" }]);
    await history.insert([{ at: at + 1, resource: "lock:orders/3", deployment: "default", type: "acquired", token: "tok-3" }]);
    expect(await ids("lock_holds_current")).toEqual([{ id: "3", resource: "lock:orders/3", deployment: "default" }]);
    const page = await history.events({ limit: 10, filters: { resource: "lock:orders/2", deployment: "default" } });
    expect(page.events.map((e) => `${e.deployment}:${e.type}`)).toEqual(["default:released", "default:acquired"]);

    // Every index that finds one lock's rows names its deployment.
    const indexes = await p.query<{ indexname: string; indexdef: string }>("SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN ('lock_events_resource_at', 'lock_holds_resource', 'lock_holds_current_value') ORDER BY indexname");
    expect(indexes.rows.map((r) => r.indexname)).toEqual(["lock_events_resource_at", "lock_holds_current_value", "lock_holds_resource"]);
    for (const r of indexes.rows) expect(r.indexdef).toMatch(/\((deployment, resource|resource, deployment), /);
  });

  it("applies a step that takes longer than the console's query timeout (an index built over a large table)", async () => {
    const url = await server.createDatabase("long_step");
    // The console's pool, with its query timeout cut to 300 ms; the step takes a second, as building an index over
    // millions of recorded events takes minutes where queries are given 5 s.
    const db = createDatabase(url, { timeoutMs: 300 });
    try {
      const steps = [...MIGRATIONS, { version: 98, name: "long", sql: "SELECT pg_sleep(1); CREATE TABLE long_done (x int)" }];
      expect(await migrate(db.pool, steps)).toEqual(steps.map((m) => m.version));
      // The pool's own queries keep their timeout.
      await expect(db.pool.query("SELECT pg_sleep(1)")).rejects.toThrow(/statement timeout|Query read timeout/);
    } finally {
      await db.pool.end();
    }
  });

  it("says the database did not answer while another console upgrades the schema, and is ready once it is done", async () => {
    const url = await server.createDatabase("upgrading");
    // Another console, mid-upgrade: it holds the migration lock.
    const other = new pg.Client(url);
    await other.connect();
    await other.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_ID.toString()]);
    const db = createDatabase(url, { timeoutMs: 300 });
    try {
      // A release or a history write waits no longer than a query would, and fails as "did not answer" (history keeps
      // its events for later; a release is refused, its entry recorded as refused once the database takes it).
      const waiting = await db.ready().then(
        () => null,
        (error: unknown) => error,
      );
      expect(waiting).toBeInstanceOf(Error);
      expect((waiting as Error).message).toMatch(/schema is being upgraded/);
      expect(isDatabaseUnreachable(waiting)).toBe(true);
      await other.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_ID.toString()]);
      await db.ready(0);
      const { rows } = await db.pool.query<{ version: number }>("SELECT max(version) AS version FROM lockscope_migrations");
      expect(rows[0]?.version).toBe(Math.max(...MIGRATIONS.map((m) => m.version)));
      await db.ready();
    } finally {
      await other.end();
      await db.pool.end();
    }
  });

    it("rolls a failing step back whole, records it not, and applies it once it is fixed", async () => {
    const url = await server.createDatabase("failing");
    const p = pool(url);
    const broken = [...MIGRATIONS, { version: 99, name: "broken", sql: "CREATE TABLE half_done (x int); SELECT no_such_function();" }];
    await expect(migrate(p, broken)).rejects.toThrow(/migration 99 \(broken\) failed/);
    const half = await p.query("SELECT 1 FROM pg_tables WHERE tablename = 'half_done'");
    expect(half.rowCount).toBe(0);
    const fixed = [...MIGRATIONS, { version: 99, name: "fixed", sql: "CREATE TABLE half_done (x int);" }];
    expect(await migrate(p, fixed)).toEqual([99]);
  });
});
