import "server-only";
import { createHash } from "node:crypto";
import { lockValueId } from "@lockscope/redlock";
import { decodeHolder } from "@/lib/locks/merge";
import { storedText } from "@/lib/history/stored-text";
import type { TimelineType } from "@/lib/locks/types";
import type { Database } from "../postgres/pool";
import type { HeldAtOptions, HistoryFilters, HistoryPage, HistoryStore, LockHistoryEvent, LockHold, OpenHold, StoredLockEvent } from "./types";

/** Events that happen once per hold: stored once however many consoles saw them (see `dedupKeys`). */
const ONCE_PER_HOLD = new Set(["acquired", "holders", "released", "expired", "evicted", "force-released", "lost"]);
const ENDS = new Set(["released", "expired", "evicted", "force-released", "lost"]);
/**
 * An end one console knew more of than another (it made the force release, or saw the failover lose the lock): the
 * ends its word corrects, as the live view corrects its own timeline (`relabelForced`, `relabelLost`).
 */
const CORRECTS: Readonly<Record<string, readonly TimelineType[]>> = Object.freeze({ "force-released": ["released", "expired", "lost"], lost: ["released"] });
/**
 * Consoles see the same event a few milliseconds apart (or their clocks differ by as much): events of one kind for
 * one value of one lock (a resource on a deployment) in the same window of this length are one, unless a hold of
 * that value ended between them (see `HoldBursts`): a value taken again is a new hold.
 */
const DEDUP_WINDOW_MS = 10_000;

/**
 * The value an event several consoles record is about (an engine-made value by its acquisition id, with or without
 * the fence it is rewritten with); null for one only this console records (an extension, a gap, an end of no
 * known value).
 */
function holdValue(event: LockHistoryEvent): string | null {
  if (!ONCE_PER_HOLD.has(event.type) || !event.token) return null;
  return lockValueId(event.token) ?? event.token;
}

/** A text's 63-bit key (a `bigint` column's positive range), as the dedup columns hold them. */
function keyOf(text: string): string {
  return (createHash("sha256").update(text).digest().readBigInt64BE(0) & 0x7fffffffffffffffn).toString();
}

/**
 * Which hold of its value an event is about, counted as every console that sees the same events counts it: the
 * holds of that value on that lock that ended before it in a burst (events of the value each at most
 * `DEDUP_WINDOW_MS` after the one before). A Redisson holder's value is its client and thread, so the thread's next
 * job takes the lock with the value it just released, often within a second: without this its acquisition and end
 * fell in the window of the hold before and were taken for copies of them, and the hold was never recorded. Events
 * of one value in different bursts are more than a window apart, so they never share one.
 */
class HoldBursts {
  private readonly bursts = new Map<string, { ends: number; lastAt: number }>();
  /** What each event was counted as, so a batch written again (after a failed write) is counted the same. */
  private readonly counted = new WeakMap<LockHistoryEvent, number>();
  private sweptAt = Number.NEGATIVE_INFINITY;

  of(event: LockHistoryEvent): number {
    const known = this.counted.get(event);
    if (known !== undefined) return known;
    let ended = 0;
    const value = holdValue(event);
    if (value !== null) {
      const key = `${event.deployment}\u0000${event.resource}\u0000${value}`;
      const burst = this.bursts.get(key);
      if (burst !== undefined && event.at - burst.lastAt <= DEDUP_WINDOW_MS) {
        ended = burst.ends;
        burst.lastAt = Math.max(burst.lastAt, event.at);
        if (ENDS.has(event.type)) burst.ends += 1;
      } else if (ENDS.has(event.type)) {
        this.bursts.set(key, { ends: 1, lastAt: event.at });
      } else if (burst !== undefined) {
        this.bursts.delete(key);
      }
      this.sweep(event.at);
    }
    this.counted.set(event, ended);
    return ended;
  }

  /** Bursts over (nothing of their value for a window) are let go, a pass every window. */
  private sweep(now: number): void {
    if (now - this.sweptAt < DEDUP_WINDOW_MS) return;
    this.sweptAt = now;
    for (const [key, burst] of this.bursts) if (now - burst.lastAt > DEDUP_WINDOW_MS) this.bursts.delete(key);
  }
}

