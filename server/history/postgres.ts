import "server-only";
import { createHash } from "node:crypto";
import { decodeHolder } from "@/lib/locks/merge";
import type { Database } from "../postgres/pool";
import type { HeldAtOptions, HistoryFilters, HistoryPage, HistoryStore, LockHistoryEvent, LockHold, StoredLockEvent } from "./types";

/** Events that happen once per hold: stored once however many consoles saw them (see `dedupKey`). */
const ONCE_PER_HOLD = new Set(["acquired", "released", "expired", "evicted", "force-released"]);
const ENDS = new Set(["released", "expired", "evicted", "force-released"]);
/**
 * Consoles see the same event a few milliseconds apart; events of one kind for one value of one lock (a
 * resource on a deployment) within this window are one. (A foreign client that writes the same value again later is a new hold.)
 */
const DEDUP_WINDOW_MS = 10_000;

/** A 63-bit key for an event that several consoles record; null for per-console entries (gaps, extensions). */
export function dedupKey(event: LockHistoryEvent): string | null {
  if (!ONCE_PER_HOLD.has(event.type) || !event.token) return null;
  const digest = createHash("sha256").update(`${event.deployment}\u0000${event.resource}\u0000${event.type}\u0000${event.token}\u0000${Math.floor(event.at / DEDUP_WINDOW_MS)}`).digest();
  return (digest.readBigInt64BE(0) & 0x7fffffffffffffffn).toString();
}

function holderText(token: string | null | undefined): { holder: string | null; fence: string | null } {
  const decoded = decodeHolder(token ?? null);
  const h = decoded.holder;
  if (!h) return { holder: null, fence: decoded.fence };
  const where = h.host !== undefined && h.pid !== undefined ? `${h.host}:${h.pid}` : (h.host ?? (h.pid !== undefined ? `pid ${h.pid}` : null));
  return { holder: [h.label, where].filter((p) => p !== undefined && p !== null).join(" @ ") || null, fence: decoded.fence };
}

/**
 * Text PostgreSQL stores (key names and values may hold anything): no NUL byte, and no lone UTF-16 surrogate
 * (JSON would carry it as an escape that PostgreSQL refuses).
 */
