import "server-only";
import pg from "pg";
import { maskDatabaseUrl } from "@/lib/config";
import { getConfig } from "../config";
import { singleton } from "../global";
import { getLogger } from "../logger";
import { onShutdown } from "../shutdown";
import { migrate } from "./migrate";

export interface Database {
  pool: pg.Pool;
  /** The URL with its password masked: the only form that may be logged or shown. */
  display: string;
  /**
   * Resolves once the schema is current; retried on the next call after a failure (the database was down). A
   * migration may take minutes (another console's, or an index over a large table): a caller waits for it at most
   * `waitMs` (by default as long as a query may take; 0: until it is done), then fails as a database that did not
   * answer, while the migration goes on.
   */
  ready(waitMs?: number): Promise<void>;
}

/**
 * The schema is still being upgraded (by this console or another) after the caller's wait: coded as a server not yet
 * taking work (SQLSTATE 57P03, "cannot connect now"), so it counts as a database that did not answer: lock history
 * keeps its events for later, a release is refused and its entry recorded as refused once the database takes it.
 */
export class SchemaUpgradingError extends Error {
  readonly code = "57P03";
  constructor(waitMs: number) {
    super(`the database schema is being upgraded (a migration is running); not done after ${(waitMs / 1000).toFixed(1)} s`);
    this.name = "SchemaUpgradingError";
  }
}

/** How long a query may take before the console gives up on it (the release waits on the audit insert). */
const STATEMENT_TIMEOUT_MS = 5_000;

export function createDatabase(url: string, options: { max?: number; /** 0: no timeout (bulk loads). */ timeoutMs?: number } = {}): Database {
  const display = maskDatabaseUrl(url);
  const timeoutMs = options.timeoutMs ?? STATEMENT_TIMEOUT_MS;
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 5,
    connectionTimeoutMillis: 3_000,
    idleTimeoutMillis: 30_000,
    ...(timeoutMs > 0 ? { statement_timeout: timeoutMs, query_timeout: timeoutMs + 1_000 } : {}),
    application_name: "lockscope",
  });
  // An idle client's error (the server restarted) must not crash the process; the next query reconnects.
  pool.on("error", (error) => getLogger().warn({ database: display, err: error.message }, "audit database connection lost"));
  // A client checked out of the pool has no listener of the pool's: when the server goes away mid-query its
  // 'error' event would be unhandled and end the process. The query itself still rejects, and that is what
  // the caller acts on (a release answers 503); the pool drops the broken client when it is released.
  pool.on("connect", (client) => {
    client.on("error", (error) => getLogger().debug({ database: display, err: error.message }, "audit database connection lost while in use"));
  });
  let migrated: Promise<void> | null = null;
  let current = false;
  return {
    pool,
    display,
    ready(waitMs = timeoutMs) {
      const migrating =
        migrated ??
        migrate(pool).then(
          () => {
            current = true;
          },
          (error: unknown) => {
            migrated = null;
            throw error;
          },
        );
      migrated = migrating;
      if (current || waitMs <= 0) return migrating;
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new SchemaUpgradingError(waitMs)), waitMs);
        timer.unref();
        void migrating.then(resolve, reject).finally(() => clearTimeout(timer));
      });
    },
  };
}

/** The process's database, when AUDIT_DATABASE_URL is set. */
export function getDatabase(): Database | null {
  const url = getConfig().auditDatabaseUrl;
  if (url === null) return null;
  return singleton("audit-database", () => {
    const db = createDatabase(url);
    // Last among the audit's hooks: the history flush (42) and audit drain (30) still need it.
    onShutdown("audit-database", 45, () => db.pool.end());
    return db;
  });
}