/**
 * Two 63-bit keys for an event that several consoles record (each unique in the table: a second console's copy
 * conflicts and is not stored); null for per-console entries (gaps, extensions: see `exactKey`). The first names the event's
 * 10 s window, the second the same windows shifted by half of one: two sightings under 5 s apart are in one
 * window of at least one of the two, whichever window mark lies between them. A hold has one end, whatever each
 * console took it for (a release here, the force release it was on the console that made it): every kind of end
 * has the same keys.
 */
export function dedupKeys(event: LockHistoryEvent, endedBefore = 0): [string, string] | null {
  const value = holdValue(event);
  if (value === null) return null;
  const kind = ENDS.has(event.type) ? "end" : event.type;
  // (The first hold of a burst keys as before holds were counted.)
  const hold = endedBefore > 0 ? `\u0000${endedBefore}` : "";
  const key = (window: number) => keyOf(`${event.deployment}\u0000${event.resource}\u0000${kind}\u0000${value}\u0000${window}${hold}`);
  // The second key's windows are numbered apart from the first's (a key is unique within its own column anyway).
  return [key(Math.floor(event.at / DEDUP_WINDOW_MS)), key(-1 - Math.floor((event.at + DEDUP_WINDOW_MS / 2) / DEDUP_WINDOW_MS))];
}

/**
 * The key of an event only this console records (an extension, a gap; an end of no known value): its every field,
 * to the millisecond. Another console's copy differs in time, and is stored as its own; the same batch written
 * again is not (a write whose COMMIT went through but whose answer was lost is retried whole).
 */
export function exactKey(event: LockHistoryEvent): string {
  return keyOf(`exact\u0000${JSON.stringify([event.deployment, event.resource, event.type, event.token ?? null, Math.trunc(event.at), event.node ?? null, event.detail ?? null])}`);
}

function holderText(token: string | null | undefined): { holder: string | null; fence: string | null } {
  const decoded = decodeHolder(token ?? null);
  const h = decoded.holder;
  if (!h) return { holder: null, fence: decoded.fence };
  const where = h.host !== undefined && h.pid !== undefined ? `${h.host}:${h.pid}` : (h.host ?? (h.pid !== undefined ? `pid ${h.pid}` : null));
  return { holder: [h.label, where].filter((p) => p !== undefined && p !== null).join(" @ ") || null, fence: decoded.fence };
}

/**
 * The start of an engine-made value up to its id (`lk1:<id>:`), null for a foreign value. A fenced acquisition
 * writes its value without the fence, then the same id with it: a hold recorded with one is ended (and corrected)
 * by an end recorded with the other.
 */
function acquisitionPrefix(token: string | null): string | null {
  const id = token === null ? null : lockValueId(token);
  return token === null || id === null ? null : token.slice(0, token.indexOf(id) + id.length + 1);
}

/** Whether `column` holds the value `u.tok`, or (`u.pre`) the same acquisition of an engine-made one. */
const sameValue = (column: string) => `(u.tok IS NULL OR md5(${column}) = md5(u.tok) OR left(${column}, length(u.pre)) = u.pre)`;

/** Epoch ms to timestamptz and back, exactly (no floating point on the way). */
const TS = (param: string) => `('epoch'::timestamptz + ${param} * interval '1 millisecond')`;
const MS = (column: string) => `(extract(epoch FROM ${column}) * 1000)::bigint`;

export function parseCursor(cursor: string): { ms: string; id: string } {
  const [ms, id] = cursor.split("-");
  return { ms: ms ?? "0", id: id ?? "0" };
}

// An id of up to 18 digits: every one fits PostgreSQL's bigint (19 digits may not: a 400, not the database's error).
export const CURSOR_PATTERN = /^[0-9]{1,15}-[0-9]{1,18}$/;