const clean = (text: string | null | undefined): string | null =>
  text === null || text === undefined ? null : text.replace(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\uFFFD");

/** Epoch ms to timestamptz and back, exactly (no floating point on the way). */
const TS = (param: string) => `('epoch'::timestamptz + ${param} * interval '1 millisecond')`;
const MS = (column: string) => `(extract(epoch FROM ${column}) * 1000)::bigint`;

export function parseCursor(cursor: string): { ms: string; id: string } {
  const [ms, id] = cursor.split("-");
  return { ms: ms ?? "0", id: id ?? "0" };
}

export const CURSOR_PATTERN = /^[0-9]{1,15}-[0-9]{1,19}$/;

/** Builds the SQL and its parameters with the next `$n` placeholder for each value. */
function params(first: unknown[] = []) {
  const args = [...first];
  return {
    args,
    arg: (value: unknown): string => {
      args.push(value);
      return `$${args.length}`;
    },
  };
}

/**
 * `deps(d)`: the deployments `table` has rows of one resource on, one probe of the (resource, deployment, …)
 * index each (a loose index scan: PostgreSQL before 18 has no skip scan). A query about a resource on every
 * deployment then reads each deployment's rows in index order, as for one lock, and merges the few it needs.
 */
function deploymentsOf(table: string, resource: string): string {
  return `WITH RECURSIVE deps(d) AS (
      SELECT min(deployment) FROM ${table} WHERE resource = ${resource}
      UNION ALL
      SELECT (SELECT min(deployment) FROM ${table} WHERE resource = ${resource} AND deployment > deps.d) FROM deps WHERE deps.d IS NOT NULL
    )`;
}

/** The events page query (exported for the benchmark's EXPLAIN). Newest first, one more row than asked to tell a next page. */
export function eventsQuery(options: { limit: number; before?: string; filters: HistoryFilters }): { sql: string; args: unknown[] } {
  const { limit, before, filters } = options;
  const { args, arg } = params();
  const where: string[] = [];
  const resource = filters.resource === undefined ? undefined : arg(filters.resource);
  const everyDeployment = resource !== undefined && filters.deployment === undefined;
  if (resource !== undefined) where.push(`resource = ${resource}`);
  if (filters.deployment !== undefined) where.push(`deployment = ${arg(filters.deployment)}`);
  if (everyDeployment) where.push("deployment = deps.d");
  if (filters.from !== undefined) where.push(`at >= ${TS(arg(String(filters.from)))}`);
  if (filters.to !== undefined) where.push(`at < ${TS(arg(String(filters.to)))}`);
  if (before) {
    const c = parseCursor(before);
    // Row comparison: the (resource, deployment, at, id) and (at, id) indexes serve it as one range.
    where.push(`(at, id) < (${TS(arg(c.ms))}, ${arg(c.id)}::bigint)`);
  }
  const limitArg = arg(limit + 1);
  const page = `SELECT id, ${MS("at")} AS at_ms, resource, deployment, type, node, token, holder, fence, detail FROM lock_events
     ${where.length ? `WHERE ${where.join(" AND ")}` : ""} ORDER BY at DESC, id DESC LIMIT ${limitArg}`;
  if (!everyDeployment) return { sql: page, args };
  // Each deployment's newest page of the resource, merged: the newest of them all.
  const sql = `${deploymentsOf("lock_events", resource)}
    SELECT e.* FROM deps CROSS JOIN LATERAL (${page}) e ORDER BY e.at_ms DESC, e.id DESC LIMIT ${limitArg}`;
  return { sql, args };
}

/** The held-at-T query (exported for the benchmark's EXPLAIN). */
export function heldAtQuery(options: HeldAtOptions): { sql: string; args: unknown[] } {
  const { at, resource, deployment, limit, before } = options;
  const { args, arg } = params([String(at)]);
  const cursor = before ? parseCursor(before) : null;
  const keyset = cursor ? `AND (acquired_at, id) < (${TS(arg(cursor.ms))}, ${arg(cursor.id)}::bigint)` : "";
  const columns = `id, resource, deployment, token, holder, fence, ${MS("acquired_at")} AS acquired_ms, ${MS("ended_at")} AS ended_ms, end_type`;
  if (resource !== undefined) {
    // One lock's holds hardly overlap: the latest few acquired by T, of which those still open at T. Asked of
    // a resource on every deployment, so for each deployment it has holds on (holds on two overlap freely).
    const r = arg(resource);
    const lock = deployment === undefined ? "deps.d" : arg(deployment);
    const latest = `SELECT ${columns}, ended_at FROM lock_holds WHERE resource = ${r} AND deployment = ${lock} AND acquired_at <= ${TS("$1")} ${keyset}
        ORDER BY acquired_at DESC, id DESC LIMIT ${arg(Math.max(limit + 1, 16))}`;
    const from = deployment === undefined ? `${deploymentsOf("lock_holds", r)} SELECT h.* FROM deps CROSS JOIN LATERAL (${latest}) h` : `SELECT * FROM (${latest}) h`;
    const sql = `${from} WHERE h.ended_at IS NULL OR h.ended_at > ${TS("$1")} ORDER BY h.acquired_ms DESC, h.id DESC LIMIT ${arg(limit + 1)}`;
    return { sql, args };
  }
  const only = deployment === undefined ? "" : `AND deployment = ${arg(deployment)}`;
  const sql = `SELECT ${columns} FROM lock_holds WHERE tstzrange(acquired_at, ended_at, '[)') @> ${TS("$1")} ${only} ${keyset}
      ORDER BY acquired_at DESC, id DESC LIMIT ${arg(limit + 1)}`;
  return { sql, args };
}

/** A `lock_events` row as read: the stored event's fields, its time as text. */
interface EventRow extends Omit<StoredLockEvent, "at"> {
  at_ms: string;
}

/** A `lock_holds` row as read: the hold's fields, its times as text. */
interface HoldRow extends Pick<LockHold, "id" | "resource" | "deployment" | "token" | "holder" | "fence"> {
  acquired_ms: string;
  ended_ms: string | null;
  end_type: string | null;
}

/**
 * Lock history in PostgreSQL: `lock_events` (every event, newest-first pages by lock or by time) and
 * `lock_holds` (one row per value from acquired to its end, for "who held it at T"), kept in step by
 * each batch's transaction. A lock is a resource on a deployment: every row names both.
 */
export class PostgresHistory implements HistoryStore {
  constructor(private readonly db: Database) {}

  async insert(events: readonly LockHistoryEvent[]): Promise<void> {
    if (events.length === 0) return;
    await this.db.ready();
    // One JSON parameter per statement, unpacked by PostgreSQL (`json_to_recordset`): node-postgres writes a
    // JavaScript array parameter as an array literal, escaping element by element in JavaScript, which at
    // 10,000 events a second took a tenth of a core of the console's event loop; JSON.stringify is native.
    const rows = events.map((e) => {
      const { holder, fence } = holderText(e.token);
      return { a: Math.trunc(e.at), r: clean(e.resource), dep: e.deployment, t: e.type, n: clean(e.node), tok: clean(e.token), h: clean(holder), f: fence, d: clean(e.detail), dd: dedupKey(e) };
    });
    const client = await this.db.pool.connect();
    let broken = false;
    try {
      await client.query("BEGIN");
      const inserted = await client.query<{ at_ms: string; resource: string; deployment: string; type: string; token: string | null; holder: string | null; fence: string | null }>(
        `INSERT INTO lock_events (at, resource, deployment, type, node, token, holder, fence, detail, dedup)
         SELECT ${TS("u.a")}, u.r, u.dep, u.t, u.n, u.tok, u.h, u.f, u.d, u.dd
         FROM json_to_recordset($1::json) AS u(a bigint, r text, dep text, t text, n text, tok text, h text, f text, d text, dd bigint)
         ON CONFLICT (dedup) WHERE dedup IS NOT NULL DO NOTHING
         RETURNING ${MS("at")} AS at_ms, resource, deployment, type, token, holder, fence`,
        [JSON.stringify(rows)],
      );
      // Holds follow the events this batch actually stored, so a second console's copy opens or closes nothing.
      const acquired = inserted.rows.filter((r) => r.type === "acquired" && r.token !== null);
      if (acquired.length > 0) {
        await client.query(
          `INSERT INTO lock_holds (resource, deployment, token, holder, fence, acquired_at)
           SELECT u.resource, u.deployment, u.token, u.holder, u.fence, ${TS("u.at_ms")}
           FROM json_to_recordset($1::json) AS u(resource text, deployment text, token text, holder text, fence text, at_ms bigint)
           ON CONFLICT (deployment, resource, md5(token)) WHERE ended_at IS NULL DO NOTHING`,
          [JSON.stringify(acquired)],
        );
      }
      const ended = inserted.rows.filter((r) => ENDS.has(r.type));
      if (ended.length > 0) {
        // An end without a known value closes the lock's open holds (on its own deployment only: the same
        // resource on another deployment is another lock). `greatest`: another console's clock
        // may put the end a moment before the acquisition, and a range cannot run backwards.
        await client.query(
          `UPDATE lock_holds h SET ended_at = greatest(${TS("u.at_ms")}, h.acquired_at), end_type = u.type
           FROM json_to_recordset($1::json) AS u(resource text, deployment text, token text, at_ms bigint, type text)
           WHERE h.ended_at IS NULL AND h.deployment = u.deployment AND h.resource = u.resource AND (u.token IS NULL OR md5(h.token) = md5(u.token))`,
          [JSON.stringify(ended)],
        );
      }
      await client.query("COMMIT");
    } catch (error) {
      broken = true;
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release(broken);
    }
  }

  async events(options: { limit: number; before?: string; filters: HistoryFilters }): Promise<HistoryPage> {
    const { sql, args } = eventsQuery(options);
    await this.db.ready();
    const { rows } = await this.db.pool.query<EventRow>(sql, args);
    const { limit } = options;
    const events: StoredLockEvent[] = rows.slice(0, limit).map((r) => ({
      id: `${r.at_ms}-${r.id}`,
      at: Number(r.at_ms),
      resource: r.resource,
      deployment: r.deployment,
      type: r.type,
      node: r.node,
      token: r.token,
      holder: r.holder,
      fence: r.fence,
      detail: r.detail,
    }));
    return { events, next: rows.length > limit ? (events.at(-1)?.id ?? null) : null };
  }

  async heldAt(options: HeldAtOptions): Promise<{ holds: LockHold[]; next: string | null }> {
    const { sql, args } = heldAtQuery(options);
    await this.db.ready();
    const { rows } = await this.db.pool.query<HoldRow>(sql, args);
    const { limit } = options;
    const holds: LockHold[] = rows.slice(0, limit).map((r) => ({
      id: `${r.acquired_ms}-${r.id}`,
      resource: r.resource,
      deployment: r.deployment,
      token: r.token,
      holder: r.holder,
      fence: r.fence,
      acquiredAt: Number(r.acquired_ms),
      endedAt: r.ended_ms === null ? null : Number(r.ended_ms),
      endType: r.end_type,
    }));
    return { holds, next: rows.length > limit ? (holds.at(-1)?.id ?? null) : null };
  }

  async prune(cutoff: number, batch = 10_000): Promise<number> {
    await this.db.ready();
    let total = 0;
    // Small batches: each DELETE is its own short transaction, so writers and readers never wait long.
    for (const sql of [
      `DELETE FROM lock_events WHERE id IN (SELECT id FROM lock_events WHERE at < ${TS("$1")} ORDER BY at LIMIT $2)`,
      `DELETE FROM lock_holds WHERE id IN (SELECT id FROM lock_holds WHERE ended_at < ${TS("$1")} LIMIT $2)`,
    ]) {
      for (;;) {
        const { rowCount } = await this.db.pool.query(sql, [String(cutoff), batch]);
        total += rowCount ?? 0;
        if ((rowCount ?? 0) < batch) break;
      }
    }
    return total;
  }
}
