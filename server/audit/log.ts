import "server-only";
import { brand, instanceOf } from "../global";
import { open, type FileHandle } from "node:fs/promises";
import { makeDirs } from "@/lib/make-dirs";
import path from "node:path";
import { getConfig } from "../config";
import { tightenDataFile } from "../data-file-mode";
import { nodeFailureText } from "../errors";
import { whenReady } from "../health";
import { getLogger } from "../logger";
import { declared } from "../metrics";
import { getNodes, quorumOf, type LockNode } from "../nodes";
import { AuditFileCursor } from "./file-cursor";
import { AuditMerger, auditIdTime, matchesFilters, parseAuditRecord, type AuditRecord } from "./records";
import { AuditNotDurableError, AuditReadError, type AuditStore } from "./store";
import type { AuditEntry, AuditFilters, AuditNodeResult, AuditOutcome, AuditPage } from "./types";

/**
 * The audit stream on every lock node. Its name must never match LOCK_PATTERNS (it would show up as a
 * lock, and could be force-released): `lockscope:` is outside the default `lock:*,locks:*`.
 */
export const AUDIT_STREAM_KEY = "lockscope:audit";
/** Approximate cap per node (XADD MAXLEN ~): two records per release, so about 50 000 releases. */
export const AUDIT_STREAM_MAXLEN = 100_000;
/** Outcomes not yet durable whose sinks are remembered (for their retries); past it the oldest is forgotten. */
const MAX_PARTIAL_OUTCOMES = 10_000;
/** Records fetched per XREVRANGE while paging. */
const CHUNK = 500;
/**
 * Stream ids carry the node's clock and entry ids the console's: paging allows this much skew between
 * them when deciding that no node can still hold a newer record.
 */
const CLOCK_SKEW_MS = 60_000;
/**
 * Upper bound of records one page request reads per source (each node's stream, the file), so a narrow filter
 * cannot scan forever: a search that reaches it ends its page there, with a `next` that goes on below it.
 */
export const MAX_SCAN_PER_SOURCE = 200_000;
/**
 * How long after an entry's intent its outcome is looked for in the streams' part newer than a page (see
 * `withLateOutcomes`): an outcome is retried until a quorum takes it, so this is the longest quorum outage after which
 * a page below the outcome still reads it. It bounds what an entry left pending for good (a console stopped
 * mid-release) costs each page that shows it.
 */
const LATE_OUTCOME_WINDOW_MS = 24 * 60 * 60_000;

/** The audit entry could not be made durable; the release must not proceed. */
export class AuditUnavailableError extends AuditNotDurableError {
  static readonly [brand] = "AuditUnavailableError";
  static override [Symbol.hasInstance](value: unknown): value is AuditUnavailableError {
    return instanceOf(this, value);
  }

  constructor(
    readonly streamAcks: number,
    readonly streamQuorum: number,
    readonly fileError: string | null,
    /** Why the nodes that did not take the record refused it, in plain words (`node-0 is a read-only replica …`). */
    readonly streamErrors: readonly string[] = [],
    /** The entry's `refused` outcome did not reach every sink that may hold its intent: it is to be retried. */
    mayLand = false,
  ) {
    const parts: string[] = [];
    if (streamAcks < streamQuorum) parts.push(`the audit stream reached ${streamAcks} of the ${streamQuorum} nodes it needs${streamErrors.length > 0 ? ` (${streamErrors.join("; ")})` : ""}`);
    if (fileError) parts.push(`the audit file could not be written (${fileError})`);
    super(parts.join(" and "), mayLand);
    this.name = "AuditUnavailableError";
  }
}

export class AuditFileReadError extends AuditReadError {
  static readonly [brand] = "AuditFileReadError";
  static override [Symbol.hasInstance](value: unknown): value is AuditFileReadError {
    return instanceOf(this, value);
  }

  constructor(fileError: string) {
    super(`The audit log cannot be read: no lock node answered and this console's audit file could not be read (${fileError}).`);
    this.name = "AuditFileReadError";
  }
}

interface SinkResult {
  /** Node ids whose stream took the record. */
  streamAcked: string[];
  /** Why each of the others did not, in plain words, where that is known (`<node id> <what happened>`). */
  streamErrors: string[];
  fileError: string | null;
}

function errorText(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code ? `${code}` : error.message.slice(0, 200);
  }
  return String(error).slice(0, 200);
}

async function endsInNewline(handle: FileHandle, size: number): Promise<boolean> {
  if (size === 0) return true;
  const last = Buffer.alloc(1);
  await handle.read(last, 0, 1, size - 1);
  return last[0] === 0x0a;
}

