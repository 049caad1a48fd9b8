import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventsQuery, PostgresHistory } from "@/server/history/postgres";
import { createDatabase, type Database } from "@/server/postgres/pool";
import { startPostgres, type TestPostgres } from "../support/postgres";

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Rows Removed by Filter"?: number;
  Plans?: PlanNode[];
}

const removedByFilter = (node: PlanNode): number => (node["Rows Removed by Filter"] ?? 0) + (node.Plans ?? []).reduce((sum, p) => sum + removedByFilter(p), 0);

/**
 * `GET /api/history?deployment=…` lists one deployment's events. Where another deployment is busy, the query must not
 * read through the busy one's rows to find the quiet one's: at millions of events that ran past the database's
 * statement timeout, and the page answered 503 "Lock history cannot be read".
 */
describe("lock history: the events of one deployment among busier ones", () => {
  let server: TestPostgres;
  let db: Database;
  let history: PostgresHistory;
  const t0 = Date.parse("2026-03-01T00:00:00Z");

  beforeAll(async () => {
    server = await startPostgres();
    db = createDatabase(await server.createDatabase("deployments"));
    await db.ready(0);
    history = new PostgresHistory(db);
    // A quiet deployment's two events, then a busy one's 50,000 newer ones.
    await history.insert([
      { at: t0, resource: "lock:quiet", deployment: "quiet", type: "acquired", token: "q-1" },
      { at: t0 + 1_000, resource: "lock:quiet", deployment: "quiet", type: "released", token: "q-1" },
    ]);
    await db.pool.query(
      `INSERT INTO lock_events (at, resource, deployment, type, token)
       SELECT 'epoch'::timestamptz + ($1::bigint + i * 10) * interval '1 millisecond', 'lock:busy/' || (i % 100), 'busy', 'extended', 'b-' || i
       FROM generate_series(1, 50000) AS i`,
      [String(t0 + 60_000)],
    );
    await db.pool.query("ANALYZE lock_events");
  }, 120_000);

  afterAll(async () => {
    await db?.pool.end();
    await server?.close();
  });

  const explain = async (filters: Parameters<typeof eventsQuery>[0]["filters"]) => {
    const { sql, args } = eventsQuery({ limit: 100, filters });
    const { rows } = await db.pool.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, args);
    return rows[0]!["QUERY PLAN"][0]!.Plan;
  };

  it("finds them without reading the other deployment's rows", async () => {
    const page = await history.events({ limit: 100, filters: { deployment: "quiet" } });
    expect(page.events.map((e) => [e.type, e.token])).toEqual([
      ["released", "q-1"],
      ["acquired", "q-1"],
    ]);
    expect(removedByFilter(await explain({ deployment: "quiet" }))).toBe(0);
    expect(removedByFilter(await explain({ deployment: "quiet", from: t0, to: t0 + 86_400_000 }))).toBe(0);
  });
});
