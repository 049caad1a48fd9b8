import type { RunResult } from "@/lib/lab/types";

/** A finished lab run's result for the screens' tests: 100 of 100 sold, nothing lost; `over` changes what a test is about. */
export const labResult = (over: Partial<RunResult> = {}): RunResult => ({
  sold: 100,
  remaining: 0,
  lostUpdates: 0,
  oversold: 0,
  stockNeverNegative: true,
  ordersPerSec: 50,
  waitP50Ms: 1,
  waitP99Ms: 10,
  retries: 0,
  staleWritesRejected: 0,
  durationMs: 2000,
  orders: 100,
  locksLost: 0,
  releaseErrors: 0,
  errors: 0,
  waitingAtStop: 0,
  ...over,
});
