import { percentile, round1 } from "./stats";
import type { Tally } from "./strategy";
import type { SeriesPoint } from "./types";

/** At most this many chart points per run: past it the resolution halves, so the chart keeps the whole run. */
const MAX_SERIES_POINTS = 600;

const nullableRound = (n: number | null) => (n === null ? null : Math.round(n * 100) / 100);

/** The run's chart: one point per sample, with the rate and the waits since the previous one. */
export class Sampler {
  readonly #series: SeriesPoint[] = [];
  #last = { t: 0, sold: 0, waits: 0 };

  /** The first point, before any worker starts. */
  start(stock: number): void {
    this.#series.push({ t: 0, sold: 0, stock, ordersPerSec: 0, waitP50Ms: null, waitP99Ms: null });
  }

  /** A point at `t` ms into the run from the tally so far and the last stock read. */
  sample(t: number, tally: Tally, stock: number | null): void {
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
      const kept = this.#series.filter((_, i) => i % 2 === 1);
      this.#series.length = 0;
      this.#series.push(...kept);
    }
  }

  series(): SeriesPoint[] {
    return this.#series.slice();
  }
}