/**
 * Truncates a failed append back to the file's last good length (what a full disk left is not a record),
 * but only when every byte past it is the start of what this append wrote: another process appending to
 * the same file meanwhile keeps its record (the newline rule then keeps the torn one apart).
 */
async function cutBack(handle: FileHandle, length: number, text: string, file: string): Promise<void> {
  try {
    const written = (await handle.stat()).size - length;
    if (written <= 0) return;
    const ours = Buffer.from(text, "utf8");
    const tail = Buffer.alloc(written);
    const { bytesRead } = await handle.read(tail, 0, written, length);
    if (written > ours.length || bytesRead !== written || !tail.equals(ours.subarray(0, written))) return;
    await handle.truncate(length);
    await handle.sync();
  } catch (error) {
    getLogger().warn({ file, err: errorText(error) }, "could not cut a failed audit append back; the torn record will be skipped when read");
  }
}

const writes = () => declared<"sink" | "outcome">("lockscope_audit_writes_total");

/**
 * Writes and reads the audit log: a Redis stream on every lock node (what every console instance sees)
 * and an append-only JSON-lines file (what survives losing the nodes). A record is durable when the file
 * took it, flushed to disk, AND a quorum of nodes took it into the stream.
 */
export class AuditLog implements AuditStore {
  readonly kind = "file-and-stream";
  private fileChain: Promise<unknown> = Promise.resolve();
  private unreadableReported = 0;
  private readonly inflight = new Set<Promise<unknown>>();
  /**
   * Outcomes not durable yet, with the sinks that took them: offered again (OutcomeRetryingStore), an outcome goes
   * only to the sinks that still lack it, so a long outage of the stream's quorum adds no line per retry to the file.
   */
  private readonly partialOutcomes = new Map<string, { file: boolean; acked: Set<string> }>();

  constructor(
    private readonly nodes: readonly LockNode[],
    private readonly file: string,
    /** How long to wait for a node's connection that is still coming up. */
    private readonly readyTimeoutMs: number,
  ) {
    tightenDataFile(file);
  }

  get quorum(): number {
    return quorumOf(this.nodes.length);
  }

  /**
   * Records the intent of a release before anything is deleted. Throws `AuditUnavailableError` unless it
   * is durable; the entry then gets a "refused" outcome so that it is not left pending. The outcome goes to every
   * node, not only those that acknowledged the intent: a node that did not answer in time (stalled, slow) may run
   * the intent all the same once it goes on, and a page read from it would otherwise show the entry pending. Where
   * the outcome is not durable yet, the error says so (`mayLand`), and it is offered again as any outcome is.
   */
  async recordIntent(entry: AuditEntry): Promise<void> {
    const record: AuditRecord = { v: 1, kind: "intent", id: entry.id, entry };
    const result = await this.track(this.writeEverywhere(record, this.nodes, true));
    const fileOk = result.fileError === null;
    if (fileOk && result.streamAcked.length >= this.quorum) return;
    const refused: AuditRecord = { v: 1, kind: "outcome", id: entry.id, outcome: "refused", nodes: entry.nodes, finishedAt: Date.now() };
    const closed = await this.track(this.writeEverywhere(refused, this.nodes, fileOk));
    // What a retry of the outcome (`recordOutcome`) still has to write: the file is done where it lacks the intent.
    const took = { file: !fileOk || closed.fileError === null, acked: new Set(closed.streamAcked) };
    const durable = took.file && took.acked.size >= this.quorum;
    if (!durable) this.rememberPartial(entry.id, took);
    throw new AuditUnavailableError(result.streamAcked.length, this.quorum, result.fileError, result.streamErrors, !durable);
  }

  /** Records how a release ended. Best effort: the release already happened, so a failure is logged, not thrown. */
  async recordOutcome(id: string, outcome: AuditOutcome, nodes: AuditNodeResult[], finishedAt: number): Promise<{ durable: boolean }> {
    const record: AuditRecord = { v: 1, kind: "outcome", id, outcome, nodes, finishedAt };
    const took = this.partialOutcomes.get(id) ?? { file: false, acked: new Set<string>() };
    const result = await this.track(this.writeEverywhere(record, this.nodes.filter((n) => !took.acked.has(n.id)), !took.file));
    if (result.fileError === null) took.file = true;
    for (const node of result.streamAcked) took.acked.add(node);
    const durable = took.file && took.acked.size >= this.quorum;
    this.partialOutcomes.delete(id);
    if (!durable) {
      this.rememberPartial(id, took);
      getLogger().warn(
        { auditId: id, streamAcks: took.acked.size, fileError: result.fileError },
        "audit outcome not durable; the entry may read as pending on some consoles",
      );
    }
    return { durable };
  }

