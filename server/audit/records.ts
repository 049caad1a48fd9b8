import "server-only";
import { randomBytes } from "node:crypto";
import { stringify, type Options as CsvOptions } from "csv-stringify/sync";
import type { AuditEntry, AuditFilters, AuditNodeResult, AuditOutcome } from "./types";

/**
 * The audit log's records, as stored in the Redis stream and the JSON-lines file. A release writes two:
 * the intent (the whole entry, outcome "pending") before anything is deleted, and the outcome (same id)
 * after. Readers merge them by id; an intent without an outcome stays "pending".
 */
export type AuditRecord =
  | { v: 1; kind: "intent"; id: string; entry: AuditEntry }
  | { v: 1; kind: "outcome"; id: string; outcome: AuditOutcome; nodes: AuditNodeResult[]; finishedAt: number };

export const AUDIT_ID_PATTERN = /^[0-9]{13}-[0-9a-f]{12}$/;

/** A new entry id: time-ordered as a string, unique across console instances (48 random bits per ms). */
export function newAuditId(nowMs = Date.now()): string {
  return `${String(Math.trunc(nowMs)).padStart(13, "0")}-${randomBytes(6).toString("hex")}`;
}

export function auditIdTime(id: string): number {
  return Number(id.slice(0, 13));
}

const OUTCOMES = new Set<AuditOutcome>(["pending", "released", "partial", "conflict", "absent", "failed", "refused"]);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Parses one stored record; null for anything malformed. The stream is writable by whoever can write to
 * the nodes, so a reader trusts nothing in it beyond this shape check.
 */
export function parseAuditRecord(text: string): AuditRecord | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isObject(raw) || raw.v !== 1 || typeof raw.id !== "string" || !AUDIT_ID_PATTERN.test(raw.id)) return null;
  if (raw.kind === "intent") {
    const entry = raw.entry;
    if (!isObject(entry) || entry.id !== raw.id || typeof entry.at !== "number" || typeof entry.resource !== "string") return null;
    if (typeof entry.actor !== "string" || typeof entry.reason !== "string" || !Array.isArray(entry.nodes)) return null;
    return { v: 1, kind: "intent", id: raw.id, entry: entry as unknown as AuditEntry };
  }
  if (raw.kind === "outcome") {
    if (typeof raw.outcome !== "string" || !OUTCOMES.has(raw.outcome as AuditOutcome)) return null;
    if (!Array.isArray(raw.nodes) || typeof raw.finishedAt !== "number") return null;
    return {
      v: 1,
      kind: "outcome",
      id: raw.id,
      outcome: raw.outcome as AuditOutcome,
      nodes: raw.nodes as AuditNodeResult[],
      finishedAt: raw.finishedAt,
    };
  }
  return null;
}

/** What a run of whole lines of the audit file held: its records, and the lines that were not one. */
export interface AuditLines {
  records: AuditRecord[];
  /** 1-based line numbers of non-empty lines that do not parse (a record torn by a crash or a full disk). */
  unreadable: number[];
}

/**
 * Parses whole lines of the audit file (`text` ends at a newline), numbering them from `firstLine`.
 * A torn record is skipped and reported, never merged with its neighbours: the writer starts every
 * record on a line of its own, so only the torn one is lost.
 */
export function parseAuditLines(text: string, firstLine = 1): AuditLines {
  const records: AuditRecord[] = [];
  const unreadable: number[] = [];
  const lines = text.split("\n");
  // The text ends with a newline, so the last piece is empty and not a line.
  lines.pop();
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    const record = parseAuditRecord(line);
    if (record) records.push(record);
    else unreadable.push(firstLine + i);
  });
  return { records, unreadable };
}

/**
 * Merges intents and outcomes read from any number of sources (the same record may come from several nodes).
 * This console's file outranks the nodes' streams: it holds only what this console wrote, while anyone who may write
 * the stream on the nodes can add records to it, with any id. An entry this console made reads as its file has it.
 */
export class AuditMerger {
  private readonly intents = new Map<string, { entry: AuditEntry; own: boolean }>();
  private readonly outcomes = new Map<string, { record: Extract<AuditRecord, { kind: "outcome" }>; own: boolean }>();
  /** Ids whose intent in this console's file was left out (a filter did not match it): a stream's version is not listed either. */
  private readonly ownLeftOut = new Set<string>();

