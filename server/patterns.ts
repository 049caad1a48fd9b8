import "server-only";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { makeDirs } from "@/lib/make-dirs";
import path from "node:path";
import { z } from "zod";
import { isNeverLock, patternKeysProblem } from "@/lib/locks/formats/defaults";
import type { LockScope } from "@/lib/locks/formats";
import { globMatcher, globProblem, PATTERN_ACCESS_CHECK_MS } from "@/lib/locks/glob";
import { newAuditId } from "./audit/records";
import { AuditNotDurableError } from "./audit/store";
import { clientIp, type Principal } from "./auth";
import { getConfig } from "./config";
import { tightenDataFile } from "./data-file-mode";
import { ApiError } from "./errors";
import { peekGlobal, setGlobal, singleton } from "./global";
import { getLogger } from "./logger";
import type { PatternCheck } from "./live/watcher";

/**
 * The lock patterns in force, changed live by an operator (`PUT /api/patterns`): applied at once (listeners,
 * such as the watchers, re-subscribe and rescan), kept across restarts in `<data dir>/patterns.json`, and
 * audited (`action: "patterns-changed"`) before they apply. `LOCK_PATTERNS` is the starting point: the file
 * records the `LOCK_PATTERNS` it was edited from, and when that variable has changed since, the variable wins
 * (an operator who edits the environment means it).
 */

export interface PatternEntry {
  glob: string;
  /** The operator's declaration: keys under this glob are single-instance locks or Redlocks. */
  scope?: LockScope;
}

export interface PatternsState {
  patterns: PatternEntry[];
  /** `config`: from LOCK_PATTERNS; `console`: as last changed from a console (this one or another over the same nodes). */
  source: "config" | "console";
  updatedAt: number | null;
  updatedBy: string | null;
  /** Names this list: `config`, or the change's stamp. A `PUT` that gives it is refused (409) once the list has changed since. */
  revision: string;
}

/**
 * A change as every console over the same lock nodes shares it (`lockscope:patterns` on each node) and as this
 * console keeps it in its data folder. `stamp` orders changes: the change's audit id (its time in ms, 13 digits,
 * then random hex), so the newest change wins wherever two meet.
 */
export interface PatternsRecord {
  version: 1;
  stamp: string;
  patterns: PatternEntry[];
  updatedAt: number;
  updatedBy: string;
  /** The LOCK_PATTERNS of the console that wrote this (in the file: of this console when it applied it). */
  basedOn: string[];
}

/** Where changes are shared with the other consoles: `write` resolves with the nodes that recorded it and those that did not. */
export interface PatternsShare {
  /** `newer`: the stamp of a change newer than `record` found on some node (another console's, made meanwhile). */
  write(record: PatternsRecord): Promise<{ recorded: string[]; missed: string[]; newer: string | null }>;
  /** Reads the nodes now, so that a change made on another console is in force before this one changes them. */
  refresh(): Promise<void>;
  /**
   * Runs `change` while no other console changes the patterns (a lease on the nodes, extended while it runs);
   * `held` tells whether the lease is still held. Rejects with an ApiError when it cannot be had.
   */
  exclusive<T>(label: string, change: (held: () => boolean) => Promise<T>): Promise<T>;
}

export const patternEntrySchema = z
  .object({
    glob: z
      .string()
      .min(1, "a glob is at least one character")
      .max(200, "a glob is at most 200 characters")
      .regex(/^[^\s,]+$/, "a glob has no spaces or commas")
      .refine((g) => !/[\u0000-\u001f\u007f]/.test(g), "a glob has no control characters"),
    scope: z.enum(["quorum", "single"]).optional(),
  })
  .strict();

