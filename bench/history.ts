/**
 * Lock history benchmark (not a test): `npm run bench:history [-- --events 10000000] [-- --json]`.
 *
 * Starts its own PostgreSQL (initdb + pg_ctl in os.tmpdir(), a free port, never the machine's own server),
 * runs the console's migrations, then:
 * 1. times the console's own write path (`PostgresHistory.insert`, the batches the recorder sends) for
 *    200,000 events: acquired / extended / released per hold, holds kept in step;
 * 2. loads the synthetic rest up to `--events` (default 10,000,000) with multi-row INSERT … SELECT in
 *    chunks of 1,000,000 events (one hold = acquired, extended, released; 100,000 resources; 30 days),
 *    with every index in place, as a long-running deployment would have them;
 * 3. after ANALYZE, times each typical query 30 times with random parameters (median and p95), through the
 *    same SQL the routes run, and prints EXPLAIN's plan nodes to show which index serves it;
 * 4. times one retention batch (10,000 rows deleted).
 */
import { performance } from "node:perf_hooks";
import { createDatabase } from "../server/postgres/pool";
import { eventsQuery, heldAtQuery, PostgresHistory } from "../server/history/postgres";
import type { LockHistoryEvent } from "../server/history/types";
import { startPostgres } from "../tests/support/postgres";

const argv = process.argv.slice(2);
const JSON_OUT = argv.includes("--json");
const eventsFlag = argv.indexOf("--events");
const TOTAL = eventsFlag >= 0 ? Number(argv[eventsFlag + 1]) : 10_000_000;
if (!Number.isInteger(TOTAL) || TOTAL < 300_000) throw new TypeError(`Expected \`--events\` to be a whole number of at least 300000, got \`${argv[eventsFlag + 1]}\``);
const out = (line = "") => (JSON_OUT ? process.stderr : process.stdout).write(`${line}\n`);

const RESOURCES = 100_000;
const SPAN_MS = 30 * 86_400_000;
const WRITE_PATH_EVENTS = 200_000;
const CHUNK = 1_000_000;
const RUNS = 30;
const END = Date.parse("2026-01-31T00:00:00Z");
const START = END - SPAN_MS;

function stats(samples: number[]): { medianMs: number; p95Ms: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  return { medianMs: Number(at(0.5).toFixed(2)), p95Ms: Number(at(0.95).toFixed(2)) };
}

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  Plans?: PlanNode[];
}

function planNodes(node: PlanNode): string[] {
  const here = node["Index Name"] ? `${node["Node Type"]} using ${node["Index Name"]}` : node["Node Type"];
  return [here, ...(node.Plans ?? []).flatMap(planNodes)];
}

