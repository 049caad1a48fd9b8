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
  /** How many waits the tally held at each point of `#series` (same index): a merged interval's waits are re-read from it. */
  readonly #waitsAt: number[] = [];
  #last = { t: 0, sold: 0, waits: 0 };
  /** A point is kept every `#every` samples (1, then 2, 4… once thinned). */
  #every = 1;
  #skipped = 0;

  /** The first point, before any worker starts. */
  start(stock: number): void {
    this.#series.push({ t: 0, sold: 0, stock, ordersPerSec: 0, waitP50Ms: null, waitP99Ms: null });
    this.#waitsAt.push(0);
  }

  /** A sample at `t` ms into the run from the tally so far and the last stock read; `final`: the run's last, always kept. */
  sample(t: number, tally: Tally, stock: number | null, { final = false } = {}): void {
    this.#skipped += 1;
    if (!final && this.#skipped < this.#every) return;
    this.#skipped = 0;
    const previous = this.#last;
    this.#series.push(point(t, tally, stock, previous, tally.waits.length));
    this.#waitsAt.push(tally.waits.length);
    this.#last = { t, sold: tally.sold, waits: tally.waits.length };
    if (this.#series.length > MAX_SERIES_POINTS) {
      // Points 0, 2, 4…: the start stays, and so does the newest (the count is odd here, its index even). A kept
      // point now stands for its interval and the dropped one before it: its rate and waits are worked out again
      // over both, so a burst or a long wait in a dropped interval stays on the chart.
      const kept: SeriesPoint[] = [];
      const keptWaitsAt: number[] = [];
      this.#series.forEach((p, i) => {
        if (i % 2 !== 0 && i !== this.#series.length - 1) return;
        const before = kept.at(-1);
        const waitsAt = this.#waitsAt[i]!;
        kept.push(before ? point(p.t, { sold: p.sold, waits: tally.waits }, p.stock, { t: before.t, sold: before.sold, waits: keptWaitsAt.at(-1)! }, waitsAt) : p);
        keptWaitsAt.push(waitsAt);
      });
      this.#series.length = 0;
      this.#series.push(...kept);
      this.#waitsAt.length = 0;
      this.#waitsAt.push(...keptWaitsAt);
      this.#every *= 2;
    }
  }

  series(): SeriesPoint[] {
    return this.#series.slice();
  }
}

/** The point at `t`, over the interval since `previous`: units sold per second, and the waits `previous.waits` to `waitsTo`. */
function point(
  t: number,
  tally: Pick<Tally, "sold" | "waits">,
  stock: number | null,
  previous: { t: number; sold: number; waits: number },
  waitsTo: number,
): SeriesPoint {
  const dt = t - previous.t;
  const waits = tally.waits.slice(previous.waits, waitsTo);
  return {
    t,
    sold: tally.sold,
    stock,
    ordersPerSec: dt > 0 ? round1(((tally.sold - previous.sold) * 1000) / dt) : 0,
    waitP50Ms: nullableRound(percentile(waits, 50)),
    waitP99Ms: nullableRound(percentile(waits, 99)),
  };
}
