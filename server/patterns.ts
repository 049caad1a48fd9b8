import "server-only";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { CONSOLE_KEYS } from "@/lib/locks/formats/defaults";
import type { LockScope } from "@/lib/locks/formats";
import { globMatcher, globProblem } from "@/lib/locks/glob";
import { newAuditId } from "./audit/records";
import { AuditNotDurableError } from "./audit/store";
import { clientIp, type Principal } from "./auth";
import { getConfig } from "./config";
import { ApiError } from "./errors";
import { peekGlobal, setGlobal, singleton } from "./global";
import { getLogger } from "./logger";

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
  /** `config`: from LOCK_PATTERNS; `console`: as last changed from the console. */
  source: "config" | "console";
  updatedAt: number | null;
  updatedBy: string | null;
}

export const patternEntrySchema = z
  .object({
    glob: z
      .string()
      .min(1, "a glob is at least one character")
      .max(200, "a glob is at most 200 characters")
      .regex(/^[^\s,]+$/, "a glob has no spaces or commas"),
    scope: z.enum(["quorum", "single"]).optional(),
  })
  .strict();

export const putPatternsSchema = z
  .object({
    patterns: z.array(patternEntrySchema).min(1, "keep at least one pattern").max(32, "at most 32 patterns"),
    reason: z.string().trim().min(3, "say why in 3 to 500 characters").max(500, "say why in 3 to 500 characters"),
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

interface PatternsFile {
  version: 1;
  patterns: PatternEntry[];
  updatedAt: number;
  updatedBy: string;
  /** The LOCK_PATTERNS in force when this was written. */
  basedOn: string[];
}

const fileSchema = z.object({
  version: z.literal(1),
  patterns: z.array(patternEntrySchema).min(1).max(32),
  updatedAt: z.number(),
  updatedBy: z.string(),
  basedOn: z.array(z.string()),
});

const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/** Why a pattern list cannot be used, for the operator; null when it can. */
export function patternsProblem(patterns: readonly PatternEntry[]): string | null {
  const seen = new Set<string>();
  for (const { glob } of patterns) {
    if (seen.has(glob)) return `\`${glob}\` is listed twice.`;
    seen.add(glob);
    const unlike = globProblem(glob);
    if (unlike) return unlike;
    const matches = globMatcher(glob);
    const own = CONSOLE_KEYS.find(matches);
    if (own) return `\`${glob}\` matches \`${own}\`, one of the console's own keys (its audit log, its lab runs), which must never be shown or released as a lock.`;
  }
  return null;
}

export class PatternStore {
  private state: PatternsState;
  private readonly listeners = new Set<(state: PatternsState) => void>();
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly file: string,
    private readonly configured: readonly string[],
  ) {
    this.state = this.load();
  }

  current(): PatternsState {
    return this.state;
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

  /** Called with the new state after every applied change; returns the unsubscribe function. */
  onChange(listener: (state: PatternsState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Replaces the patterns: validated, audited (intent first; a failing auditor refuses the change), written to
   * the file (a failed write refuses it too), then applied and announced. Changes run one at a time.
   */
  replace(
    patterns: PatternEntry[],
    meta: { actor: string; role: Principal["role"]; reason: string; ip: string; userAgent: string | null },
    auditor: PatternsAuditor,
  ): Promise<{ state: PatternsState; auditId: string }> {
    const run = async () => {
      const problem = patternsProblem(patterns);
      if (problem) throw new ApiError("unprocessable", problem);
      const at = Date.now();
      const change: PatternsChange = { id: newAuditId(at), at, action: "patterns-changed", previous: this.state.patterns, patterns, ...meta };
      try {
        await auditor.recordIntent(change);
      } catch (error) {
        const why = error instanceof AuditNotDurableError ? error.why : errorText(error);
        throw new ApiError("unavailable", `The audit log cannot record this change, so the patterns were not changed: ${why}.`);
      }
      const body: PatternsFile = { version: 1, patterns, updatedAt: at, updatedBy: meta.actor, basedOn: [...this.configured] };
      try {
        mkdirSync(path.dirname(this.file), { recursive: true });
        const tmp = `${this.file}.${process.pid}.tmp`;
        writeFileSync(tmp, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o600 });
        renameSync(tmp, this.file);
      } catch (error) {
        await auditor.recordOutcome(change.id, "failed").catch(() => {});
        throw new ApiError("unavailable", `The patterns could not be saved in the data folder (${errorText(error)}); nothing changed.`);
      }
      this.state = { patterns, source: "console", updatedAt: at, updatedBy: meta.actor };
      this.matchers.clear();
      await auditor.recordOutcome(change.id, "applied").catch((error: unknown) => {
        getLogger().warn({ auditId: change.id, err: errorText(error) }, "patterns changed, but the audit outcome could not be recorded");
      });
      for (const listener of this.listeners) {
        try {
          listener(this.state);
        } catch (error) {
          getLogger().error({ err: error }, "a lock-patterns listener failed");
        }
      }
      return { state: this.state, auditId: change.id };
    };
    const next = this.chain.then(run, run);
    this.chain = next.catch(() => {});
    return next;
  }

  private load(): PatternsState {
    const fromConfig: PatternsState = { patterns: this.configured.map((glob) => ({ glob })), source: "config", updatedAt: null, updatedBy: null };
    let text: string;
    try {
      text = readFileSync(this.file, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") getLogger().error({ file: this.file, err: errorText(error) }, "lock patterns file unreadable; using LOCK_PATTERNS");
      return fromConfig;
    }
    let parsed: PatternsFile;
    try {
      parsed = fileSchema.parse(JSON.parse(text));
    } catch {
      getLogger().error({ file: this.file }, "lock patterns file is damaged; using LOCK_PATTERNS until the patterns are saved again");
      return fromConfig;
    }
    const problem = patternsProblem(parsed.patterns);
    if (problem) {
      getLogger().error({ file: this.file, problem }, "lock patterns file has a pattern the console cannot use; using LOCK_PATTERNS until the patterns are saved again");
      return fromConfig;
    }
    if (!sameList(parsed.basedOn, this.configured)) {
      getLogger().info({ file: this.file }, "LOCK_PATTERNS changed since the patterns were last edited in the console; using LOCK_PATTERNS");
      return fromConfig;
    }
    return { patterns: parsed.patterns, source: "console", updatedAt: parsed.updatedAt, updatedBy: parsed.updatedBy };
  }
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

/** The audit service registers itself here (kept on globalThis: the routes are bundled apart from it). */
export function setPatternsAuditor(auditor: PatternsAuditor): void {
  setGlobal("patterns-auditor", auditor);
}

/** `PUT /api/patterns`: who asked and why, from the request; refused (503) while no auditor is registered. */
export async function changePatterns(input: { patterns: PatternEntry[]; reason: string; principal: Principal; request: Request }) {
  const auditor = peekGlobal<PatternsAuditor>("patterns-auditor");
  if (!auditor) throw new ApiError("unavailable", "Pattern changes cannot be audited on this console yet, so they are refused; nothing changed.");
  const { state, auditId } = await getPatternStore().replace(
    input.patterns,
    {
      actor: input.principal.actor,
      role: input.principal.role,
      reason: input.reason,
      ip: clientIp(input.request.headers),
      userAgent: input.request.headers.get("user-agent")?.slice(0, 300) ?? null,
    },
    auditor,
  );
  return { ...state, auditId };
}

/** Why `resource` is not served as a lock, naming the lock patterns in force (an operator may have changed them). */
export function notALockKey(resource: string): string {
  const patterns = getPatternStore().current().patterns.map((x) => x.glob);
  return `\`${resource.slice(0, 200)}\` is not a lock key: it matches none of the lock patterns (${patterns.join(", ")}). Add a pattern for it (PUT /api/patterns, or "Lock patterns and discovery" on the locks page).`;
}
