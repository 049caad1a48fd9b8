import "server-only";

/** An ended lock stays in the table this long (showing how it ended) before it leaves the list. */
export const LINGER_MS = 5_000;
/** Ended locks whose timeline stays available on the lock page. */
export const RECENT_CAP = 10_000;
export const RECENT_TTL_MS = 30 * 60_000;

/**
 * Keys in the order they came, each with what it came with, for a map whose oldest entries go first: the map says
 * what is current, this says in what order. V8 leaves a hole in a `Map`'s table for each entry deleted, until the
 * table is rebuilt, and an iterator starts at the first slot: finding a map's oldest entry after its oldest were
 * deleted one by one passed over every hole (about 6 µs for each ended lock a churn kept, twice, with 10,000 kept).
 * An entry here is stale once the map no longer holds the key with that value (taken, or moved to the back).
 */
class Arrivals<V> {
  private keys: string[] = [];
  private values: V[] = [];
  private head = 0;

  push(key: string, value: V): void {
    this.keys.push(key);
    this.values.push(value);
  }

  /** The oldest current entry's key (stale ones before it dropped), or undefined. */
  oldest(current: ReadonlyMap<string, V>): string | undefined {
    while (this.head < this.keys.length) {
      const key = this.keys[this.head] as string;
      if (current.get(key) === this.values[this.head]) return key;
      this.head += 1;
    }
    this.reset();
    return undefined;
  }

  /** Drops the oldest entry (the one `oldest` named). */
  shift(): void {
    this.head += 1;
    if (this.head >= 1_024 && this.head * 2 >= this.keys.length) {
      this.keys = this.keys.slice(this.head);
      this.values = this.values.slice(this.head);
      this.head = 0;
    }
  }

  /** Stale entries are most of it (keys ended again and again): rebuilt from `current`, in its order (the same). */
  tidy(current: ReadonlyMap<string, V>): void {
    if (this.keys.length - this.head <= 2 * current.size + 1_024) return;
    this.keys = [...current.keys()];
    this.values = [...current.values()];
    this.head = 0;
  }

  private reset(): void {
    this.keys = [];
    this.values = [];
    this.head = 0;
  }
}

/**
 * What is kept of ended locks: listed for `LINGER_MS` after they end, then kept off the list (for their
 * page) up to `RECENT_CAP` of them for `RECENT_TTL_MS`.
 */
export class Retention<T extends { endedAt: number | null }> {
  /** Ended locks still listed, with when they ended (a re-ended lock moves to the back): `lingeringOrder` has their order. */
  private readonly lingering = new Map<string, number>();
  private readonly lingeringOrder = new Arrivals<number>();
  /** Ended locks off the list, oldest first: `recentOrder` has their order. */
  private readonly recent = new Map<string, T>();
  private readonly recentOrder = new Arrivals<T>();

  /** `forget`: called with each lock no longer kept (past `RECENT_CAP` or `RECENT_TTL_MS`, or replaced). */
  constructor(private readonly forget: (lock: T) => void = () => {}) {}

  /** The lock ended at `now`: it stays listed a while. */
  linger(resource: string, now: number): void {
    this.lingering.delete(resource);
    this.lingering.set(resource, now);
    this.lingeringOrder.push(resource, now);
    this.lingeringOrder.tidy(this.lingering);
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
    for (let resource = this.lingeringOrder.oldest(this.lingering); resource !== undefined; resource = this.lingeringOrder.oldest(this.lingering)) {
      const endedAt = this.lingering.get(resource) as number;
      if (now - endedAt < LINGER_MS) break;
      this.lingeringOrder.shift();
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
    this.recentOrder.push(resource, lock);
    this.recentOrder.tidy(this.recent);
    for (let kept = this.recentOrder.oldest(this.recent); kept !== undefined; kept = this.recentOrder.oldest(this.recent)) {
      const ended = this.recent.get(kept) as T;
      if (this.recent.size <= RECENT_CAP && (ended.endedAt === null || now - ended.endedAt <= RECENT_TTL_MS)) break;
      this.recentOrder.shift();
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
