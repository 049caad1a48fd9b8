import "server-only";
import { getLogger } from "../logger";
import { AuditNotDurableError, type AuditStore } from "./store";
import type { AuditEntry, AuditFilters, AuditNodeResult, AuditOutcome, AuditPage } from "./types";

/** How often outcomes a store did not take are offered to it again. */
const RETRY_EVERY_MS = 5_000;
/** Outcomes kept waiting at most; past it the oldest is given up (and logged): its entry then reads `pending`. */
const MAX_WAITING = 10_000;

interface Waiting {
  outcome: AuditOutcome;
  nodes: AuditNodeResult[];
  finishedAt: number;
}

/**
 * A store whose outcomes are written until they are durable. The release has happened by the time its outcome
 * is recorded, so an outcome the store did not take (the database, or the nodes' quorum, went away between the
 * intent and the outcome) is kept in memory and offered again every few seconds, with the same result and time,
 * until the store takes it. Meanwhile its entry reads `pending`, and the release answers `outcomeRecorded: false`.
 * Kept in this process only: a console stopped before the store came back leaves those entries `pending` (its
 * log says how many).
 */
export class OutcomeRetryingStore implements AuditStore {
  readonly kind: AuditStore["kind"];
  private readonly waiting = new Map<string, Waiting>();
  private timer: NodeJS.Timeout | null = null;
  private retrying: Promise<void> | null = null;

  constructor(
    private readonly store: AuditStore,
    /** `onWaiting`: told how many outcomes wait, each time that changes (the process's store exports it as a metric). */
    private readonly options: { everyMs?: number; max?: number; onWaiting?: (count: number) => void } = {},
  ) {
    this.kind = store.kind;
  }

  /** Outcomes waiting for the store to take them. */
  get waitingOutcomes(): number {
    return this.waiting.size;
  }

  async recordIntent(entry: AuditEntry): Promise<void> {
    try {
      await this.store.recordIntent(entry);
    } catch (error) {
      // Refused for want of an answer, the entry may still land (a slow commit): it is closed as refused once the
      // store answers, not now (the operator's 503 does not wait for a store that is not answering).
      if (error instanceof AuditNotDurableError && error.mayLand) this.keep(entry.id, { outcome: "refused", nodes: entry.nodes, finishedAt: Date.now() });
      throw error;
    }
  }

  list(options: { limit: number; before?: string; filters: AuditFilters }): Promise<AuditPage> {
    return this.store.list(options);
  }

  async recordOutcome(id: string, outcome: AuditOutcome, nodes: AuditNodeResult[], finishedAt: number): Promise<{ durable: boolean }> {
    const result = await this.attempt(id, { outcome, nodes, finishedAt });
    if (!result) this.keep(id, { outcome, nodes, finishedAt });
    return { durable: result };
  }

  /** Offers every waiting outcome to the store once, oldest first, stopping at the first it does not take. Returns how many still wait. */
  async retry(): Promise<number> {
    this.retrying ??= (async () => {
      for (const [id, waiting] of [...this.waiting]) {
        if (!(await this.attempt(id, waiting))) break;
        this.waiting.delete(id);
        this.options.onWaiting?.(this.waiting.size);
        getLogger().info({ auditId: id, outcome: waiting.outcome }, "audit outcome recorded after the store was back");
      }
    })().finally(() => {
      this.retrying = null;
    });
    await this.retrying;
    return this.waiting.size;
  }

  async drain(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.retrying;
    await this.store.drain();
    if (this.waiting.size === 0) return;
    const left = await this.retry();
    if (left > 0) getLogger().warn({ outcomes: left, auditIds: [...this.waiting.keys()].slice(0, 20) }, "audit outcomes not recorded before shutdown: their entries read pending");
  }

  private async attempt(id: string, waiting: Waiting): Promise<boolean> {
    try {
      return (await this.store.recordOutcome(id, waiting.outcome, waiting.nodes, waiting.finishedAt)).durable;
    } catch {
      // (A store logs its own failures.)
      return false;
    }
  }

  private keep(id: string, waiting: Waiting): void {
    this.waiting.set(id, waiting);
    const max = this.options.max ?? MAX_WAITING;
    for (const oldest of this.waiting.keys()) {
      if (this.waiting.size <= max) break;
      this.waiting.delete(oldest);
      getLogger().error({ auditId: oldest, max }, "audit outcome given up: too many outcomes wait for the audit store; its entry reads pending");
    }
    this.options.onWaiting?.(this.waiting.size);
    this.schedule();
  }

  private schedule(): void {
    if (this.timer || this.waiting.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.retry().then(() => this.schedule());
    }, this.options.everyMs ?? RETRY_EVERY_MS);
    this.timer.unref();
  }
}
