import "server-only";
import { isDatabaseUnreachable } from "../postgres/errors";
import type { HistoryStore, LockHistoryEvent } from "./types";

/** What the live view calls for every lifecycle event: never blocks, never throws. */
export interface HistorySink {
  record(event: LockHistoryEvent): void;
  /**
   * For a bulk producer (a reconcile recording every lock it finds already held): null while the queue has
   * room, else a promise that resolves once writes have made room (at most `ROOM_WAIT_MS` later). Never
   * waits while the database is failing: then the queue's bound and its drop count hold as for any event.
   */
  room(): Promise<void> | null;
}

/** The longest a bulk producer waits for room in one call. */
export const ROOM_WAIT_MS = 5_000;
/** A bulk producer does not wait for room this long after a write failed. */
const FAILED_LATELY_MS = 30_000;

export interface RecorderOptions {
  /** Events waiting for the database at most; past it new events are dropped and counted. @default 50_000 */
  capacity?: number;
  /** Events per INSERT at most. @default 2_000 */
  batchSize?: number;
  /** How long an event may wait for a fuller batch. @default 250 */
  flushMs?: number;
  /**
   * Tries of one batch the database refuses before it is dropped. Tries that fail because the database does
   * not answer (`unreachable`) do not count: the batch waits, with the rest of the queue, until it is back.
   * @default 5
   */
  attempts?: number;
  /**
   * Whether a failed write failed because the database did not answer, or not in time (its statement timeout
   * cancelled the batch: the database is slow, and the same batch goes through once it keeps up).
   * @default notAnswered
   */
  unreachable?: (error: unknown) => boolean;
  /**
   * The longest lock key recorded, in UTF-8 bytes. PostgreSQL's B-tree indexes take no entry much over
   * 2,700 bytes: one longer key failed the INSERT of its whole batch, and with it every other lock's events
   * in that batch. A longer key's events are dropped and counted instead. @default 2_000
   */
  maxResourceBytes?: number;
  /** Called with how many events were dropped and why (with the key, for one too long). */
  onDrop?: (count: number, why: "queue-full" | "write-failed" | "key-too-long", resource?: string) => void;
  onWritten?: (count: number) => void;
  /** Called once per failed write, with the error. */
  onError?: (error: unknown) => void;
}

/** The longest lock key recorded by default, in UTF-8 bytes (see `RecorderOptions.maxResourceBytes`). */
export const MAX_RECORDED_KEY_BYTES = 2_000;

/** SQLSTATE 57014 (query_canceled): what PostgreSQL answers a statement that ran past the statement timeout. */
const notAnswered = (error: unknown): boolean => isDatabaseUnreachable(error) || (error instanceof Error && (error as Error & { code?: unknown }).code === "57014");

const DEFAULTS = Object.freeze({ capacity: 50_000, batchSize: 2_000, flushMs: 250, attempts: 5, maxResourceBytes: MAX_RECORDED_KEY_BYTES, unreachable: notAnswered });

/**
 * Batches lifecycle events into the history store off the live view's path: `record` only pushes onto a
 * bounded queue; one write runs at a time; when the database is slow or down the queue fills and further
 * events are dropped and counted instead of growing memory or slowing the live view.
 */
export class HistoryRecorder implements HistorySink {
  private queue: LockHistoryEvent[] = [];
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> | null = null;
  /** Writes failed in a row (for the backoff). */
  private failures = 0;
  /** Of those, the ones the database refused (for `attempts`). */
  private refusals = 0;
  /** When a write last failed (epoch ms; 0: never). */
  private failedAt = 0;
  private closed = false;
  /** Bulk producers waiting for the queue to fall to half its capacity. */
  private waiting: Array<() => void> = [];
  private readonly options: Required<Omit<RecorderOptions, "onDrop" | "onWritten" | "onError">> & RecorderOptions;

  constructor(
    private readonly store: Pick<HistoryStore, "insert">,
    options: RecorderOptions = {},
  ) {
    this.options = { ...DEFAULTS, ...options };
  }

  /** Events waiting to be written. */
  get pending(): number {
    return this.queue.length;
  }