/** Builds the SQL and its parameters with the next `$n` placeholder for each value. */
function params(first: unknown[] = []) {
  const args = [...first];
  return {
    args,
    // Text is looked up as it was stored (`storedText`: a NUL, which PostgreSQL refuses, as U+FFFD).
    arg: (value: unknown): string => {
      args.push(typeof value === "string" ? storedText(value) : value);
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

/** The held-at-T query (exported for the benchmark's EXPLAIN): ended holds from `lock_holds`, open ones from `lock_holds_current`. */
export function heldAtQuery(options: HeldAtOptions): { sql: string; args: unknown[] } {
  const { at, resource, deployment, limit, before } = options;
  const { args, arg } = params([String(at)]);
  const cursor = before ? parseCursor(before) : null;
  const keyset = cursor ? `AND (acquired_at, id) < (${TS(arg(cursor.ms))}, ${arg(cursor.id)}::bigint)` : "";
  const columns = `id, resource, deployment, token, holder, fence, ${MS("acquired_at")} AS acquired_ms`;
  const ended = `${columns}, ${MS("ended_at")} AS ended_ms, end_type`;
  const open = `${columns}, NULL::bigint AS ended_ms, NULL::text AS end_type`;
  const page = arg(limit + 1);
  if (resource !== undefined) {
    // Of its ended holds, those whose span holds T, however many of the lock's later holds were acquired by T: one
    // hold can outlast many others (a semaphore's long permit, a hold whose end was only learnt later). Either index
    // serves it: the lock's own holds back from T, or the holds of every lock around T (the range index). Asked of a
    // resource on every deployment, so for each deployment it has holds on. Its open holds are few: every one
    // acquired by T.
    const r = arg(resource);
    const lock = deployment === undefined ? "deps.d" : arg(deployment);
    const latest = `SELECT ${ended} FROM lock_holds WHERE resource = ${r} AND deployment = ${lock} AND acquired_at <= ${TS("$1")}
        AND tstzrange(acquired_at, ended_at, '[)') @> ${TS("$1")} ${keyset}
        ORDER BY acquired_at DESC, id DESC LIMIT ${page}`;
    const endedHolds =
      deployment === undefined ? `${deploymentsOf("lock_holds", r)} SELECT h.* FROM deps CROSS JOIN LATERAL (${latest}) h` : `SELECT * FROM (${latest}) h`;
    const openHolds = `SELECT ${open} FROM lock_holds_current WHERE resource = ${r} ${deployment === undefined ? "" : `AND deployment = ${lock}`} AND acquired_at <= ${TS("$1")} ${keyset}`;
    const sql = `SELECT * FROM (
        SELECT id, resource, deployment, token, holder, fence, acquired_ms, ended_ms, end_type FROM (${endedHolds}) x
        UNION ALL ${openHolds}
      ) held ORDER BY acquired_ms DESC, id DESC LIMIT ${page}`;
    return { sql, args };
  }
  const only = deployment === undefined ? "" : `AND deployment = ${arg(deployment)}`;
  const sql = `SELECT * FROM (
      (SELECT ${ended} FROM lock_holds WHERE tstzrange(acquired_at, ended_at, '[)') @> ${TS("$1")} ${only} ${keyset}
        ORDER BY acquired_at DESC, id DESC LIMIT ${page})
      UNION ALL
      (SELECT ${open} FROM lock_holds_current WHERE acquired_at <= ${TS("$1")} ${only} ${keyset}
        ORDER BY acquired_at DESC, id DESC LIMIT ${page})
    ) held ORDER BY acquired_ms DESC, id DESC LIMIT ${page}`;
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
 * Ends holds: each moves from lock_holds_current to lock_holds. An end without a known value (`tok` null) ends
 * the lock's open holds (on its own deployment only: the same resource on another deployment is another lock),
 * but the one of value `but` where given (a holder set's change: every set but the new one ends).
 * Each end finds its holds by one index lookup (the lateral subquery, kept a nested loop by OFFSET 0, whatever
 * the statistics say). `greatest`: another console's clock may put the end a moment before the acquisition,
 * and a range cannot run backwards. Returns the holds ended.
 */
async function endHolds(
  client: Queryable,
  ends: ReadonlyArray<{ r: string | null; dep: string; tok: string | null; but?: string | null; h?: string | null; f?: string | null; a: number; t: string }>,
): Promise<number> {
  // A hold recorded with a fenced acquisition's value before its fence ends as the lock ended: with the value (and
  // so the holder and fence) its end was recorded with.
  const { rowCount } = await client.query(
    `WITH e AS MATERIALIZED (
       SELECT c.ctid AS row, u.a, u.t, u.tok, u.h, u.f
       FROM json_to_recordset($1::json) AS u(r text, dep text, tok text, pre text, but text, h text, f text, a bigint, t text)
       CROSS JOIN LATERAL (
         SELECT ctid FROM lock_holds_current
         WHERE resource = u.r AND deployment = u.dep AND ${sameValue("token")} AND (u.but IS NULL OR md5(token) <> md5(u.but))
         OFFSET 0
       ) c
     ), gone AS (
       DELETE FROM lock_holds_current c USING e WHERE c.ctid = e.row
       RETURNING c.id, c.resource, c.deployment, c.token, c.holder, c.fence, c.acquired_at, e.a, e.t,
         (e.tok IS NOT NULL AND e.tok <> c.token) AS rewritten, e.tok AS end_token, e.h AS end_holder, e.f AS end_fence
     )
     INSERT INTO lock_holds (id, resource, deployment, token, holder, fence, acquired_at, ended_at, end_type)
     SELECT id, resource, deployment, CASE WHEN rewritten THEN end_token ELSE token END, CASE WHEN rewritten THEN end_holder ELSE holder END,
       CASE WHEN rewritten THEN end_fence ELSE fence END, acquired_at, greatest(${TS("a")}, acquired_at), t FROM gone`,
    [JSON.stringify(ends.map((e) => ({ ...e, pre: acquisitionPrefix(e.tok) })))],
  );
  return rowCount ?? 0;
}

/**
 * Corrects recorded ends: the end event of each value (whichever console's copy was stored, within the dedup
 * window of its time) and its hold's end type become what the end turned out to be.
 */
async function relabelEnds(client: Queryable, relabels: ReadonlyArray<{ r: string | null; dep: string; tok: string | null; a: number; t: string; was: string; d: string | null }>): Promise<void> {
  const args = [JSON.stringify(relabels.map((r) => ({ ...r, pre: acquisitionPrefix(r.tok) }))), DEDUP_WINDOW_MS];
  const matches = (table: string, type: string, at: string) =>
    `${table}.resource = u.r AND ${table}.deployment = u.dep AND ${sameValue(`${table}.token`)} AND ${table}.${type} = u.was
     AND ${table}.${at} BETWEEN ${TS("(u.a - $2::bigint)")} AND ${TS("(u.a + $2::bigint)")}`;
  const u = "json_to_recordset($1::json) AS u(r text, dep text, tok text, pre text, a bigint, t text, was text, d text)";
  await client.query(`UPDATE lock_events SET type = u.t, detail = u.d FROM ${u} WHERE ${matches("lock_events", "type", "at")}`, args);
  await client.query(`UPDATE lock_holds SET end_type = u.t FROM ${u} WHERE ${matches("lock_holds", "end_type", "ended_at")}`, args);
}

/** A stored event as `insert` writes it: the fields the holds need. */
interface HoldEvent {
  r: string | null;
  dep: string;
  t: string;
  tok: string | null;
}

/**
 * The batch's acquisitions and ends in steps, each written as its acquisitions, then its ends, so that holds open
 * and end in the order their events happened. One step in the usual batch; a new one starts where an event follows
 * an end it must come after: the same value acquired again or ended again (a value comes back: a Redisson holder is
 * its client and thread), or any value of a lock an end of no known value, or a holder set's change, ended (it
 * ends all of them). A batch
 * written after the database was down may span minutes of one lock's life.
 */
function holdSteps<E extends HoldEvent>(events: readonly E[]): Array<{ acquired: E[]; ended: E[] }> {
  const steps: Array<{ acquired: E[]; ended: E[] }> = [];
  let step: { acquired: E[]; ended: E[] } = { acquired: [], ended: [] };
  let endedValues = new Set<string>();
  let endedLocks = new Set<string>();
  let endedWhole = new Set<string>();
  for (const e of events) {
    // A holder set's change (a semaphore's holders joining or leaving) ends the hold of the set before and opens
    // one of the set it changed to (its value): both at once, as an end of the lock's other values.
    const changes = e.t === "holders" && e.tok !== null;
    const acquires = (e.t === "acquired" || changes) && e.tok !== null;
    const ends = ENDS.has(e.t) || changes;
    if (!acquires && !ends) continue;
    const lock = `${e.dep}\u0000${e.r ?? ""}`;
    const value = `${lock}\u0000${e.tok ?? ""}`;
    const after = endedWhole.has(lock) || (e.tok === null || changes ? endedLocks.has(lock) : endedValues.has(value));
    if (after) {
      steps.push(step);
      step = { acquired: [], ended: [] };
      endedValues = new Set();
      endedLocks = new Set();
      endedWhole = new Set();
    }
    if (acquires) step.acquired.push(e);
    if (!ends) continue;
    step.ended.push(e);
    endedLocks.add(lock);
    if (e.tok === null || changes) endedWhole.add(lock);
    else endedValues.add(value);
  }
  if (step.acquired.length > 0 || step.ended.length > 0) steps.push(step);
  return steps;
}

/** What `endHolds` needs of a client or a pool. */
interface Queryable {
  query(sql: string, args: unknown[]): Promise<{ rowCount: number | null }>;
}

/**
 * Lock history in PostgreSQL: `lock_events` (every event, newest-first pages by lock or by time) and the
 * holds (one row per value from acquired to its end, for "who held it at T": `lock_holds_current` while it is
 * open, `lock_holds` once it ended), kept in step by each batch's transaction. A lock is a resource on a
 * deployment: every row names both.
 */
export class PostgresHistory implements HistoryStore {
  private readonly bursts = new HoldBursts();

  constructor(private readonly db: Database) {}

  async insert(events: readonly LockHistoryEvent[]): Promise<void> {
    if (events.length === 0) return;
    await this.db.ready();
    // One JSON parameter per statement, unpacked by PostgreSQL (`json_to_recordset`): node-postgres writes a
    // JavaScript array parameter as an array literal, escaping element by element in JavaScript, which at
    // 10,000 events a second took a tenth of a core of the console's event loop; JSON.stringify is native.
    const rows = events.flatMap((e) => {
      if (e.relabels !== undefined) return [];
      const { holder, fence } = holderText(e.token);
      const keys = dedupKeys(e, this.bursts.of(e));
      return [{ a: Math.trunc(e.at), r: storedText(e.resource), dep: e.deployment, t: e.type, n: storedText(e.node), tok: storedText(e.token), h: storedText(holder), f: fence, d: storedText(e.detail), dd: keys?.[0] ?? exactKey(e), dd2: keys?.[1] ?? null }];
    });
    // Corrections of ends already recorded (in this batch or an earlier one): applied after this batch's rows.
    const relabels = events.flatMap((e) => (e.relabels === undefined ? [] : [{ a: Math.trunc(e.at), r: storedText(e.resource), dep: e.deployment, t: e.type, was: e.relabels, tok: storedText(e.token), d: storedText(e.detail) }]));
    const client = await this.db.pool.connect();
    let broken = false;
    try {
      await client.query("BEGIN");
      // Only the dedup keys come back: an event with a key that did not come back was another console's copy, or
      // this batch's own stored by a write whose answer was lost.
      // (No conflict target: a conflict on either key's unique index skips the row.)
      const inserted = rows.length === 0 ? { rows: [] } : await client.query<{ dd: string | null }>(
        `INSERT INTO lock_events (at, resource, deployment, type, node, token, holder, fence, detail, dedup, dedup2)
         SELECT ${TS("u.a")}, u.r, u.dep, u.t, u.n, u.tok, u.h, u.f, u.d, u.dd, u.dd2
         FROM json_to_recordset($1::json) AS u(a bigint, r text, dep text, t text, n text, tok text, h text, f text, d text, dd bigint, dd2 bigint)
         ON CONFLICT DO NOTHING
         RETURNING dedup::text AS dd`,
        [JSON.stringify(rows)],
      );
      const kept = new Set<string>();
      for (const r of inserted.rows) if (r.dd !== null) kept.add(r.dd);
      // Holds follow the events this batch actually stored, so a second console's copy (or this batch's own, written
      // before) opens or closes nothing.
      const stored = rows.filter((r) => kept.has(r.dd));
      // An end another console stored first, as less than this one knew (a release that was a force release):
      // corrected, as that console does once it learns (the copy this console did not store says what it was).
      for (const r of rows) {
        if (kept.has(r.dd)) continue;
        for (const was of CORRECTS[r.t] ?? []) relabels.push({ a: r.a, r: r.r, dep: r.dep, t: r.t, was, tok: r.tok, d: r.d });
      }
      for (const { acquired, ended } of holdSteps(stored)) {
        if (acquired.length > 0) {
          await client.query(
            `INSERT INTO lock_holds_current (resource, deployment, token, holder, fence, acquired_at)
             SELECT u.r, u.dep, u.tok, u.h, u.f, ${TS("u.a")}
             FROM json_to_recordset($1::json) AS u(r text, dep text, tok text, h text, f text, a bigint)
             ON CONFLICT (resource, deployment, md5(token)) DO NOTHING`,
            [JSON.stringify(acquired.map((r) => ({ r: r.r, dep: r.dep, tok: r.tok, h: r.h, f: r.f, a: r.a })))],
          );
        }
        if (ended.length > 0) {
          await endHolds(
            client,
            ended.map((r) => (r.t === "holders" ? { r: r.r, dep: r.dep, tok: null, but: r.tok, a: r.a, t: r.t } : { r: r.r, dep: r.dep, tok: r.tok, h: r.h, f: r.f, a: r.a, t: r.t })),
          );
        }
      }
      if (relabels.length > 0) await relabelEnds(client, relabels);
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

  async openHolds(options: { deployment: string; acquiredBefore: number; after: string | null; limit: number }): Promise<OpenHold[]> {
    await this.db.ready();
    const { deployment, acquiredBefore, after, limit } = options;
    // By resource, through the (resource, deployment, md5(token)) index; the last resource's other holds (a
    // page may end among them) are read whole, so the next page starts after it.
    const { rows } = await this.db.pool.query<OpenHold>(
      `SELECT resource, token FROM lock_holds_current WHERE deployment = $1 AND acquired_at < ${TS("$2")} AND ($3::text IS NULL OR resource > $3) ORDER BY resource LIMIT $4`,
      [deployment, String(acquiredBefore), after, limit],
    );
    const last = rows.at(-1)?.resource;
    if (rows.length < limit || last === undefined) return rows;
    const rest = await this.db.pool.query<OpenHold>(`SELECT resource, token FROM lock_holds_current WHERE deployment = $1 AND acquired_at < ${TS("$2")} AND resource = $3`, [
      deployment,
      String(acquiredBefore),
      last,
    ]);
    return [...rows.filter((h) => h.resource !== last), ...rest.rows];
  }

  async endUnseen(deployment: string, holds: readonly OpenHold[], at: number): Promise<number> {
    if (holds.length === 0) return 0;
    await this.db.ready();
    return endHolds(
      this.db.pool,
      holds.map((h) => ({ r: h.resource, dep: deployment, tok: h.token, a: Math.trunc(at), t: "unseen" })),
    );
  }

  async markWatched(deployments: readonly string[], at: number): Promise<void> {
    if (deployments.length === 0) return;
    await this.db.ready();
    await this.db.pool.query(
      `INSERT INTO history_deployments (name, watched_at) SELECT name, ${TS("$2")} FROM unnest($1::text[]) AS d(name)
       ON CONFLICT (name) DO UPDATE SET watched_at = greatest(history_deployments.watched_at, excluded.watched_at)`,
      [[...new Set(deployments)], String(Math.trunc(at))],
    );
  }

  async endUnwatched(watchedBefore: number, now: number, batch = 10_000): Promise<number> {
    await this.db.ready();
    // Holds a console of an earlier version opened for a deployment it did not note: watched now, as far as is known.
    await this.db.pool.query(
      `INSERT INTO history_deployments (name, watched_at) SELECT DISTINCT deployment, ${TS("$1")} FROM lock_holds_current ON CONFLICT (name) DO NOTHING`,
      [String(Math.trunc(now))],
    );
    let total = 0;
    // In batches, each its own short transaction, like the retention's.
    for (;;) {
      const { rowCount } = await this.db.pool.query(
        `WITH stale AS (
           SELECT c.ctid AS row, d.watched_at FROM lock_holds_current c JOIN history_deployments d ON d.name = c.deployment
           WHERE d.watched_at < ${TS("$1")} LIMIT $2
         ), gone AS (
           DELETE FROM lock_holds_current c USING stale WHERE c.ctid = stale.row
           RETURNING c.id, c.resource, c.deployment, c.token, c.holder, c.fence, c.acquired_at, stale.watched_at
         )
         INSERT INTO lock_holds (id, resource, deployment, token, holder, fence, acquired_at, ended_at, end_type)
         SELECT id, resource, deployment, token, holder, fence, acquired_at, greatest(watched_at, acquired_at), 'unwatched' FROM gone`,
        [String(Math.trunc(watchedBefore)), batch],
      );
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < batch) return total;
    }
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
