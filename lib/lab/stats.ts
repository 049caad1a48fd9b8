/**
 * Result math for lab runs: pure functions over what the workers counted.
 */

/**
 * The p-th percentile (0..100) by nearest rank over `values`, which it sorts in place; null when empty.
 * Nearest rank returns a value that was actually observed, which is what a reader expects of "p99 wait".
 */
export function percentile(values: Float64Array | number[], p: number): number | null {
  if (values.length === 0) return null;
  if (!(p >= 0 && p <= 100)) throw new RangeError(`Expected \`p\` to be from 0 to 100, got \`${p}\``);
  values.sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * values.length));
  return values[rank - 1]!;
}

/** Lost updates: every sale the workers counted beyond what left the stock (sales of units already sold). */
export function lostUpdates(sold: number, stock: number, remaining: number): number {
  return sold - (stock - remaining);
}

/**
 * Units sold beyond the stock: sales of units that never existed. The stock itself cannot show it: every
 * strategy checks the stock is above 0 before writing it one lower, so it never goes below 0.
 */
export function oversold(sold: number, stock: number): number {
  return Math.max(0, sold - stock);
}

/** Units sold per second (what the API calls `ordersPerSec`). */
export function ordersPerSec(sold: number, durationMs: number): number {
  if (durationMs <= 0) return 0;
  return round1((sold * 1000) / durationMs);
}

/** Rounds to one decimal, for numbers people read. */
export function round1(n: number): number {
  return Math.round(n * 10) / 10;
}

/** How far a run has come: share of the stock sold, or of the orders placed when `orders` caps the run. */
export function progressFraction(options: { stock: number; remaining: number | null; orders?: number; ordersPlaced: number }): number {
  const byStock = options.remaining === null ? 0 : (options.stock - Math.max(0, options.remaining)) / options.stock;
  const byOrders = options.orders ? options.ordersPlaced / options.orders : 0;
  return Math.min(1, Math.max(0, byStock, byOrders));
}

/**
 * A growable list of durations (ms) kept in a Float64Array, so half a million waits cost 4 MB, not an
 * array of boxed numbers.
 */
export class Samples {
  #data = new Float64Array(1024);
  #length = 0;

  push(value: number): void {
    if (this.#length === this.#data.length) {
      const bigger = new Float64Array(this.#data.length * 2);
      bigger.set(this.#data);
      this.#data = bigger;
    }
    this.#data[this.#length++] = value;
  }

  get length(): number {
    return this.#length;
  }

  /** A copy of the values from `from` up to `to` (the end when absent), for per-interval percentiles. */
  slice(from = 0, to = this.#length): Float64Array {
    return this.#data.slice(from, Math.min(to, this.#length));
  }
}
