import type Redis from "ioredis";
import type { Redlock } from "@lockscope/redlock";
import type { RunKeys } from "./keys";
import type { RunSettings } from "./settings";
import type { Samples } from "./stats";

/** What a run counts while its workers buy. */
export interface Tally {
  sold: number;
  ordersPlaced: number;
  retries: number;
  staleWritesRejected: number;
  locksLost: number;
  /** Releases that failed on a node error: the lock was left to expire by its TTL (the order itself went through). */
  releaseErrors: number;
  errors: number;
  /** Orders still waiting for the lock when their worker stopped (sold out, cancelled, time limit): no wait counted. */
  waitingAtStop: number;
  minStockSeen: number;
  waits: Samples;
}

/** An order waiting for its lock: when it started waiting, and the lock attempts it has made so far. */
export interface Waiting {
  since: number;
  attempts: number;
}

/** One buyer: its own connections (index 0 is the stock node) and, for Redlock, its own engine. */
export interface Worker {
  index: number;
  clients: Redis[];
  redlock: Redlock | null;
  detach: (() => void) | null;
  /**
   * The order this worker is waiting to lock, kept when a lock attempt fails with an error: the runner places
   * the same order again, and its wait and attempts go on from there instead of starting over.
   */
  waiting: Waiting | null;
}

/** The worker's order waiting for its lock (a new one when none is). */
export function waitingOrder(worker: Worker): Waiting {
  return (worker.waiting ??= { since: performance.now(), attempts: 0 });
}

/** The order got its lock: its wait is counted, from its first attempt (before any error) to now. */
export function lockTaken(worker: Worker, tally: Tally): void {
  if (worker.waiting) tally.waits.push(performance.now() - worker.waiting.since);
  worker.waiting = null;
}

/** Counts `made` more lock attempts of the worker's order; each beyond the order's first is a retry. */
export function countAttempts(order: Waiting, made: number, tally: Tally): void {
  if (made <= 0) return;
  tally.retries += order.attempts === 0 ? made - 1 : made;
  order.attempts += made;
}

export type StepOutcome = "sold" | "sold-out" | "rejected" | "stopped";

/** What a strategy may use of the run it buys in. */
export interface StrategyContext {
  readonly runId: string;
  readonly keys: RunKeys;
  readonly settings: RunSettings;
  readonly tally: Tally;
  /** Stops everything, inside a critical section too. */
  readonly halt: AbortSignal;
  /** Stops placing orders and waiting for locks. */
  readonly close: AbortSignal;
  /** The order's work inside the critical section (and now and then a stall). */
  busy(): Promise<void>;
  /** Counts a sale that left `stockAfter`. */
  sold(stockAfter: number): StepOutcome;
  /** The stock key is gone: the run stops. */
  vanished(): void;
}

/** One way of buying from the stock: one order per `step`. */
export interface Strategy {
  step(worker: Worker, ctx: StrategyContext): Promise<StepOutcome>;
}

/** The flash sale's critical section: read the stock, work, write it back one lower (no fence). */
export async function readWorkWrite(ctx: StrategyContext, client: Redis): Promise<StepOutcome> {
  const raw = await client.get(ctx.keys.stock);
  if (raw === null) {
    // The stock is written before any worker starts and deleted only after the last one ends.
    ctx.vanished();
    return "stopped";
  }
  const stock = Number(raw);
  if (!(stock > 0)) return "sold-out";
  await ctx.busy();
  if (ctx.halt.aborted) return "stopped";
  // KEEPTTL: the stock keeps the TTL the run renews, so a killed run's stock goes by itself.
  await client.set(ctx.keys.stock, String(stock - 1), "KEEPTTL");
  return ctx.sold(stock - 1);
}
