import { percentile, round1 } from "./stats";
import type { Tally } from "./strategy";
import type { SeriesPoint } from "./types";

/** At most this many chart points per run: past it the resolution halves, so the chart keeps the whole run. */
const MAX_SERIES_POINTS = 600;

const nullableRound = (n: number | null) => (n === null ? null : Math.round(n * 100) / 100);

/**
 * The run's chart: one point per kept sample, with the rate and the waits since the previous point. Past
 * MAX_SERIES_POINTS every other point is dropped and from then on every other sample is kept, so the points stay
 * evenly spaced from t = 0 (the stock at the start) to the run's final sample, which is always kept.
 */
export class Sampler {
  readonly #series: SeriesPoint[] = [];
  #last = { t: 0, sold: 0, waits: 0 };
  /** A point is kept every `#every` samples (1, then 2, 4… once thinned). */
  #every = 1;
  #skipped = 0;

  /** The first point, before any worker starts. */
  start(stock: number): void {
    this.#series.push({ t: 0, sold: 0, stock, ordersPerSec: 0, waitP50Ms: null, waitP99Ms: null });
  }

  /** A sample at `t` ms into the run from the tally so far and the last stock read; `final`: the run's last, always kept. */
  sample(t: number, tally: Tally, stock: number | null, { final = false } = {}): void {
    this.#skipped += 1;
    if (!final && this.#skipped < this.#every) return;
    this.#skipped = 0;
    const previous = this.#last;
    const dt = t - previous.t;
    const waits = tally.waits.slice(previous.waits);
    this.#series.push({
      t,
      sold: tally.sold,
      stock,
      ordersPerSec: dt > 0 ? round1(((tally.sold - previous.sold) * 1000) / dt) : 0,
      waitP50Ms: nullableRound(percentile(waits, 50)),
      waitP99Ms: nullableRound(percentile(waits, 99)),
    });
    this.#last = { t, sold: tally.sold, waits: tally.waits.length };
    if (this.#series.length > MAX_SERIES_POINTS) {
      // Points 0, 2, 4…: the start stays, and so does the newest (the count is odd here, its index even).
      const kept = this.#series.filter((_, i) => i % 2 === 0 || i === this.#series.length - 1);
      this.#series.length = 0;
      this.#series.push(...kept);
      this.#every *= 2;
    }
  }

  series(): SeriesPoint[] {
    return this.#series.slice();
  }
}
