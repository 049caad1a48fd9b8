/**
 * Counts in fixed time buckets over a sliding window (attempts per minute, acquisitions per second).
 * Memory is the bucket array, whatever the rate; nothing is queued per event.
 */
export class BucketCounter {
  private readonly counts: Float64Array;
  /** Index (time / bucketMs) of the newest bucket written. */
  private head = -1;

  constructor(
    readonly bucketMs: number,
    readonly buckets: number,
  ) {
    this.counts = new Float64Array(buckets);
  }

  private advance(now: number): number {
    const index = Math.floor(now / this.bucketMs);
    if (this.head < 0) {
      this.head = index;
    } else if (index > this.head) {
      const steps = Math.min(index - this.head, this.buckets);
      for (let s = 1; s <= steps; s++) this.counts[(this.head + s) % this.buckets] = 0;
      this.head = index;
    }
    return index;
  }

  add(now: number, n = 1): void {
    const index = this.advance(now);
    // A sample from the past (clock step back) still lands in the window when it fits.
    if (this.head - index >= this.buckets) return;
    const slot = ((index % this.buckets) + this.buckets) % this.buckets;
    this.counts[slot] = (this.counts[slot] ?? 0) + n;
  }

  /** Total over the newest buckets spanning `spanMs` (including the current, partial one). */
  sum(now: number, spanMs = this.bucketMs * this.buckets): number {
    this.advance(now);
    const n = Math.min(this.buckets, Math.ceil(spanMs / this.bucketMs));
    let total = 0;
    for (let k = 0; k < n; k++) total += this.counts[(((this.head - k) % this.buckets) + this.buckets) % this.buckets] ?? 0;
    return total;
  }

  /** The newest `count` buckets, oldest first. */
  series(now: number, count = this.buckets): number[] {
    this.advance(now);
    const n = Math.min(count, this.buckets);
    const out: number[] = [];
    for (let k = n - 1; k >= 0; k--) out.push(this.counts[(((this.head - k) % this.buckets) + this.buckets) % this.buckets] ?? 0);
    return out;
  }

  /** True when every bucket in the window is zero. */
  isEmpty(now: number): boolean {
    return this.sum(now) === 0;
  }
}

/** Appends to a list kept at most `cap` long by dropping the oldest entries (in batches, cheaply). */
export function pushCapped<T>(list: T[], item: T, cap: number): void {
  list.push(item);
  if (list.length > cap + Math.max(8, cap >> 3)) list.splice(0, list.length - cap);
}
