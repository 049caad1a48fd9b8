import "server-only";
import { mkdir, open } from "node:fs/promises";
import path from "node:path";
import { getConfig } from "../config";
import { singleton } from "../global";
import { whenReady } from "../health";
import { getLogger } from "../logger";
import { counter } from "../metrics";
import { getNodes, quorumOf, type LockNode } from "../nodes";
import { onShutdown } from "../shutdown";
import { AuditFileCursor } from "./file-cursor";
import { AuditMerger, auditIdTime, matchesFilters, parseAuditRecord, type AuditRecord } from "./records";
import type { AuditEntry, AuditFilters, AuditNodeResult, AuditOutcome, AuditPage } from "./types";

/**
 * The audit stream on every lock node. Its name must never match LOCK_PATTERNS (it would show up as a
 * lock, and could be force-released): `lockscope:` is outside the default `lock:*,locks:*`.
 */
export const AUDIT_STREAM_KEY = "lockscope:audit";
/** Approximate cap per node (XADD MAXLEN ~): two records per release, so about 50 000 releases. */
export const AUDIT_STREAM_MAXLEN = 100_000;
/** Records fetched per XREVRANGE while paging. */
const CHUNK = 500;
/**
 * Stream ids carry the node's clock and entry ids the console's: paging allows this much skew between
 * them when deciding that no node can still hold a newer record.
 */
const CLOCK_SKEW_MS = 60_000;
/** Upper bound of records one page request reads per node, so a narrow filter cannot scan forever. */
const MAX_SCAN_PER_NODE = 200_000;

/** The audit entry could not be made durable; the release must not proceed. */
export class AuditUnavailableError extends Error {
  constructor(
    readonly streamAcks: number,
    readonly streamQuorum: number,
    readonly fileError: string | null,
  ) {
    const parts: string[] = [];
    if (streamAcks < streamQuorum) parts.push(`the audit stream reached ${streamAcks} of the ${streamQuorum} nodes it needs`);
    if (fileError) parts.push(`the audit file could not be written (${fileError})`);
    super(`The audit log cannot record this release, so nothing was deleted: ${parts.join(" and ")}.`);
    this.name = "AuditUnavailableError";
  }
}

export class AuditReadError extends Error {
  constructor(fileError: string) {
    super(`The audit log cannot be read: no lock node answered and this console's audit file could not be read (${fileError}).`);
    this.name = "AuditReadError";
  }
}

interface SinkResult {
  /** Node ids whose stream took the record. */
  streamAcked: string[];
  fileError: string | null;
}

function errorText(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code ? `${code}` : error.message.slice(0, 200);
  }
  return String(error).slice(0, 200);
}

const writes = () => counter("lockscope_audit_writes_total", "Audit records written, by sink (stream: per node; file) and outcome.", ["sink", "outcome"]);

/**
 * Writes and reads the audit log: a Redis stream on every lock node (what every console instance sees)
 * and an append-only JSON-lines file (what survives losing the nodes). A record is durable when the file
 * took it, flushed to disk, AND a quorum of nodes took it into the stream.
 */
export class AuditLog {
  private fileChain: Promise<unknown> = Promise.resolve();
  private readonly inflight = new Set<Promise<unknown>>();

  constructor(
    private readonly nodes: readonly LockNode[],
    private readonly file: string,
    /** How long to wait for a node's connection that is still coming up. */
    private readonly readyTimeoutMs: number,
  ) {}

  get quorum(): number {
    return quorumOf(this.nodes.length);
  }

  /**
   * Records the intent of a release before anything is deleted. Throws `AuditUnavailableError` unless it
   * is durable; the sinks that did take it then also get a "refused" outcome so the entry is not left
   * pending.
   */
  async recordIntent(entry: AuditEntry): Promise<void> {
    const record: AuditRecord = { v: 1, kind: "intent", id: entry.id, entry };
    const result = await this.track(this.writeEverywhere(record, this.nodes, true));
    const fileOk = result.fileError === null;
    if (fileOk && result.streamAcked.length >= this.quorum) return;
    const refused: AuditRecord = { v: 1, kind: "outcome", id: entry.id, outcome: "refused", nodes: entry.nodes, finishedAt: Date.now() };
    await this.track(this.writeEverywhere(refused, this.nodes.filter((n) => result.streamAcked.includes(n.id)), fileOk));
    throw new AuditUnavailableError(result.streamAcked.length, this.quorum, result.fileError);
  }

