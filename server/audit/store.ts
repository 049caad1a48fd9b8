import "server-only";
import { brand, instanceOf } from "../global";
import type { AuditEntry, AuditFilters, AuditNodeResult, AuditOutcome, AuditPage } from "./types";

/**
 * Where the audit log lives. One kind per file: `log.ts` (the append-only file and the nodes' Redis
 * stream, the zero-set-up default) and `postgres.ts` (AUDIT_DATABASE_URL). The release speaks only to this.
 */
export interface AuditStore {
  readonly kind: "file-and-stream" | "postgres";
  /** Makes the intent durable before anything is deleted; throws `AuditNotDurableError` when it cannot. */
  recordIntent(entry: AuditEntry): Promise<void>;
  /**
   * Records how the release ended, at `finishedAt` (epoch ms on the console's clock, as the entry's `at`, so that
   * the two compare). Best effort: the release already happened.
   */
  recordOutcome(id: string, outcome: AuditOutcome, nodes: AuditNodeResult[], finishedAt: number): Promise<{ durable: boolean }>;
  /** A page of entries, newest first; throws `AuditReadError` when nothing can be read. */
  list(options: { limit: number; before?: string; filters: AuditFilters }): Promise<AuditPage>;
  /** Waits for writes in flight (shutdown). */
  drain(): Promise<void>;
}

/**
 * The audit entry could not be made durable: what it records must not proceed (503, nothing changed). `why` says
 * what failed, in words that fit after "the audit log cannot record it:"; each caller says what was not done.
 * `mayLand`: the store did not answer, and may still take the entry (a commit that was slow, not refused): its
 * outcome must then be recorded as `refused`, or it would read `pending` ("stopped mid-release") for good.
 */
export class AuditNotDurableError extends Error {
  static readonly [brand] = "AuditNotDurableError";
  static override [Symbol.hasInstance](value: unknown): value is AuditNotDurableError {
    return instanceOf(this, value);
  }

  constructor(
    readonly why: string,
    readonly mayLand = false,
  ) {
    super(`The audit log cannot record this: ${why}.`);
    this.name = "AuditNotDurableError";
  }
}

export class AuditReadError extends Error {
  static readonly [brand] = "AuditReadError";
  static override [Symbol.hasInstance](value: unknown): value is AuditReadError {
    return instanceOf(this, value);
  }

  constructor(message: string) {
    super(message);
    this.name = "AuditReadError";
  }
}
