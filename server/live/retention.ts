import "server-only";

/** An ended lock stays in the table this long (showing how it ended) before it leaves the list. */
export const LINGER_MS = 5_000;
/** Ended locks whose timeline stays available on the lock page. */
export const RECENT_CAP = 10_000;
export const RECENT_TTL_MS = 30 * 60_000;

/**
 * What is kept of ended locks: listed for `LINGER_MS` after they end, then kept off the list (for their
 * page) up to `RECENT_CAP` of them for `RECENT_TTL_MS`.
 */
export class Retention<T extends { endedAt: number | null }> {
  /** Ended locks still listed, oldest end first (a Map: removing the head is O(1), and a re-ended lock moves to the back). */
  private readonly lingering = new Map<string, number>();
  /** Ended locks off the list, oldest first. */
  private readonly recent = new Map<string, T>();

  /** `forget`: called with each lock no longer kept (past `RECENT_CAP` or `RECENT_TTL_MS`, or replaced). */
  constructor(private readonly forget: (lock: T) => void = () => {}) {}

  /** The lock ended at `now`: it stays listed a while. */
  linger(resource: string, now: number): void {
    this.lingering.delete(resource);
    this.lingering.set(resource, now);
  }

  /** The lock leaves the list otherwise (its key is not watched any more). */
  stopLingering(resource: string): void {
    this.lingering.delete(resource);
  }

  /**
   * Ended locks listed for `LINGER_MS` by `now`, oldest first: each is no longer lingering, and `leave` is
   * called with the end it lingered for (the lock may have been taken again, or ended again, since).
   */
  lingered(now: number, leave: (resource: string, endedAt: number) => void): void {
    for (const [resource, endedAt] of this.lingering) {
      if (now - endedAt < LINGER_MS) break;
      this.lingering.delete(resource);
      leave(resource, endedAt);
    }
  }

  /** Keeps an ended lock that left the list, for its page. */
  keep(resource: string, lock: T, now: number): void {
    const replaced = this.recent.get(resource);
    this.recent.delete(resource);
    if (replaced !== undefined && replaced !== lock) this.forget(replaced);
    this.recent.set(resource, lock);
    while (this.recent.size > RECENT_CAP) {
      const first = this.recent.entries().next().value;
      if (first === undefined) break;
      this.recent.delete(first[0]);
      this.forget(first[1]);
    }
    for (const [kept, ended] of this.recent) {
      if (ended.endedAt === null || now - ended.endedAt <= RECENT_TTL_MS) break;
      this.recent.delete(kept);
      this.forget(ended);
    }
  }

  /** Every ended lock kept off the list, oldest end first. */
  keptLocks(): IterableIterator<T> {
    return this.recent.values();
  }

  /** The ended lock kept for `resource`, if any. */
  kept(resource: string): T | undefined {
    return this.recent.get(resource);
  }

  /** The ended lock kept for `resource`, no longer kept (it is held again). */
  take(resource: string): T | undefined {
    const lock = this.recent.get(resource);
    if (lock) this.recent.delete(resource);
    return lock;
  }

  sizes(): { lingering: number; recent: number } {
    return { lingering: this.lingering.size, recent: this.recent.size };
  }
}