  /** Records how a release ended. Best effort: the release already happened, so a failure is logged, not thrown. */
  async recordOutcome(id: string, outcome: AuditOutcome, nodes: AuditNodeResult[]): Promise<{ durable: boolean }> {
    const record: AuditRecord = { v: 1, kind: "outcome", id, outcome, nodes, finishedAt: Date.now() };
    const result = await this.track(this.writeEverywhere(record, this.nodes, true));
    const durable = result.fileError === null && result.streamAcked.length >= this.quorum;
    if (!durable) {
      getLogger().warn(
        { auditId: id, streamAcks: result.streamAcked.length, fileError: result.fileError },
        "audit outcome not durable; the entry may read as pending on some consoles",
      );
    }
    return { durable };
  }

  /** Waits for audit writes in flight (shutdown). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.inflight]);
  }

  private track<T>(promise: Promise<T>): Promise<T> {
    this.inflight.add(promise);
    void promise.finally(() => this.inflight.delete(promise)).catch(() => undefined);
    return promise;
  }

  private async writeEverywhere(record: AuditRecord, nodes: readonly LockNode[], toFile: boolean): Promise<SinkResult> {
    const json = JSON.stringify(record);
    const [acks, fileError] = await Promise.all([
      Promise.all(
        nodes.map(async (node) => {
          try {
            if (!(await whenReady(node.client, this.readyTimeoutMs))) throw new Error("not connected");
            await node.client.xadd(AUDIT_STREAM_KEY, "MAXLEN", "~", AUDIT_STREAM_MAXLEN, "*", "r", json);
            writes().inc({ sink: "stream", outcome: "ok" });
            return node.id;
          } catch {
            writes().inc({ sink: "stream", outcome: "failed" });
            return null;
          }
        }),
      ),
      toFile ? this.appendToFile(`${json}\n`) : Promise.resolve(null),
    ]);
    return { streamAcked: acks.filter((id): id is string => id !== null), fileError };
  }

  /** Appends one line and fsyncs it; returns the error code, or null on success. Serialized per process. */
  private appendToFile(line: string): Promise<string | null> {
    const run = async (): Promise<string | null> => {
      try {
        await mkdir(path.dirname(this.file), { recursive: true, mode: 0o700 });
        const handle = await open(this.file, "a", 0o600);
        try {
          await handle.appendFile(line, "utf8");
          await handle.sync();
        } finally {
          await handle.close();
        }
        writes().inc({ sink: "file", outcome: "ok" });
        return null;
      } catch (error) {
        writes().inc({ sink: "file", outcome: "failed" });
        return errorText(error);
      }
    };
    const next = this.fileChain.then(run, run);
    this.fileChain = next;
    return next;
  }

  /**
   * One page of entries, newest first. Reads the stream of every reachable node and merges by id (a node
   * that was down during a write lacks it, another has it), together with this console's file (which
   * still has what nodes without persistence lost in a restart). When no node answers, the file alone.
   * Every source is read newest first only as far back as the page needs: nothing is kept between pages.
   */
  async list(options: { limit: number; before?: string; filters: AuditFilters }): Promise<AuditPage> {
    const { limit, before, filters } = options;
    const upper = Math.min(before ? auditIdTime(before) + 1 : Infinity, filters.to ?? Infinity);
    const keep = (e: AuditEntry) => (!before || e.id < before) && matchesFilters(e, filters);
    const withNodes = await this.withFile((file) => this.scan(limit, upper, filters.from, keep, file, true));
    if (withNodes.entries) return { ...page(withNodes.entries, limit), source: "stream" };
    if (withNodes.fileError) throw withNodes.fileError;
    const fileOnly = await this.withFile((file) => this.scan(limit, upper, filters.from, keep, file, false));
    if (fileOnly.fileError) throw fileOnly.fileError;
    return { ...page(fileOnly.entries ?? [], limit), source: "file" };
  }