  private rememberPartial(id: string, took: { file: boolean; acked: Set<string> }): void {
    this.partialOutcomes.delete(id);
    this.partialOutcomes.set(id, took);
    for (const oldest of this.partialOutcomes.keys()) {
      if (this.partialOutcomes.size <= MAX_PARTIAL_OUTCOMES) break;
      this.partialOutcomes.delete(oldest);
    }
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
    const streamErrors: string[] = [];
    const [acks, fileError] = await Promise.all([
      Promise.all(
        nodes.map(async (node) => {
          try {
            if (!(await whenReady(node.client, this.readyTimeoutMs))) throw new Error("not connected");
            await node.client.xadd(AUDIT_STREAM_KEY, "MAXLEN", "~", AUDIT_STREAM_MAXLEN, "*", "r", json);
            writes().inc({ sink: "stream", outcome: "ok" });
            return node.id;
          } catch (error) {
            writes().inc({ sink: "stream", outcome: "failed" });
            const why = nodeFailureText(error instanceof Error ? error.message : undefined);
            if (why !== null) streamErrors.push(`${node.id} ${why}`);
            return null;
          }
        }),
      ),
      toFile ? this.appendToFile(`${json}\n`) : Promise.resolve(null),
    ]);
    return { streamAcked: acks.filter((id): id is string => id !== null), streamErrors, fileError };
  }