export const putPatternsSchema = z
  .object({
    patterns: z.array(patternEntrySchema).min(1, "keep at least one pattern").max(32, "at most 32 patterns"),
    reason: z
      .string()
      .trim()
      .min(3, "say why in 3 to 500 characters")
      .max(500, "say why in 3 to 500 characters")
      .refine((s) => !/[\u0000-\u0008\u000b-\u001f\u007f]/.test(s), "the reason must not contain control characters"),
    revision: z
      .string()
      .regex(/^(config|\d{13}-[0-9a-f]{1,32})$/, "a revision is what GET /api/patterns gave: `config` or a change's stamp")
      .optional(),
  })
  .strict();

/** One change, as the audit log records it. */
export interface PatternsChange {
  id: string;
  at: number;
  actor: string;
  role: Principal["role"];
  action: "patterns-changed";
  previous: PatternEntry[];
  patterns: PatternEntry[];
  reason: string;
  ip: string;
  userAgent: string | null;
}

/**
 * Where changes are audited: the intent must be durable before the change applies (a throw refuses the
 * change), then its outcome is recorded. The console's audit service provides it.
 */
export interface PatternsAuditor {
  recordIntent(change: PatternsChange): Promise<void>;
  recordOutcome(id: string, outcome: "applied" | "failed"): Promise<void>;
}

/** A change's stamp: its time in ms (13 digits), then random hex. */
export const STAMP = /^\d{13}-[0-9a-f]{1,32}$/;

/** A record as read from the file or a node; files written before records had a stamp get one from their time. */
export const patternsRecordSchema = z
  .object({
    version: z.literal(1),
    stamp: z.string().regex(STAMP).optional(),
    patterns: z.array(patternEntrySchema).min(1).max(32),
    updatedAt: z.number().int().nonnegative().max(8.64e15),
    updatedBy: z.string().max(200),
    basedOn: z.array(z.string().max(1000)).max(1000),
  })
  .transform((r): PatternsRecord => ({ ...r, stamp: r.stamp ?? `${String(r.updatedAt).padStart(13, "0")}-0` }));

/** A record from text (JSON), or why it cannot be used. */
export function parsePatternsRecord(text: string): { record: PatternsRecord } | { problem: string } {
  let parsed: PatternsRecord;
  try {
    parsed = patternsRecordSchema.parse(JSON.parse(text));
  } catch {
    return { problem: "damaged" };
  }
  const problem = patternsProblem(parsed.patterns);
  return problem ? { problem } : { record: parsed };
}

const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/** Why a pattern list cannot be used, for the operator; null when it can. */
export function patternsProblem(patterns: readonly PatternEntry[]): string | null {
  const seen = new Set<string>();
  for (const { glob } of patterns) {
    if (seen.has(glob)) return `\`${glob}\` is listed twice.`;
    seen.add(glob);
    const unlike = globProblem(glob) ?? patternKeysProblem(glob);
    if (unlike) return unlike;
  }
  return null;
}