  /** Runs `scan` with a cursor on the audit file (null when there is none yet), closed after; a file that cannot be read is reported, not thrown. */
  private async withFile(scan: (file: FileSource) => Promise<AuditEntry[] | null>): Promise<{ entries: AuditEntry[] | null; fileError: AuditReadError | null }> {
    const source: FileSource = { cursor: null, error: null };
    try {
      source.cursor = await AuditFileCursor.open(this.file);
    } catch (error) {
      source.error = new AuditReadError(errorText(error));
    }
    try {
      const entries = await scan(source);
      return { entries, fileError: source.error };
    } finally {
      await source.cursor?.close();
    }
  }

  /**
   * Merges records from the nodes' streams (when `withNodes`) and the file cursor, newest first, until the
   * page is complete: more than `limit` matching entries newer than what every source has read past. Null
   * when nodes were asked and none answered.
   */
  private async scan(
    limit: number,
    upperMs: number,
    fromMs: number | undefined,
    keep: (e: AuditEntry) => boolean,
    fileSource: FileSource,
    withNodes: boolean,
  ): Promise<AuditEntry[] | null> {
    const file = () => (fileSource.error ? null : fileSource.cursor);
    const merger = new AuditMerger();
    const start = Number.isFinite(upperMs) ? String(Math.max(0, Math.trunc(upperMs + CLOCK_SKEW_MS))) : "+";
    const maxMs = upperMs + CLOCK_SKEW_MS;
    const cursors = (withNodes ? this.nodes : []).map((node) => ({ node, end: start, done: false, answered: false, lowMs: Infinity, read: 0 }));
    for (;;) {
      await Promise.all([
        ...cursors
          .filter((c) => !c.done)
          .map(async (c) => {
            try {
              if (!(await whenReady(c.node.client, this.readyTimeoutMs))) throw new Error("not connected");
              const rows = await c.node.client.xrevrange(AUDIT_STREAM_KEY, c.end, "-", "COUNT", CHUNK);
              c.answered = true;
              for (const [streamId, fields] of rows) {
                const at = fields.indexOf("r");
                const text = at >= 0 ? fields[at + 1] : undefined;
                const record = text === undefined ? null : parseAuditRecord(text);
                if (record) merger.add(record);
                c.end = `(${streamId}`;
                c.lowMs = Number(streamId.split("-")[0]);
              }
              c.read += rows.length;
              if (rows.length < CHUNK || c.read >= MAX_SCAN_PER_NODE) c.done = true;
            } catch {
              c.done = true;
            }
          }),
        (async () => {
          const cursor = file();
          if (!cursor || cursor.done) return;
          try {
            for (const record of await cursor.next(maxMs)) merger.add(record);
            if (cursor.read >= MAX_SCAN_PER_NODE) cursor.done = true;
          } catch (error) {
            fileSource.error = new AuditReadError(errorText(error));
          }
        })(),
      ]);
      if (withNodes && !cursors.some((c) => c.answered)) return null;
      const active: number[] = cursors.filter((c) => !c.done).map((c) => c.lowMs);
      const cursor = file();
      if (cursor && !cursor.done) active.push(cursor.lowMs);
      const candidates = merger.entries().filter(keep);
      if (active.length === 0) return candidates;
      // Every source has read past this time (allowing for clock skew): entries newer than it are complete.
      const settledAbove = Math.max(...active) + CLOCK_SKEW_MS;
      if (fromMs !== undefined && settledAbove < fromMs) return candidates;
      const settled = candidates.filter((e) => e.at > settledAbove);
      if (settled.length > limit) return settled;
    }
  }
}

/** The audit file as one source of a page: its cursor, or why it cannot be read. */
interface FileSource {
  cursor: AuditFileCursor | null;
  error: AuditReadError | null;
}

function page(entries: AuditEntry[], limit: number): { entries: AuditEntry[]; next: string | null } {
  const shown = entries.slice(0, limit);
  return { entries: shown, next: entries.length > limit ? (shown.at(-1)?.id ?? null) : null };
}

export function getAuditLog(): AuditLog {
  return singleton("audit-log", () => {
    const config = getConfig();
    const log = new AuditLog(getNodes(), path.resolve(config.auditFile), config.nodeTimeoutMs);
    onShutdown("audit", 30, () => log.drain());
    return log;
  });
}
