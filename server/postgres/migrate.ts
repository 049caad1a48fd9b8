import "server-only";
import pg from "pg";
import { MIGRATIONS, type Migration } from "./migrations";

/**
 * The advisory lock every console takes while migrating, so two consoles starting at once never apply the
 * same step twice: the second waits, then finds the steps recorded. (A number of our own: "lockscope" in hex.)
 */
export const MIGRATION_LOCK_ID = 0x6c6f636b73636f70n;

/** Applies the steps not yet recorded, in order, each with its record in one transaction. Returns the versions applied. */
export async function migrate(pool: pg.Pool, steps: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  // A connection of its own, to the pool's server, without the pool's query timeouts: a step may build an index over
  // millions of recorded events (minutes, where a query is given seconds), and a console that starts while another
  // migrates waits on the advisory lock until it is done. (The pool keeps its password apart from its options.) TCP
  // keepalive instead: a server gone without a word (a host lost mid-step) still fails the step, and the next call
  // of `ready` tries again, rather than waiting on it for good.
  const client = new pg.Client({
    ...pool.options,
    password: pool.options.password,
    statement_timeout: undefined,
    query_timeout: undefined,
    keepAlive: true,
    keepAliveInitialDelayMillis: 30_000,
  });
  // The server going away mid-step rejects the step's query; the client's own 'error' event must not end the process.
  client.on("error", () => undefined);
  await client.connect();
  const applied: number[] = [];
  try {
    // Session-level lock on this connection: held across the steps' transactions, released below.
    await client.query("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_ID.toString()]);
    try {
      // Looked up first: CREATE … IF NOT EXISTS still needs the CREATE privilege, which a console whose
      // schema is current does not need.
      const exists = await client.query<{ found: string | null }>("SELECT to_regclass('lockscope_migrations')::text AS found");
      if (exists.rows[0]?.found == null) {
        await client.query(`CREATE TABLE lockscope_migrations (
          version    integer PRIMARY KEY,
          name       text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`);
      }
      const done = new Set((await client.query<{ version: number }>("SELECT version FROM lockscope_migrations")).rows.map((r) => r.version));
      for (const step of [...steps].sort((a, b) => a.version - b.version)) {
        if (done.has(step.version)) continue;
        await client.query("BEGIN");
        try {
          await client.query(step.sql);
          await client.query("INSERT INTO lockscope_migrations (version, name) VALUES ($1, $2)", [step.version, step.name]);
          await client.query("COMMIT");
          applied.push(step.version);
        } catch (error) {
          await client.query("ROLLBACK").catch(() => undefined);
          throw new Error(`migration ${step.version} (${step.name}) failed: ${(error as Error).message}`);
        }
      }
    } finally {
      await client.query("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_ID.toString()]).catch(() => undefined);
    }
    return applied;
  } finally {
    await client.end().catch(() => undefined);
  }
}