  /**
   * Appends one record on a line of its own and fsyncs it; returns the error code, or null on success.
   * Serialized per process. A failed write (a full disk, a quota) is cut back to the length the file had,
   * so its partial bytes do not stay; should even that fail, the next record still starts on a new line
   * (a newline is written first whenever the file does not end in one), so a torn record never swallows
   * the next one: the reader skips it and reports it.
   */
  private appendToFile(line: string): Promise<string | null> {
    const run = async (): Promise<string | null> => {
      let handle: FileHandle | null = null;
      let goodLength = -1;
      let text = line;
      try {
        makeDirs(path.dirname(this.file), 0o700);
        // "a+": appends, and can read the last byte back.
        handle = await open(this.file, "a+", 0o600);
        const stat = await handle.stat();
        goodLength = stat.size;
        // A file put in place while the console runs (a restored copy) is tightened too.
        tightenDataFile(this.file, stat.mode);
        if (!(await endsInNewline(handle, goodLength))) text = `\n${line}`;
        await handle.appendFile(text, "utf8");
        await handle.sync();
        writes().inc({ sink: "file", outcome: "ok" });
        return null;
      } catch (error) {
        writes().inc({ sink: "file", outcome: "failed" });
        if (handle && goodLength >= 0) await cutBack(handle, goodLength, text, this.file);
        return errorText(error);
      } finally {
        await handle?.close().catch(() => undefined);
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
    if (withNodes.scanned) {
      const shown = page(withNodes.scanned, limit, upper);
      const unread = withNodes.scanned.unreadNodes;
      // Every entry is on a quorum of nodes, so any quorum read has it; fewer may lack what other consoles wrote.
      const missing = this.nodes.length - unread.length < this.quorum ? { missingNodes: unread } : {};
      return { ...shown, entries: await this.withLateOutcomes(shown.entries, upper, unread), source: "stream", ...missing };
    }
    if (withNodes.fileError) throw withNodes.fileError;
    const fileOnly = await this.withFile((file) => this.scan(limit, upper, filters.from, keep, file, false));
    if (fileOnly.fileError) throw fileOnly.fileError;
    return { ...page(fileOnly.scanned ?? { entries: [], stoppedAbove: null, unreadNodes: [] }, limit, upper), source: "file" };
  }

  /**
   * The page's entries with the outcomes the streams hold above the part a bounded page read (`upperMs`, a `to` or a
   * `before`). An outcome is written after its intent, and a retried one (the quorum was gone for a while) long after:
   * its stream id can be newer than the page's bound while its entry is inside it. Read only for entries still
   * pending once the page is merged (rare: the file already closes this console's own), newest first, within
   * `LATE_OUTCOME_WINDOW_MS` after the newest of them and up to `MAX_SCAN_PER_SOURCE` records per node; where none is
   * found the entry stays pending.
   */
  private async withLateOutcomes(entries: AuditEntry[], upperMs: number, unreadNodes: readonly string[]): Promise<AuditEntry[]> {
    const wanted = new Set(entries.filter((e) => e.outcome === "pending").map((e) => e.id));
    if (wanted.size === 0 || !Number.isFinite(upperMs)) return entries;
    // The newer part: stream ids from just above where the page's read started, up to the window after the newest.
    const aboveMs = Math.max(0, Math.trunc(upperMs + CLOCK_SKEW_MS)) + 1;
    const untilMs = Math.trunc(Math.max(...[...wanted].map(auditIdTime)) + LATE_OUTCOME_WINDOW_MS + CLOCK_SKEW_MS);
    if (untilMs < aboveMs) return entries;
    const above = String(aboveMs);
    const merger = new AuditMerger();
    await Promise.all(
      // (Not from the nodes that just failed to answer the page's read: they would only make it wait.)
      this.nodes.filter((node) => !unreadNodes.includes(node.id)).map(async (node) => {
        const found = new Set<string>();
        let end = String(untilMs);
        try {
          if (!(await whenReady(node.client, this.readyTimeoutMs))) return;
          for (let read = 0; read < MAX_SCAN_PER_SOURCE && found.size < wanted.size; ) {
            const rows = await node.client.xrevrange(AUDIT_STREAM_KEY, end, above, "COUNT", CHUNK);
            for (const [streamId, fields] of rows) {
              end = `(${streamId}`;
              const record = streamRecord(fields);
              if (record?.kind !== "outcome" || !wanted.has(record.id)) continue;
              merger.add(record);
              found.add(record.id);
            }
            read += rows.length;
            if (rows.length < CHUNK) break;
          }
        } catch {
          // A node that fails here lacks nothing the others have; its entries may stay pending.
        }
      }),
    );
    const outcomes = new Map<string, AuditEntry>();
    for (const entry of entries) if (wanted.has(entry.id)) merger.add({ v: 1, kind: "intent", id: entry.id, entry });
    for (const merged of merger.entries()) outcomes.set(merged.id, merged);
    return entries.map((e) => outcomes.get(e.id) ?? e);
  }

  /** Runs `scan` with a cursor on the audit file (null when there is none yet), closed after; a file that cannot be read is reported, not thrown. */
  private async withFile(scan: (file: FileSource) => Promise<Scanned | null>): Promise<{ scanned: Scanned | null; fileError: AuditFileReadError | null }> {
    const source: FileSource = { cursor: null, error: null };
    try {
      source.cursor = await AuditFileCursor.open(this.file);
    } catch (error) {
      source.error = new AuditFileReadError(errorText(error));
    }
    try {
      const scanned = await scan(source);
      const unreadable = source.cursor?.unreadable ?? 0;
      if (unreadable > this.unreadableReported) {
        // Said once per newly found torn line, not on every page read.
        this.unreadableReported = unreadable;
        getLogger().warn({ file: this.file, count: unreadable }, "the audit file has unreadable lines (a record torn by a crash or a full disk); they are skipped");
      }
      return { scanned, fileError: source.error };
    } finally {
      await source.cursor?.close();
    }
  }

  /**
   * Merges records from the nodes' streams (when `withNodes`) and the file cursor, newest first, until the
   * page is complete: more than `limit` matching entries newer than what every source has read past, or
   * every source read to its start or to `MAX_SCAN_PER_SOURCE` (then `stoppedAbove` says how far back the
   * answer is complete). Null when nodes were asked and none answered.
   */
  private async scan(
    limit: number,
    upperMs: number,
    fromMs: number | undefined,
    keep: (e: AuditEntry) => boolean,
    fileSource: FileSource,
    withNodes: boolean,
  ): Promise<Scanned | null> {
    const file = () => (fileSource.error ? null : fileSource.cursor);
    const merger = new AuditMerger();
    const start = Number.isFinite(upperMs) ? String(Math.max(0, Math.trunc(upperMs + CLOCK_SKEW_MS))) : "+";
    const maxMs = upperMs + CLOCK_SKEW_MS;
    const cursors = (withNodes ? this.nodes : []).map((node) => ({ node, end: start, done: false, capped: false, answered: false, failed: false, lowMs: Infinity, read: 0 }));
    let fileCapped = false;
    // Only entries the page may show are kept (with every outcome, whose intent may come later): a narrow
    // filter over a long log keeps a few, not every record read. Of this console's own entries that do not match,
    // the id is kept, so that a stream record with that id saying otherwise does not stand in for them.
    const add = (record: AuditRecord, own: boolean) => {
      if (record.kind === "outcome" || keep(record.entry)) merger.add(record, own);
      else if (own) merger.leaveOutOwn(record.id);
    };
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
                const record = streamRecord(fields);
                if (record) add(record, false);
                c.end = `(${streamId}`;
                c.lowMs = Number(streamId.split("-")[0]);
              }
              c.read += rows.length;
              if (rows.length < CHUNK) c.done = true;
              else if (c.read >= MAX_SCAN_PER_SOURCE) c.done = c.capped = true;
            } catch {
              c.done = c.failed = true;
            }
          }),
        (async () => {
          const cursor = file();
          if (!cursor || cursor.done) return;
          try {
            for (const record of await cursor.next(maxMs)) add(record, true);
            if (!cursor.done && cursor.read >= MAX_SCAN_PER_SOURCE) cursor.done = fileCapped = true;
          } catch (error) {
            fileSource.error = new AuditFileReadError(errorText(error));
          }
        })(),
      ]);
      if (withNodes && !cursors.some((c) => c.answered)) return null;
      const unreadNodes = cursors.filter((c) => c.failed).map((c) => c.node.id);
      const active: number[] = cursors.filter((c) => !c.done).map((c) => c.lowMs);
      const cursor = file();
      if (cursor && !cursor.done) active.push(cursor.lowMs);
      // Sources stopped at the bound hold older records still: how far they read counts as for those reading on.
      const stopped = cursors.filter((c) => c.capped).map((c) => c.lowMs);
      if (fileCapped && cursor) stopped.push(cursor.lowMs);
      const candidates = merger.entries();
      if (active.length === 0 && stopped.length === 0) return { entries: candidates, stoppedAbove: null, unreadNodes };
      // Every source has read past this time (allowing for clock skew): entries newer than it are complete.
      // (By the id's time, which is what `before` pages by.)
      const settledAbove = Math.max(...active, ...stopped) + CLOCK_SKEW_MS;
      if (fromMs !== undefined && settledAbove < fromMs) return { entries: candidates, stoppedAbove: null, unreadNodes };
      const settled = candidates.filter((e) => auditIdTime(e.id) > settledAbove);
      if (settled.length > limit) return { entries: settled, stoppedAbove: null, unreadNodes };
      if (active.length === 0) return { entries: settled, stoppedAbove: settledAbove, unreadNodes };
    }
  }
}