export class PatternStore {
  private state: PatternsState;
  /** The record in force when it came from a console (null while LOCK_PATTERNS is). */
  private applied: PatternsRecord | null = null;
  /** The newest stamp this store has judged (applied, or passed over as made before it started over other LOCK_PATTERNS). */
  private judged = "";
  private readonly startedAt = Date.now();
  private readonly listeners = new Set<(state: PatternsState) => void>();
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly file: string,
    private readonly configured: readonly string[],
    private share: PatternsShare | null = null,
  ) {
    this.state = this.load();
  }

  /** Reads the other consoles' latest change, where the patterns are shared. */
  async refresh(): Promise<void> {
    await this.share?.refresh().catch(() => {});
  }

  /** From now on, changes made here are shared through `share` (and refused when it records them nowhere). */
  shareVia(share: PatternsShare): void {
    this.share = share;
  }

  current(): PatternsState {
    return this.state;
  }

  /** The change in force as the consoles share it; null while the patterns are LOCK_PATTERNS as started. */
  record(): PatternsRecord | null {
    return this.applied;
  }

  /** The patterns' matchers, compiled once per pattern (cleared when the patterns change). */
  private readonly matchers = new Map<string, (key: string) => boolean>();

  private matcherOf(glob: string): (key: string) => boolean {
    let matches = this.matchers.get(glob);
    if (!matches) {
      matches = globMatcher(glob);
      this.matchers.set(glob, matches);
    }
    return matches;
  }

  /** The scope declared for `key` by the first pattern that matches it and declares one. */
  declaredScope(key: string): LockScope | null {
    for (const entry of this.state.patterns) if (entry.scope && this.matcherOf(entry.glob)(key)) return entry.scope;
    return null;
  }

  /**
   * Asks a deployment's lock nodes which patterns the console's Redis user may not watch, each node's answer by
   * `until` (epoch ms; see `NodeWatcher.tryPatterns`).
   */
  private readonly accessChecks = new Set<(globs: readonly string[], until: number) => Promise<PatternCheck[]>>();

  /** From now on, a change's new patterns are checked with `check` before it applies; returns the function that stops it. */
  checkAccessWith(check: (globs: readonly string[], until: number) => Promise<PatternCheck[]>): () => void {
    this.accessChecks.add(check);
    return () => this.accessChecks.delete(check);
  }

  /**
   * Refuses (422) a change whose new patterns some lock node does not let the console's Redis user watch: applied,
   * such a pattern would stop every watcher of those nodes from coming up (one subscription covers every pattern).
   * The whole check has one deadline (PATTERN_ACCESS_CHECK_MS), whatever the number of nodes and globs: a node that has not
   * answered by then is not judged (its watcher says what it refuses when it answers). Returns those nodes.
   */
  private async checkAccess(patterns: readonly PatternEntry[]): Promise<string[]> {
    const added = patterns.map((p) => p.glob).filter((glob) => !this.state.patterns.some((p) => p.glob === glob));
    if (added.length === 0 || this.accessChecks.size === 0) return [];
    const until = Date.now() + PATTERN_ACCESS_CHECK_MS;
    const answers = (await Promise.all([...this.accessChecks].map((check) => check(added, until).catch((): PatternCheck[] => [])))).flat();
    const refusals = answers.flatMap((a) => a.refusals);
    const notChecked = answers.filter((a) => !a.checked).map((a) => a.node);
    if (refusals.length === 0) return notChecked;
    const byGlob = new Map<string, { nodes: Set<string>; rules: Set<string> }>();
    for (const r of refusals) {
      const entry = byGlob.get(r.glob) ?? { nodes: new Set(), rules: new Set() };
      entry.nodes.add(r.node);
      entry.rules.add(r.rule);
      byGlob.set(r.glob, entry);
    }
    const refused = [...byGlob].map(([glob, e]) => ({ glob, nodes: [...e.nodes], rules: [...e.rules].sort() }));
    const words = refused.map((r) => `\`${r.glob}\` (${r.nodes.join(", ")} refuse${r.nodes.length === 1 ? "s" : ""} it; the user needs ${r.rules.map((rule) => `\`${rule}\``).join(" and ")})`);
    const unasked = notChecked.length === 0 ? "" : ` ${notCheckedWords(notChecked)}.`;
    throw new ApiError(
      "unprocessable",
      `The console's Redis user may not watch ${words.join(", ")}: add those rules to the user's ACL on every lock node, then make this change again. Nothing changed.${unasked}`,
      notChecked.length === 0 ? { refused } : { refused, notChecked },
    );
  }

  /** Called with the new state after every applied change; returns the unsubscribe function. */
  onChange(listener: (state: PatternsState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Replaces the patterns: validated, audited (intent first; a failing auditor refuses the change), recorded on
   * the lock nodes for the other consoles (refused when no node records it), kept in the file, then applied and
   * announced. Changes run one at a time.
   */
  replace(
    patterns: PatternEntry[],
    meta: { actor: string; role: Principal["role"]; reason: string; ip: string; userAgent: string | null },
    auditor: PatternsAuditor,
    revision?: string,
  ): Promise<{ state: PatternsState; auditId: string; shared: { recorded: string[]; missed: string[] } | null; notChecked: string[] }> {
    const problem = patternsProblem(patterns);
    if (problem) return Promise.reject(new ApiError("unprocessable", problem));
    return this.checkAccess(patterns).then(async (notChecked) => ({ ...(await this.replaceChecked(patterns, meta, auditor, revision)), notChecked }));
  }

  private replaceChecked(
    patterns: PatternEntry[],
    meta: { actor: string; role: Principal["role"]; reason: string; ip: string; userAgent: string | null },
    auditor: PatternsAuditor,
    revision?: string,
  ): Promise<{ state: PatternsState; auditId: string; shared: { recorded: string[]; missed: string[] } | null }> {
    const inTurn = (held: (() => boolean) | null) => {
      const run = () => this.change(patterns, meta, auditor, revision, held);
      const next = this.chain.then(run, run);
      this.chain = next.catch(() => {});
      return next;
    };
    const share = this.share;
    if (!share) return inTurn(null);
    // One change at a time over all consoles: a change made at the same moment on another one either comes
    // first (and this one is checked against it) or waits for this one.
    return share.exclusive(`lock patterns change by ${meta.actor}`, async (held) => {
      await share.refresh();
      return inTurn(held);
    });
  }

  private async change(
    patterns: PatternEntry[],
    meta: { actor: string; role: Principal["role"]; reason: string; ip: string; userAgent: string | null },
    auditor: PatternsAuditor,
    revision: string | undefined,
    held: (() => boolean) | null,
  ): Promise<{ state: PatternsState; auditId: string; shared: { recorded: string[]; missed: string[] } | null }> {
    if (revision !== undefined && revision !== this.state.revision) {
      const by = this.state.updatedBy === null ? "set from LOCK_PATTERNS" : `changed by ${this.state.updatedBy} at ${new Date(this.state.updatedAt ?? 0).toISOString()}`;
      throw new ApiError("conflict", `The lock patterns were ${by} since you read them (now: ${this.state.patterns.map((p) => p.glob).join(", ")}); nothing changed. Read them again and make your change on that list.`, { revision: this.state.revision });
    }
    const at = Date.now();
    const change: PatternsChange = { id: newAuditId(at), at, action: "patterns-changed", previous: this.state.patterns, patterns, ...meta };
    try {
      await auditor.recordIntent(change);
    } catch (error) {
      const why = error instanceof AuditNotDurableError ? error.why : errorText(error);
      throw new ApiError("unavailable", `The audit log cannot record this change, so the patterns were not changed: ${why}.`);
    }
    // Later than any change known here, whatever this host's clock says: consoles order changes by their stamps.
    const record: PatternsRecord = { version: 1, stamp: stampAfter(this.judged, at), patterns, updatedAt: at, updatedBy: meta.actor, basedOn: [...this.configured] };
    let shared: { recorded: string[]; missed: string[] } | null = null;
    if (this.share) {
      if (held && !held()) {
        await auditor.recordOutcome(change.id, "failed").catch(() => {});
        throw new ApiError("unavailable", "The change lost its lease on the lock nodes while it was made (too few nodes answered to extend it), so another console could be changing the patterns too; it was not applied. Try again.");
      }
      const written = await this.share.write(record).catch(() => ({ recorded: [], missed: ["every node"], newer: null }));
      shared = { recorded: written.recorded, missed: written.missed };
      if (written.newer !== null) {
        // Another console's change reached the nodes first, and it is the later one: it stands, everywhere.
        await auditor.recordOutcome(change.id, "failed").catch(() => {});
        throw new ApiError("conflict", "The lock patterns were changed on another console at the same moment; theirs stands and yours was not applied. Read them again and make your change on that list.", { revision: written.newer });
      }
      if (shared.recorded.length === 0) {
        await auditor.recordOutcome(change.id, "failed").catch(() => {});
        throw new ApiError(
          "unavailable",
          `No lock node confirmed the change (${shared.missed.join(", ")} did not answer), so the other consoles would not see it; it was not applied (a node that takes it late still passes it on).`,
        );
      }
    }
    try {
      this.writeFile(record);
    } catch (error) {
      if (!shared) {
        await auditor.recordOutcome(change.id, "failed").catch(() => {});
        throw new ApiError("unavailable", `The patterns could not be saved in the data folder (${errorText(error)}); nothing changed.`);
      }
      // The nodes have it, so every console applies it (this one too); only a restart while no node answers
      // would come up without it.
      getLogger().warn({ file: this.file, err: errorText(error) }, "lock patterns changed and shared on the lock nodes, but this console's data folder could not keep them");
    }
    this.apply(record);
    await auditor.recordOutcome(change.id, "applied").catch((error: unknown) => {
      getLogger().warn({ auditId: change.id, err: errorText(error) }, "patterns changed, but the audit outcome could not be recorded");
    });
    if (shared && shared.missed.length > 0) {
      getLogger().warn({ recorded: shared.recorded, missed: shared.missed }, "lock patterns changed, but not every lock node recorded them: the consoles copy them there once those nodes answer");
    }
    return { state: this.state, auditId: change.id, shared };
  }

  /**
   * A change read from the lock nodes (another console's, or one this console made that they kept): applied when
   * it is newer than any this store has judged, and either made while this console runs or made over the same
   * LOCK_PATTERNS (an older change made over other ones is passed over: an operator who edits the environment
   * means it). Resolves whether it applied. Runs in turn with `replace`.
   */
  adopt(record: PatternsRecord): Promise<boolean> {
    const run = () => {
      if (record.stamp <= this.judged) return false;
      this.judged = record.stamp;
      if (record.updatedAt < this.startedAt && !sameList(record.basedOn, this.configured)) {
        getLogger().info({ updatedAt: record.updatedAt, updatedBy: record.updatedBy }, "the lock patterns on the lock nodes were changed over another LOCK_PATTERNS before this console started; using this console's own");
        return false;
      }
      const problem = patternsProblem(record.patterns);
      if (problem) {
        getLogger().error({ problem }, "the lock patterns on the lock nodes have a pattern this console cannot use; keeping the patterns in force");
        return false;
      }
      try {
        this.writeFile({ ...record, basedOn: [...this.configured] });
      } catch (error) {
        getLogger().warn({ file: this.file, err: errorText(error) }, "applying the lock patterns changed on another console, but this console's data folder could not keep them");
      }
      this.apply(record);
      getLogger().info({ patterns: record.patterns.map((p) => p.glob), updatedBy: record.updatedBy }, "lock patterns changed on another console: applied");
      return true;
    };
    const next = this.chain.then(run, run);
    this.chain = next.catch(() => {});
    return next;
  }

  private apply(record: PatternsRecord): void {
    this.applied = record;
    if (record.stamp > this.judged) this.judged = record.stamp;
    this.state = { patterns: record.patterns, source: "console", updatedAt: record.updatedAt, updatedBy: record.updatedBy, revision: record.stamp };
    this.matchers.clear();
    for (const listener of this.listeners) {
      try {
        listener(this.state);
      } catch (error) {
        getLogger().error({ err: error }, "a lock-patterns listener failed");
      }
    }
  }

  private writeFile(record: PatternsRecord): void {
    const body: PatternsRecord = { ...record, basedOn: [...this.configured] };
    makeDirs(path.dirname(this.file));
    const tmp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o600 });
    renameSync(tmp, this.file);
  }

  private load(): PatternsState {
    const fromConfig: PatternsState = { patterns: this.configured.map((glob) => ({ glob })), source: "config", updatedAt: null, updatedBy: null, revision: "config" };
    let text: string;
    tightenDataFile(this.file);
    try {
      text = readFileSync(this.file, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") getLogger().error({ file: this.file, err: errorText(error) }, "lock patterns file unreadable; using LOCK_PATTERNS");
      return fromConfig;
    }
    const parsed = parsePatternsRecord(text);
    if ("problem" in parsed) {
      if (parsed.problem === "damaged") getLogger().error({ file: this.file }, "lock patterns file is damaged; using LOCK_PATTERNS until the patterns are saved again");
      else getLogger().error({ file: this.file, problem: parsed.problem }, "lock patterns file has a pattern the console cannot use; using LOCK_PATTERNS until the patterns are saved again");
      return fromConfig;
    }
    const { record } = parsed;
    this.judged = record.stamp;
    if (!sameList(record.basedOn, this.configured)) {
      getLogger().info({ file: this.file }, "LOCK_PATTERNS changed since the patterns were last edited in the console; using LOCK_PATTERNS");
      return fromConfig;
    }
    this.applied = record;
    return { patterns: record.patterns, source: "console", updatedAt: record.updatedAt, updatedBy: record.updatedBy, revision: record.stamp };
  }
}

/** A stamp later than `after` (a stamp, or "" for none) and not earlier than `at`: an audit id of the later time. */
function stampAfter(after: string, at: number): string {
  return newAuditId(Math.max(Math.trunc(at), (Number(after.slice(0, 13)) || 0) + 1));
}

function errorText(error: unknown): string {
  if (error instanceof Error) return (error as NodeJS.ErrnoException).code ?? error.message.slice(0, 200);
  return String(error).slice(0, 200);
}

/** The process's pattern store: `<data dir>/patterns.json` over `LOCK_PATTERNS`. */
export function getPatternStore(): PatternStore {
  return singleton("pattern-store", () => {
    const config = getConfig();
    return new PatternStore(path.join(config.dataDir, "patterns.json"), config.lockPatterns);
  });
}

/** The nodes a change's ACL check could not ask, as the answer names them. */
function notCheckedWords(nodes: readonly string[]): string {
  return `Not checked (no answer within ${PATTERN_ACCESS_CHECK_MS / 1000} s): ${nodes.join(", ")}`;
}

/** The audit service registers itself here (kept on globalThis: the routes are bundled apart from it). */
export function setPatternsAuditor(auditor: PatternsAuditor): void {
  setGlobal("patterns-auditor", auditor);
}

/** `PUT /api/patterns`: who asked and why, from the request; refused (503) while no auditor is registered. */
export async function changePatterns(input: { patterns: PatternEntry[]; reason: string; revision?: string; principal: Principal; request: Request }) {
  const auditor = peekGlobal<PatternsAuditor>("patterns-auditor");
  if (!auditor) throw new ApiError("unavailable", "Pattern changes cannot be audited on this console yet, so they are refused; nothing changed.");
  const store = getPatternStore();
  // Where the patterns are shared, the nodes are read first: the revision is checked against the newest change.
  const { state, auditId, shared, notChecked } = await store.replace(
    input.patterns,
    {
      actor: input.principal.actor,
      role: input.principal.role,
      reason: input.reason,
      ip: clientIp(input.request.headers),
      userAgent: input.request.headers.get("user-agent")?.slice(0, 300) ?? null,
    },
    auditor,
    input.revision,
  );
  return { ...state, auditId, ...(shared ? { shared } : {}), ...(notChecked.length > 0 ? { notChecked } : {}) };
}

/** Why `resource` is not served as a lock, naming the lock patterns in force (an operator may have changed them). */
export function notALockKey(resource: string): string {
  if (isNeverLock(resource)) return `\`${resource.slice(0, 200)}\` is a key kept beside a lock (its fence, waiting queue, lease or this console's own), never a lock.`;
  const patterns = getPatternStore().current().patterns.map((x) => x.glob);
  return `\`${resource.slice(0, 200)}\` is not a lock key: it matches none of the lock patterns (${patterns.join(", ")}). Add a pattern for it (PUT /api/patterns, or "Lock patterns and discovery" on the locks page).`;
}
