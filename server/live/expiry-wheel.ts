import "server-only";

const WHEEL_MS = 100;

/** `wheelAt` of a lock in no bucket. */
export const UNSCHEDULED = -(2 ** 30);

/**
 * A lock the wheel can hold: `wheelAt` is its bucket (`UNSCHEDULED`: none), kept on the lock itself. Buckets
 * count from the first time the wheel is given (earlier times are negative), so the number is a small integer
 * that V8 keeps inside the lock; an epoch-based bucket, about 1.8e10, would be a separately allocated number
 * for every lock (100,000 locks and more).
 */
export interface Scheduled {
  readonly resource: string;
  wheelAt: number;
}

/**
 * Expiry timers in 100 ms buckets. A lock is in one bucket at a time (rescheduling moves it), so a lease
 * renewed every second costs one entry however long it lives.
 */
export class ExpiryWheel {
  private readonly buckets = new Map<number, Set<string>>();
  /** The first bucket not fired yet; null until the first `fire`. */
  private cursor: number | null = null;
  /**
   * The epoch bucket numbered 0: the first time the wheel is given (the wheel reads no clock of its own, so
   * a caller's clock, a test's fixed instant included, is the only one).
   */
  private origin: number | null = null;

  private bucketOf(time: number, round: (x: number) => number): number {
    this.origin ??= Math.floor(time / WHEEL_MS);
    return Math.max(round(time / WHEEL_MS) - this.origin, UNSCHEDULED + 1);
  }

  schedule(lock: Scheduled, at: number): void {
    const due = this.bucketOf(at, Math.ceil);
    const bucket = this.cursor === null ? due : Math.max(due, this.cursor);
    if (lock.wheelAt === bucket) return;
    this.unschedule(lock);
    lock.wheelAt = bucket;
    const set = this.buckets.get(bucket);
    if (set) set.add(lock.resource);
    else this.buckets.set(bucket, new Set([lock.resource]));
  }

  unschedule(lock: Scheduled): void {
    if (lock.wheelAt === UNSCHEDULED) return;
    const set = this.buckets.get(lock.wheelAt);
    if (set) {
      set.delete(lock.resource);
      if (set.size === 0) this.buckets.delete(lock.wheelAt);
    }
    lock.wheelAt = UNSCHEDULED;
  }

  /**
   * Takes every bucket due by `now` and calls `due` with each lock still in it (`find` gives the lock of a
   * resource, or undefined when it is gone). A lock it is called with is scheduled nowhere: `due` may
   * schedule it again.
   */
  fire<T extends Scheduled>(now: number, find: (resource: string) => T | undefined, due: (lock: T) => void): void {
    const last = this.bucketOf(now, Math.floor);
    // The first time, after a long pause or a clock step: walk the scheduled buckets rather than every empty
    // one in between.
    const slots = this.cursor === null || last - this.cursor > 1_000 ? [...this.buckets.keys()].filter((k) => k <= last).sort((a, b) => a - b) : null;
    if (slots) this.cursor = last + 1;
    for (let k = 0; slots ? k < slots.length : (this.cursor as number) <= last; k++) {
      const slot = slots ? (slots[k] as number) : (this.cursor as number);
      if (!slots) this.cursor = slot + 1;
      const bucket = this.buckets.get(slot);
      if (!bucket) continue;
      this.buckets.delete(slot);
      for (const resource of bucket) {
        const lock = find(resource);
        if (!lock || lock.wheelAt !== slot) continue;
        lock.wheelAt = UNSCHEDULED;
        due(lock);
      }
    }
  }

  sizes(): { entries: number; buckets: number } {
    let entries = 0;
    for (const set of this.buckets.values()) entries += set.size;
    return { entries, buckets: this.buckets.size };
  }
}
