import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startPostgres, type TestPostgres } from "../support/postgres";
import { until } from "../support/wait";

/**
 * Lock history and the audit log read from PostgreSQL by any viewer: a read that fails says whether the database did
 * not answer or refused the query, never the database's own words (its tables, columns, roles), which go to the
 * console's log for whoever runs it.
 */
describe("a failed read of lock history or the audit log (the real launcher, PostgreSQL)", () => {
  let server: TestPostgres;
  let url: string;
  let launcher: LauncherProcess;

  beforeAll(async () => {
    server = await startPostgres();
    url = await server.createDatabase("refused");
    launcher = await startLauncher({ REDIS_URLS: "", AUDIT_DATABASE_URL: url, LOG_LEVEL: "warn" });
  }, 300_000);
  afterAll(async () => {
    await launcher?.stop("SIGKILL");
    await server?.close();
  });

  const read = async (path: string) => {
    const res = await fetch(`${launcher.baseUrl}${path}`);
    return { status: res.status, message: ((await res.json()) as { error?: { message?: string } }).error?.message ?? "" };
  };

  it("tells a viewer the database refused the query, and leaves its error to the console's log", async () => {
    await until("both read once", async () => (await read("/api/history")).status === 200 && (await read("/api/audit")).status === 200, 60_000, 200);
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      await db.query("ALTER TABLE lock_events RENAME TO lock_events_moved; ALTER TABLE audit_entries RENAME TO audit_entries_moved");
    } finally {
      await db.end();
    }

    const history = await read("/api/history");
    expect(history.status).toBe(503);
    expect(history.message).toMatch(/^Lock history cannot be read: the database \(postgres(ql)?:\/\/[^)]*\) refused the query \(the console's log has its error\)\.$/);
    const audit = await read("/api/audit");
    expect(audit.status).toBe(503);
    expect(audit.message).toMatch(/^The audit log cannot be read: the audit database \(postgres(ql)?:\/\/[^)]*\) refused the query \(the console's log has its error\)\.$/);
    for (const message of [history.message, audit.message]) {
      expect(message).not.toMatch(/lock_events|audit_entries|relation|does not exist/);
      expect(message).not.toContain(server.password);
    }
    await until("the log has the database's error", () => launcher.output().includes('relation \\"lock_events\\" does not exist') && launcher.output().includes('relation \\"audit_entries\\" does not exist'), 10_000, 100);
    expect(launcher.output()).not.toContain(server.password);
  });

  it("tells a viewer the database did not answer when it is down", async () => {
    server.stop();
    try {
      const history = await read("/api/history");
      expect(history.status).toBe(503);
      expect(history.message).toMatch(/^Lock history cannot be read: the database \([^)]*\) did not answer\.$/);
    } finally {
      server.start();
    }
  });
});
