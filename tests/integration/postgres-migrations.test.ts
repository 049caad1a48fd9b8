import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIGRATIONS } from "@/server/postgres/migrations";
import { migrate } from "@/server/postgres/migrate";
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
    expect(tables.rows.map((r) => r.tablename)).toEqual(["audit_entries", "lock_events", "lock_holds", "lockscope_migrations"]);
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
