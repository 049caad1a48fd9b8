import type { RunSettings, Strategy } from "./settings";

/** The numbers a finished run is judged by (the API contract's `result`). */
export interface RunResult {
  /** Orders each worker believed succeeded (its stock write went through). */
  sold: number;
  /** Stock left in Redis at the end. */
  remaining: number;
  /** `sold - (stock - remaining)`: sales of units already sold (a unit sold three times counts twice). */
  lostUpdates: number;
  /** `max(0, sold - stock)`: units sold beyond the stock, which never existed. */
  oversold: number;
  /**
   * Whether every stock value seen (written by a worker or sampled) stayed at zero or above. Kept for
   * compatibility: every strategy checks the stock is above 0 before writing it one lower, so it is always
   * true; overselling shows in `oversold` and `lostUpdates`.
   */
  stockNeverNegative: boolean;
  /** Units sold per second (orders that sold nothing are not counted; the name is kept for compatibility). */
  ordersPerSec: number;
  /**
   * Time to take the lock, per order, from its first attempt (an order placed again after a node error keeps
   * its wait); 0 for strategies without a lock; null for a locking run that never took its lock (nothing measured).
   */
  waitP50Ms: number | null;
  waitP99Ms: number | null;
  /** Lock attempts beyond each order's first (the attempts before a node error included), over all orders. */
  retries: number;
  /** Fenced strategy: stock writes refused because a newer fence had already touched the stock. */
  staleWritesRejected: number;
  durationMs: number;
  /** Orders placed (each a worker's purchase attempt that read the stock). */
  orders: number;
  /** Locks that were gone by the time their holder released them (expired under it). */
  locksLost: number;
  /**
   * Releases that failed on a node error (too few nodes answered), so the lock was left to expire by its TTL:
   * neither a lock known lost nor a failed order (absent from runs recorded before it was added).
   */
  releaseErrors: number;
  /** Orders that failed on a node error (a node down, a timeout) and were placed again. */
  errors: number;
  /**
   * Orders still waiting for the lock when the run stopped (sold out, cancelled, time limit): they never took it,
   * so their waits are not in `waitP50Ms`/`waitP99Ms`, which a starved run's would raise (absent from runs recorded
   * before it was added).
   */
  waitingAtStop: number;
}

/** One point of the live charts, every quarter second (thinned evenly on long runs). */
export interface SeriesPoint {
  /** ms since the workers started. */
  t: number;
  sold: number;
  /** Stock in Redis at that moment (null when it could not be read). */
  stock: number | null;
  /** Units sold per second over the interval (the name is kept for compatibility). */
  ordersPerSec: number;
  /** Lock wait over the interval's acquisitions; null when none happened (or no lock). */
  waitP50Ms: number | null;
  waitP99Ms: number | null;
}

export interface RunProgress {
  phase: "connecting" | "running" | "stopping" | "cleaning" | "finished";
  /** 0..1: share of the stock sold (or of the orders placed, with `orders` set). */
  fraction: number;
  /** ms since the workers started; stops when they stop (a finished run's is its `result.durationMs`: cleanup is not counted). */
  elapsedMs: number;
  sold: number;
  orders: number;
  stock: number | null;
  retries: number;
  staleWritesRejected: number;
  errors: number;
}

export type FaultMode = "process" | "connections";

/** What the lab would run on, for the page's form (`lab` in `GET /api/demo/runs`). */
export interface LabInfo {
  /** The deployment the lab runs on (the first its workers reach by URL alone). */
  deployment: string;
  /** Its lock nodes: a fault may act on node 1 to `nodes - 1` (node 0 holds the stock). */
  nodes: number;
  /** How a fault would act: on the node's process (nodes this console started), or on the lab workers' connections. */
  faultMode: FaultMode;
}

/** What the fault did, for the UI to say. */
export interface FaultReport {
  node: number;
  kind: "kill" | "pause";
  /** process: SIGKILL/SIGSTOP on an embedded node the console owns; connections: only the lab workers' own connections. */
  mode: FaultMode;
  /** ms since the workers started; null until it happened. */
  startedAtMs: number | null;
  endedAtMs: number | null;
  description: string;
}

export type RunStatus = "running" | "done" | "cancelled" | "failed";
export type StopReason = "sold-out" | "orders" | "cancelled" | "time-limit" | "shutdown" | "error";

export interface RunRecord {
  id: string;
  status: RunStatus;
  settings: RunSettings;
  /** Who started it. */
  actor: string;
  /** Epoch ms. */
  createdAt: number;
  finishedAt: number | null;
  /**
   * Epoch ms of the last progress write, by the clock of the console running it: for reading only. Whether a
   * `running` run went silent is judged by node 0's clock (its heartbeat key), never by comparing clocks.
   */
  heartbeatAt: number;
  progress: RunProgress;
  result?: RunResult;
  stopReason?: StopReason;
  /** Why it failed, in words. */
  error?: string;
  fault?: FaultReport;
  notes: string[];
  /** Only in `GET /api/demo/runs/{id}`. */
  series?: SeriesPoint[];
}

export type { RunSettings, Strategy };