  /** `own`: read from this console's file (else from a node's stream). */
  add(record: AuditRecord, own = false): void {
    if (record.kind === "intent") {
      if (this.ownLeftOut.has(record.id)) return;
      const known = this.intents.get(record.id);
      if (!known || (own && !known.own)) this.intents.set(record.id, { entry: record.entry, own });
    } else {
      // One writer per id (ids are unique per console), so at most one outcome exists (a retry writes the same
      // again); should records disagree, the file's wins, else the latest.
      const known = this.outcomes.get(record.id);
      if (!known || (own && !known.own) || (own === known.own && known.record.finishedAt < record.finishedAt)) this.outcomes.set(record.id, { record, own });
    }
  }

  /**
   * An intent read from this console's file that the reader does not list (it does not match the filters): the
   * entry reads as the file has it, so a stream's record with its id (which may say otherwise) is not listed in its
   * place. Only the id is kept.
   */
  leaveOutOwn(id: string): void {
    this.ownLeftOut.add(id);
    this.intents.delete(id);
  }

  /** Every entry whose intent was seen, newest first, with its outcome merged in. */
  entries(): AuditEntry[] {
    const out: AuditEntry[] = [];
    for (const [id, { entry: intent }] of this.intents) {
      const outcome = this.outcomes.get(id)?.record;
      out.push(outcome ? { ...intent, outcome: outcome.outcome, nodes: outcome.nodes, finishedAt: outcome.finishedAt } : intent);
    }
    return out.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  }
}

export function matchesFilters(entry: AuditEntry, filters: AuditFilters): boolean {
  if (filters.resource && !entry.resource.toLowerCase().includes(filters.resource.toLowerCase())) return false;
  if (filters.actor && !entry.actor.toLowerCase().includes(filters.actor.toLowerCase())) return false;
  if (filters.deployment !== undefined && entry.deployment !== filters.deployment) return false;
  if (filters.from !== undefined && entry.at < filters.from) return false;
  if (filters.to !== undefined && entry.at >= filters.to) return false;
  return true;
}

const CSV_COLUMNS = ["id", "time", "actor", "role", "action", "resource", "deployment", "holder", "fence", "token", "reason", "outcome", "nodes", "ip", "userAgent"] as const;

/**
 * Cells a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab, CR, and their full-width forms) get a
 * leading `'` from csv-stringify's `escape_formulas`, since reasons, actors and resources are typed by people;
 * such cells, and any holding a `'`, are quoted too, so the prefix reads as part of the text.
 */
const CSV_OPTIONS = {
  header: true,
  columns: [...CSV_COLUMNS],
  record_delimiter: "\r\n",
  // With a record delimiter given, csv-stringify quotes a lone LF or CR only when asked: a reason with a line
  // break must stay one cell.
  quote_record_delimiter: true,
  escape_formulas: true,
  quoted_match: [/^[=+\-@\t\r\uFF1D\uFF0B\uFF0D\uFF20]/, /'/],
} satisfies CsvOptions;

function holderText(entry: AuditEntry): string {
  const h = entry.holder;
  if (!h) return "";
  return [h.label, h.host && h.pid !== null ? `${h.host}:${h.pid}` : (h.host ?? (h.pid !== null ? `pid ${h.pid}` : null))].filter(Boolean).join(" @ ");
}

export function auditCsv(entries: readonly AuditEntry[]): string {
  const rows = entries.map((e): Record<(typeof CSV_COLUMNS)[number], string> => ({
    id: e.id,
    time: new Date(e.at).toISOString(),
    actor: e.actor,
    role: e.role,
    action: e.action,
    resource: e.resource,
    // Empty for entries that name none: pattern changes, and releases recorded before deployments were named.
    deployment: e.deployment ?? "",
    holder: holderText(e),
    fence: e.holder?.fence ?? "",
    token: e.token ?? "",
    reason: e.reason,
    outcome: e.outcome,
    nodes: e.nodes.map((n) => `${n.id}=${n.result}`).join(" "),
    ip: e.ip,
    userAgent: e.userAgent ?? "",
  }));
  return stringify(rows, CSV_OPTIONS);
}