  record(event: LockHistoryEvent): void {
    if (this.closed) return;
    // (A key of up to a third of the bound in UTF-16 units is within it whatever its characters.)
    if (event.resource.length * 3 > this.options.maxResourceBytes && Buffer.byteLength(event.resource) > this.options.maxResourceBytes) {
      this.options.onDrop?.(1, "key-too-long", event.resource);
      return;
    }
    if (this.queue.length >= this.options.capacity) {
      this.options.onDrop?.(1, "queue-full");
      return;
    }
    this.queue.push(event);
    if (this.queue.length >= this.options.batchSize) this.kick(0);
    else this.kick(this.options.flushMs);
  }

  room(): Promise<void> | null {
    if (this.closed || this.failingLately() || this.queue.length < this.options.capacity / 2) return null;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ROOM_WAIT_MS);
      timer.unref();
      this.waiting.push(() => {
        clearTimeout(timer);
        resolve();
      });
      this.kick(0);
    });
  }

  /**
   * A write failed within `FAILED_LATELY_MS` (a batch being retried keeps it so; one given up after its tries
   * resets the retry count, not this).
   */
  private failingLately(): boolean {
    return this.failedAt > 0 && Date.now() - this.failedAt < FAILED_LATELY_MS;
  }

  /** Wakes the bulk producers once the queue is below half its capacity (or writing failed: they must not wait on it). */
  private wakeWaiting(): void {
    if (this.waiting.length === 0) return;
    if (!this.closed && !this.failingLately() && this.queue.length >= this.options.capacity / 2) return;
    const waiting = this.waiting;
    this.waiting = [];
    for (const wake of waiting) wake();
  }

  /**
   * Writes everything queued (shutdown, tests, before the unseen-holds check). Resolves true once the queue is
   * empty, false as soon as a write failed (the events stay queued).
   */
  async flush(): Promise<boolean> {
    for (;;) {
      if (this.writing) await this.writing;
      if (this.queue.length === 0) return true;
      const before = this.failures;
      await this.writeOnce();
      if (this.failures > before) return false;
    }
  }

  /**
   * Takes no more events and writes those queued: resolves once they are written, a write failed, or `waitMs`
   * passed (a database that does not answer holds a write for its whole timeout: the shutdown cannot wait for it).
   * What is left then is `pending` (a write still in flight counted with it).
   */
  async close(waitMs = Number.POSITIVE_INFINITY): Promise<void> {
    this.closed = true;
    this.wakeWaiting();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (!Number.isFinite(waitMs)) {
      await this.flush();
      return;
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.flush(), new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
  }

  private kick(delayMs: number): void {
    if (this.writing) return;
    if (this.timer && delayMs > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.writeOnce().then(() => {
        if (this.queue.length > 0 && !this.closed) this.kick(this.failures > 0 ? Math.min(5_000, this.options.flushMs * 2 ** this.failures) : 0);
      });
    }, delayMs);
    // A pending flush must not keep a finished process (a benchmark, a test) alive.
    this.timer.unref();
  }

  private writeOnce(): Promise<void> {
    if (this.writing) return this.writing;
    const batch = this.queue.slice(0, this.options.batchSize);
    if (batch.length === 0) return Promise.resolve();
    const run = (async () => {
      try {
        await this.store.insert(batch);
        this.queue.splice(0, batch.length);
        this.failures = 0;
        this.refusals = 0;
        this.options.onWritten?.(batch.length);
      } catch (error) {
        this.failures += 1;
        this.failedAt = Date.now();
        this.options.onError?.(error);
        // The batch stays at the head of the queue (the queue's bound still holds) and is retried with a
        // backoff. A batch the database keeps refusing is given up so it cannot block the rest for ever; while
        // the database does not answer at all, nothing is given up: the queue waits for it (up to `capacity`).
        if (!this.options.unreachable(error)) this.refusals += 1;
        if (this.refusals >= this.options.attempts) {
          this.queue.splice(0, batch.length);
          this.failures = 0;
          this.refusals = 0;
          this.options.onDrop?.(batch.length, "write-failed");
        }
      } finally {
        this.writing = null;
        this.wakeWaiting();
      }
    })();
    this.writing = run;
    return run;
  }
}
