import { setUpConsole, tearDownConsole } from "./console";
import { startPostgres, type TestPostgres } from "./postgres";
import type { TestCluster } from "./redis";

/** A console that records lock history, as `setUpHistoryConsole` makes it. */
export interface HistoryConsole {
  /** The PostgreSQL of its own, started for the test file. */
  postgres: TestPostgres;
  /** The history database's URL (`AUDIT_DATABASE_URL`). */
  url: string;
  /** Its one lock node. */
  cluster: TestCluster;
  /** For `afterAll`: the console, its node and the PostgreSQL go. */
  tearDown(): Promise<void>;
}

/**
 * A console with lock history: a PostgreSQL of its own with a database `console`, one lock node (a 300 ms node
 * timeout), and the history database migrated and ready before this resolves.
 */
export async function setUpHistoryConsole(): Promise<HistoryConsole> {
  const postgres = await startPostgres();
  try {
    const url = await postgres.createDatabase("console");
    const cluster = await setUpConsole({ nodes: 1, env: { AUDIT_DATABASE_URL: url, LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
    await (await import("@/server/postgres/pool")).getDatabase()!.ready(0);
    return {
      postgres,
      url,
      cluster,
      tearDown: async () => {
        await tearDownConsole(cluster);
        await postgres.close();
      },
    };
  } catch (error) {
    await postgres.close();
    throw error;
  }
}
