import "server-only";
import type { Database } from "../postgres/pool";
import { getLogger } from "../logger";
import { databaseErrorText as errorText, isDatabaseUnreachable, readFailure } from "../postgres/errors";
import { declared } from "../metrics";
import { AuditNotDurableError, AuditReadError, type AuditStore } from "./store";
import type { AuditEntry, AuditFilters, AuditNodeResult, AuditOutcome, AuditPage } from "./types";

/** Entries whose INSERT got no answer kept at most (their outcome is written whole, see `recordOutcome`). */
const MAX_UNANSWERED_INTENTS = 10_000;

const writes = () => declared<"sink" | "outcome">("lockscope_audit_writes_total");

/** An `audit_log` row as read: the entry's fields, its times as text, `deployment` null on older rows. */
interface Row extends Pick<AuditEntry, "id" | "actor" | "role" | "action" | "resource" | "token" | "holder" | "reason" | "outcome" | "nodes" | "ip"> {
  at_ms: string;
  deployment: string | null;
  user_agent: string | null;
  finished_ms: string | null;
}

function fromRow(row: Row): AuditEntry {
  const entry: AuditEntry = {
    id: row.id,
    at: Number(row.at_ms),
    actor: row.actor,
    role: row.role,
    action: row.action,
    resource: row.resource,
    token: row.token,
    holder: row.holder,
    reason: row.reason,
    outcome: row.outcome,
    nodes: row.nodes,
    ip: row.ip,
    userAgent: row.user_agent,
  };
  if (row.deployment !== null) entry.deployment = row.deployment;
  if (row.finished_ms !== null) entry.finishedAt = Number(row.finished_ms);
  return entry;
}