/**
 * What a scan found, newest first. `stoppedAbove`: a source stopped at `MAX_SCAN_PER_SOURCE` before the page
 * filled; `entries` are every match newer than this time (ms), and older ones may exist.
 */
interface Scanned {
  entries: AuditEntry[];
  stoppedAbove: number | null;
  /** Nodes whose stream failed to answer (not read, or not read to the end the page needed). */
  unreadNodes: string[];
}

/** The audit file as one source of a page: its cursor, or why it cannot be read. */
interface FileSource {
  cursor: AuditFileCursor | null;
  error: AuditFileReadError | null;
}

/**
 * The page of a scan. A scan stopped at its bound ends the page early (fewer entries than `limit`, maybe none)
 * with a `next` below the time it is complete to, so that the search goes on rather than seeming to end. That
 * `next` is always older than the page's own upper bound (`upperMs`), so paging always moves back.
 */
function page({ entries, stoppedAbove }: Scanned, limit: number, upperMs: number): { entries: AuditEntry[]; next: string | null } {
  const shown = entries.slice(0, limit);
  if (entries.length > limit) return { entries: shown, next: shown.at(-1)?.id ?? null };
  if (stoppedAbove === null) return { entries: shown, next: null };
  const below = Math.max(0, Math.min(stoppedAbove + 1, upperMs - 1));
  return { entries: shown, next: `${String(Math.trunc(below)).padStart(13, "0")}-000000000000` };
}

/** The file-and-stream kind for this process's configuration. */
export function createFileAndStreamAudit(): AuditLog {
  const config = getConfig();
  return new AuditLog(getNodes(), path.resolve(config.auditFile), config.nodeTimeoutMs);
}

/** The audit record a stream entry holds (its `r` field), null when it holds none this version reads. */
function streamRecord(fields: readonly string[]): AuditRecord | null {
  const at = fields.indexOf("r");
  const text = at >= 0 ? fields[at + 1] : undefined;
  return text === undefined ? null : parseAuditRecord(text);
}
