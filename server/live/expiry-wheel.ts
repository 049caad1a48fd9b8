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

/** One bucket: the resources scheduled in it (some since moved on: see `ExpiryWheel`) and how many are still here. */
interface Bucket {
  items: string[];
  live: number;
}

/**
 * Expiry timers in 100 ms buckets. A lock is in one bucket at a time: its `wheelAt`. A bucket is an array its
 * resources are pushed onto (a set's insertion hashes the key and grows a hash table: at a million locks
 * found at start, 2.6 s of the start-up's main thread, and tens of MB); a lock moved to another bucket
 * stays in the old one's array until that fires or is compacted (when it holds more than twice as many
 * moved-on entries as live ones), and firing skips it (its `wheelAt` names the other bucket).
 */
export class ExpiryWheel<T extends Scheduled> {
  private readonly buckets = new Map<number, Bucket>();
  /** The first bucket not fired yet; null until the first `fire`. */
  private cursor: number | null = null;
  /**
   * The epoch bucket numbered 0: the first time the wheel is given (the wheel reads no clock of its own, so
   * a caller's clock, a test's fixed instant included, is the only one).
   */
  private origin: number | null = null;

  /** `find`: the lock of a resource, or undefined when it is gone (to fire a bucket, and to compact one). */
  constructor(private readonly find: (resource: string) => T | undefined) {}

  private bucketOf(time: number, round: (x: number) => number): number {
    this.origin ??= Math.floor(time / WHEEL_MS);
    return Math.max(round(time / WHEEL_MS) - this.origin, UNSCHEDULED + 1);
  }

  /** When bucket `slot` (a lock's `wheelAt`) fires at the earliest (epoch ms): scheduled at this time, a lock goes back into it. */
  timeOf(slot: number): number {
    return (slot + (this.origin ?? 0)) * WHEEL_MS;
  }

  schedule(lock: Scheduled, at: number): void {
    const due = this.bucketOf(at, Math.ceil);
    const slot = this.cursor === null ? due : Math.max(due, this.cursor);
    if (lock.wheelAt === slot) return;
    this.unschedule(lock);
    lock.wheelAt = slot;
    const bucket = this.buckets.get(slot);
    if (bucket) {
      bucket.items.push(lock.resource);
      bucket.live += 1;
    } else this.buckets.set(slot, { items: [lock.resource], live: 1 });
  }

  unschedule(lock: Scheduled): void {
    const slot = lock.wheelAt;
    const bucket = this.leave(lock);
    if (bucket !== null && bucket.items.length > 2 * bucket.live + 64) {
      // (A resource moved away and back is in the array twice: kept once.)
      bucket.items = [...new Set(bucket.items.filter((resource) => this.find(resource)?.wheelAt === slot))];
      bucket.live = bucket.items.length;
    }
  }

  /**
   * `unschedule`, without compacting the lock's bucket: for many locks leaving buckets at once, each likely to
   * empty its bucket (which is then dropped whole). A compaction on the way, of buckets of thousands of locks, would
   * look each of their resources up again, and again at each halving, for nothing. What is left in a bucket that
   * does not empty goes when it fires, or at a compaction that an `unschedule` makes.
   */
  forget(lock: Scheduled): void {
    this.leave(lock);
  }

  /** Takes the lock out of its bucket (dropped once empty); the bucket if others are still in it, else null. */
  private leave(lock: Scheduled): Bucket | null {
    const slot = lock.wheelAt;
    if (slot === UNSCHEDULED) return null;
    lock.wheelAt = UNSCHEDULED;
    const bucket = this.buckets.get(slot);
    if (!bucket) return null;
    // The last one scheduled there (a lock found at start and kept cold as soon as it is merged): its entry goes
    // too, or a bucket that other locks keep would hold a million found locks' names until it fires.
    if (bucket.items[bucket.items.length - 1] === lock.resource) bucket.items.pop();
    bucket.live -= 1;
    if (bucket.live > 0) return bucket;
    this.buckets.delete(slot);
    return null;
  }

  /**
   * Takes every bucket due by `now` and calls `due` with each lock still in it. A lock it is called with is
   * scheduled nowhere: `due` may schedule it again.
   */
  fire(now: number, due: (lock: T) => void): void {
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
      for (const resource of bucket.items) {
        const lock = this.find(resource);
        if (!lock || lock.wheelAt !== slot) continue;
        lock.wheelAt = UNSCHEDULED;
        due(lock);
      }
    }
  }

  /** Locks scheduled, and buckets. */
  sizes(): { entries: number; buckets: number } {
    let entries = 0;
    for (const bucket of this.buckets.values()) entries += bucket.live;
    return { entries, buckets: this.buckets.size };
  }
}