async function main(): Promise<void> {
  const server = await startPostgres();
  // Stopped however the run ends (Ctrl-C, a closed pipe): the server is ours, and must not outlive us.
  process.once("exit", () => void server.close());
  process.once("SIGINT", () => process.exit(130));
  const url = await server.createDatabase("bench");
  const db = createDatabase(url, { max: 4, timeoutMs: 0 });
  const history = new PostgresHistory(db);
  const results: Record<string, unknown> = { events: TOTAL };
  try {
    await db.ready();
    out(`PostgreSQL on 127.0.0.1:${server.port}; ${TOTAL.toLocaleString("en")} events, ${RESOURCES.toLocaleString("en")} resources over 30 days`);

    // 1. The console's write path.
    const batch: LockHistoryEvent[] = [];
    const writeStart = performance.now();
    for (let i = 0; i < WRITE_PATH_EVENTS / 3; i++) {
      const at = START + i;
      const resource = `lock:live/${i % 5_000}`;
      const token = `tok-live-${i}`;
      const deployment = "default";
      batch.push(
        { at, resource, deployment, type: "acquired", token },
        { at: at + 1, resource, deployment, type: "extended", token, detail: "by 10.0 s" },
        { at: at + 2, resource, deployment, type: "released", token },
      );
      if (batch.length >= 2_000) await history.insert(batch.splice(0));
    }
    if (batch.length) await history.insert(batch.splice(0));
    const writeMs = performance.now() - writeStart;
    results.writePath = { events: WRITE_PATH_EVENTS, seconds: Number((writeMs / 1000).toFixed(1)), eventsPerSecond: Math.round(WRITE_PATH_EVENTS / (writeMs / 1000)) };
    out(`write path (PostgresHistory.insert, 2,000 per batch): ${Math.round(WRITE_PATH_EVENTS / (writeMs / 1000)).toLocaleString("en")} events/s`);

    // 2. Bulk load: one hold = acquired, extended (at half), released (at its end); holds of 1-30 s.
    const holds = Math.floor((TOTAL - WRITE_PATH_EVENTS) / 3);
    const loadStart = performance.now();
    for (let first = 0; first < holds; first += CHUNK / 3) {
      const last = Math.min(holds, first + CHUNK / 3) - 1;
      const step = SPAN_MS / holds;
      const client = await db.pool.connect();
      try {
        await client.query("BEGIN");
        // Holds first, then their three events each, in time order as a live deployment writes them.
        await client.query(
          `INSERT INTO lock_holds (id, resource, token, holder, fence, acquired_at, ended_at, end_type)
           SELECT nextval(pg_get_serial_sequence('lock_holds_current', 'id')), 'lock:orders/' || (g % ${RESOURCES}), 'lk1:' || md5(g::text), 'checkout @ web-' || (g % 40) || ':' || (1000 + g % 977), (g / ${RESOURCES})::text,
                  'epoch'::timestamptz + (${START} + g * ${step})::bigint * interval '1 millisecond',
                  'epoch'::timestamptz + (${START} + g * ${step} + 1000 + (g % 29) * 1000)::bigint * interval '1 millisecond',
                  CASE WHEN g % 50 = 0 THEN 'expired' ELSE 'released' END
           FROM generate_series(${first}, ${last}) AS g`,
        );
        await client.query(
          `INSERT INTO lock_events (at, resource, type, token, holder, fence, detail, dedup)
           SELECT 'epoch'::timestamptz + (${START} + g * ${step} + k * (500 + (g % 29) * 500))::bigint * interval '1 millisecond',
                  'lock:orders/' || (g % ${RESOURCES}),
                  (ARRAY['acquired', 'extended', CASE WHEN g % 50 = 0 THEN 'expired' ELSE 'released' END])[k + 1],
                  'lk1:' || md5(g::text), 'checkout @ web-' || (g % 40) || ':' || (1000 + g % 977), (g / ${RESOURCES})::text,
                  CASE WHEN k = 1 THEN 'by 10.0 s' END,
                  CASE WHEN k <> 1 THEN ('x' || substr(md5(g::text || ':' || k), 1, 16))::bit(64)::bigint & 9223372036854775807 END
           FROM generate_series(${first}, ${last}) AS g, generate_series(0, 2) AS k
           ORDER BY g, k`,
        );
        await client.query("COMMIT");
      } finally {
        client.release();
      }
      out(`  loaded ${(((last + 1) * 3 + WRITE_PATH_EVENTS) / 1e6).toFixed(1)} M events (${((performance.now() - loadStart) / 1000).toFixed(0)} s)`);
    }
    const loadMs = performance.now() - loadStart;
    await db.pool.query("ANALYZE lock_events");
    await db.pool.query("ANALYZE lock_holds");
    const size = await db.pool.query<{ events: string; holds: string; bytes: string }>(
      "SELECT (SELECT count(*) FROM lock_events) AS events, (SELECT count(*) FROM lock_holds) AS holds, pg_total_relation_size('lock_events') + pg_total_relation_size('lock_holds') AS bytes",
    );
    const row = size.rows[0];
    results.load = {
      seconds: Number((loadMs / 1000).toFixed(0)),
      eventsPerSecond: Math.round((TOTAL - WRITE_PATH_EVENTS) / (loadMs / 1000)),
      eventRows: Number(row?.events),
      holdRows: Number(row?.holds),
      gigabytes: Number((Number(row?.bytes) / 1e9).toFixed(2)),
    };
    out(`bulk load: ${(loadMs / 1000).toFixed(0)} s; ${row?.events} events, ${row?.holds} holds, ${(Number(row?.bytes) / 1e9).toFixed(2)} GB with indexes`);

    // 3. Typical queries, through the routes' SQL.
    const rnd = (n: number) => Math.floor(Math.random() * n);
    const someResource = () => `lock:orders/${rnd(RESOURCES)}`;
    const someTime = () => START + 86_400_000 + rnd(SPAN_MS - 2 * 86_400_000);
    const deepCursor = async (resource: string) => {
      const page = await history.events({ limit: 50, filters: { resource, deployment: "default" } });
      return page.next ?? undefined;
    };
    const queries: Array<{ name: string; build: () => Promise<{ sql: string; args: unknown[] }> }> = [
      { name: "a lock's newest 100 events", build: () => Promise.resolve(eventsQuery({ limit: 100, filters: { resource: someResource(), deployment: "default" } })) },
      {
        name: "a lock's next page (keyset)",
        build: async () => {
          const resource = someResource();
          return eventsQuery({ limit: 100, before: await deepCursor(resource), filters: { resource, deployment: "default" } });
        },
      },
      {
        name: "all locks, one hour, newest 100",
        build: () => {
          const t = someTime();
          return Promise.resolve(eventsQuery({ limit: 100, filters: { from: t, to: t + 3_600_000 } }));
        },
      },
      { name: "who held a lock at T", build: () => Promise.resolve(heldAtQuery({ at: someTime(), resource: someResource(), deployment: "default", limit: 10 })) },
      { name: "every lock held at T (100)", build: () => Promise.resolve(heldAtQuery({ at: someTime(), limit: 100 })) },
    ];
    const timings: Record<string, unknown> = {};
    for (const q of queries) {
      const samples: number[] = [];
      let plan: string[] = [];
      for (let i = 0; i < RUNS; i++) {
        const { sql, args } = await q.build();
        if (i === 0) {
          const explained = await db.pool.query<{ "QUERY PLAN": Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${sql}`, args);
          const top = explained.rows[0]?.["QUERY PLAN"][0]?.Plan;
          plan = top ? planNodes(top) : [];
        }
        const t = performance.now();
        await db.pool.query(sql, args);
        samples.push(performance.now() - t);
      }
      timings[q.name] = { ...stats(samples), plan };
      const s = stats(samples);
      out(`${q.name.padEnd(36)} median ${s.medianMs} ms  p95 ${s.p95Ms} ms  plan: ${plan.join(" > ")}`);
    }
    results.queries = timings;

    // 4. One retention batch.
    const cutoff = START + 86_400_000;
    const t = performance.now();
    const { rowCount } = await db.pool.query(
      "DELETE FROM lock_events WHERE id IN (SELECT id FROM lock_events WHERE at < ('epoch'::timestamptz + $1 * interval '1 millisecond') ORDER BY at LIMIT 10000)",
      [String(cutoff)],
    );
    const pruneMs = performance.now() - t;
    results.retentionBatch = { rows: rowCount, ms: Number(pruneMs.toFixed(1)) };
    out(`retention: one batch of ${rowCount} rows deleted in ${pruneMs.toFixed(1)} ms`);
    if (JSON_OUT) process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
  } finally {
    await db.pool.end();
    await server.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
