import "server-only";

const WHEEL_MS = 100;

/**
 * A lock the wheel can hold: `wheelAt` is its bucket (0: none), kept on the lock itself. Buckets count from the
 * wheel's creation, so the number is a small integer that V8 keeps inside the lock (an epoch-based bucket,
 * about 1.7e10, would be a separately allocated number for every lock: 100,000 locks and more).
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
  private cursor: number;
  /** The epoch bucket just before the wheel's first: bucket numbers start at 1. */
  private readonly origin: number;

  constructor(now = Date.now()) {
    this.origin = Math.floor(now / WHEEL_MS) - 1;
    this.cursor = 1;
  }

  schedule(lock: Scheduled, at: number): void {
    const bucket = Math.max(Math.ceil(at / WHEEL_MS) - this.origin, this.cursor);
    if (lock.wheelAt === bucket) return;
    this.unschedule(lock);
    lock.wheelAt = bucket;
    const set = this.buckets.get(bucket);
    if (set) set.add(lock.resource);
    else this.buckets.set(bucket, new Set([lock.resource]));
  }

  unschedule(lock: Scheduled): void {
    if (lock.wheelAt === 0) return;
    const set = this.buckets.get(lock.wheelAt);
    if (set) {
      set.delete(lock.resource);
      if (set.size === 0) this.buckets.delete(lock.wheelAt);
    }
    lock.wheelAt = 0;
  }

  /**
   * Takes every bucket due by `now` and calls `due` with each lock still in it (`find` gives the lock of a
   * resource, or undefined when it is gone). A lock it is called with is scheduled nowhere: `due` may
   * schedule it again.
   */
  fire<T extends Scheduled>(now: number, find: (resource: string) => T | undefined, due: (lock: T) => void): void {
    const last = Math.floor(now / WHEEL_MS) - this.origin;
    // After a long pause (or a clock step) walk the scheduled buckets rather than every empty one in between.
    const slots = last - this.cursor > 1_000 ? [...this.buckets.keys()].filter((k) => k <= last).sort((a, b) => a - b) : null;
    if (slots) this.cursor = last + 1;
    for (let k = 0; slots ? k < slots.length : this.cursor <= last; k++) {
      const slot = slots ? (slots[k] as number) : this.cursor++;
      const bucket = this.buckets.get(slot);
      if (!bucket) continue;
      this.buckets.delete(slot);
      for (const resource of bucket) {
        const lock = find(resource);
        if (!lock || lock.wheelAt !== slot) continue;
        lock.wheelAt = 0;
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