/** A LIKE pattern matching `text` anywhere, with its own wildcards taken literally. */
function containing(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/** PostgreSQL drops no character but NUL, which it refuses in text: a reason typed with one still records. */
const clean = (text: string) => text.replace(/\u0000/g, "\uFFFD");

/**
 * The audit log in PostgreSQL (AUDIT_DATABASE_URL): one row per entry, shared by every console. An intent
 * is durable once its INSERT committed (synchronous commit, the server's default); the outcome updates it.
 */
export class PostgresAudit implements AuditStore {
  readonly kind = "postgres";
  private readonly inflight = new Set<Promise<unknown>>();
  /** Entries whose INSERT got no answer: the database may commit them late, or never have them. */
  private readonly unanswered = new Map<string, AuditEntry>();

  constructor(private readonly db: Database) {
    // Both series exist from the start, so the first failure is an increase `rate()` and alerts see.
    for (const outcome of ["ok", "failed"]) writes().inc({ sink: "postgres", outcome }, 0);
  }

  async recordIntent(entry: AuditEntry): Promise<void> {
    try {
      await this.track(this.insert(entry));
      writes().inc({ sink: "postgres", outcome: "ok" });
    } catch (error) {
      writes().inc({ sink: "postgres", outcome: "failed" });
      // A database that did not answer (down, or too slow to commit within the timeout) may have written the entry
      // all the same: kept, so that its outcome can be written whole whether the INSERT landed or not.
      const mayLand = isDatabaseUnreachable(error);
      if (mayLand) {
        this.unanswered.set(entry.id, entry);
        for (const oldest of this.unanswered.keys()) {
          if (this.unanswered.size <= MAX_UNANSWERED_INTENTS) break;
          this.unanswered.delete(oldest);
        }
      }
      throw new AuditNotDurableError(`the audit database (${this.db.display}) did not take the entry (${errorText(error)})`, mayLand);
    }
  }

  async recordOutcome(id: string, outcome: AuditOutcome, nodes: AuditNodeResult[], finishedAt: number): Promise<{ durable: boolean }> {
    const unanswered = this.unanswered.get(id);
    try {
      await this.track(
        (async () => {
          await this.db.ready();
          if (unanswered) {
            // Its INSERT may be committed by now, later, or never: the whole entry with its outcome, or the outcome
            // over the row once the late commit ends (the INSERT waits for it on the id's unique index).
            await this.insert({ ...unanswered, outcome, nodes, finishedAt }, "ON CONFLICT (id) DO UPDATE SET outcome = EXCLUDED.outcome, nodes = EXCLUDED.nodes, finished_at = EXCLUDED.finished_at");
            this.unanswered.delete(id);
            return;
          }
          // The console's time, as `at` is: the database's own clock (now()) may run behind the console's, and an
          // outcome would then read as recorded before its release started. (Exact milliseconds, no float.)
          await this.db.pool.query("UPDATE audit_entries SET outcome = $2, nodes = $3, finished_at = 'epoch'::timestamptz + $4 * interval '1 millisecond' WHERE id = $1", [
            id,
            outcome,
            JSON.stringify(nodes),
            String(Math.trunc(finishedAt)),
          ]);
        })(),
      );
      writes().inc({ sink: "postgres", outcome: "ok" });
      return { durable: true };
    } catch (error) {
      writes().inc({ sink: "postgres", outcome: "failed" });
      getLogger().warn({ auditId: id, database: this.db.display, err: errorText(error) }, "audit outcome not durable; the entry reads as pending");
      return { durable: false };
    }
  }

  async list(options: { limit: number; before?: string; filters: AuditFilters }): Promise<AuditPage> {
    const { limit, before, filters } = options;
    const where: string[] = [];
    const args: unknown[] = [];
    const arg = (value: unknown) => {
      args.push(value);
      return `$${args.length}`;
    };
    // The id starts with the entry's time: a keyset cursor on the primary key.
    if (before) where.push(`id < ${arg(before)}`);
    // Looked up as they were stored (`clean`).
    if (filters.resource) where.push(`resource ILIKE ${arg(containing(clean(filters.resource)))}`);
    if (filters.actor) where.push(`actor ILIKE ${arg(containing(clean(filters.actor)))}`);
    if (filters.deployment !== undefined) where.push(`deployment = ${arg(filters.deployment)}`);
    if (filters.from !== undefined) where.push(`at >= to_timestamp(${arg(filters.from / 1000)})`);
    if (filters.to !== undefined) where.push(`at < to_timestamp(${arg(filters.to / 1000)})`);
    const sql = `SELECT id, (extract(epoch FROM at) * 1000)::bigint AS at_ms, actor, role, action, resource, deployment, token, holder, reason, outcome,
        nodes, ip, user_agent, (extract(epoch FROM finished_at) * 1000)::bigint AS finished_ms
      FROM audit_entries ${where.length ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY id DESC LIMIT ${arg(limit + 1)}`;
    let rows: Row[];
    try {
      await this.db.ready();
      rows = (await this.db.pool.query<Row>(sql, args)).rows;
    } catch (error) {
      getLogger().warn({ database: this.db.display, err: errorText(error) }, "audit log read failed");
      throw new AuditReadError(`The audit log cannot be read: the audit database (${this.db.display}) ${readFailure(error)}.`);
    }
    const entries = rows.slice(0, limit).map(fromRow);
    return { entries, next: rows.length > limit ? (entries.at(-1)?.id ?? null) : null, source: "postgres" };
  }

  async drain(): Promise<void> {
    await Promise.allSettled([...this.inflight]);
  }

  private async insert(entry: AuditEntry, onConflict = ""): Promise<void> {
    await this.db.ready();
    await this.db.pool.query(
      `INSERT INTO audit_entries (id, at, actor, role, action, resource, token, holder, reason, outcome, nodes, ip, user_agent, deployment, finished_at)
       VALUES ($1, to_timestamp($2::double precision / 1000), $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
         CASE WHEN $15::bigint IS NULL THEN NULL ELSE 'epoch'::timestamptz + $15::bigint * interval '1 millisecond' END) ${onConflict}`,
      [
        entry.id,
        entry.at,
        clean(entry.actor),
        entry.role,
        entry.action,
        clean(entry.resource),
        entry.token === null ? null : clean(entry.token),
        entry.holder === null ? null : JSON.stringify(entry.holder),
        clean(entry.reason),
        entry.outcome,
        JSON.stringify(entry.nodes),
        entry.ip,
        entry.userAgent === null ? null : clean(entry.userAgent),
        entry.deployment ?? null,
        entry.finishedAt === undefined ? null : String(Math.trunc(entry.finishedAt)),
      ],
    );
  }

  private track<T>(promise: Promise<T>): Promise<T> {
    this.inflight.add(promise);
    void promise.finally(() => this.inflight.delete(promise)).catch(() => undefined);
    return promise;
  }
}
