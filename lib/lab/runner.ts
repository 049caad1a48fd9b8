import { setMaxListeners } from "node:events";
import type Redis from "ioredis";
import { abortableSleep, Redlock } from "@lockscope/redlock";
import { removeRunKeys } from "./cleanup";
import { boundedAll, NodeSwitch, openLabClient, SwitchedClient } from "./connections";
import { FaultInjector, type NodeProcessControl } from "./faults";
import { runKeys, type RunKeys } from "./keys";
import { LAB_LIMITS, LOCKING_STRATEGIES, MULTI_NODE_STRATEGIES, retryDelayFor, type RunSettings } from "./settings";
import { Sampler } from "./sampler";
import { scriptRefusal, scriptVerdict } from "./scripts-check";
import { lostUpdates, ordersPerSec, oversold, percentile, progressFraction, Samples } from "./stats";
import { atomic } from "./strategies/atomic";
import { naive } from "./strategies/naive";
import { none } from "./strategies/none";
import { redlock } from "./strategies/redlock";
import type { StepOutcome, Strategy, StrategyContext, Tally, Worker } from "./strategy";
import type { FaultMode, FaultReport, RunProgress, RunResult, SeriesPoint, StopReason } from "./types";
import { errorText } from "../echoed-arguments";

/**
 * The contention lab's run: N workers, each its own client with its own connections, buying from one
 * stock under the chosen strategy, while the run samples progress, injects the fault and finally counts.
 * Plain Node code (no Next.js, no globals): the console runs it behind its API, the benchmark directly.
 */

export type { NodeProcessControl } from "./faults";

export interface LabRunOptions {
  id: string;
  settings: RunSettings;
  /** The lock nodes, node 0 first (it holds the stock). */
  nodeUrls: readonly string[];
  /** Present when the nodes' processes are ours to kill and pause; absent: faults act on the workers' connections only. */
  processControl?: NodeProcessControl | null;
  /** Aborting cancels the run; a reason of "shutdown" or "time-limit" is reported as such. */
  signal?: AbortSignal;
  /** Called with each Redlock the run makes (for metrics); may return a function that detaches. */
  onRedlock?: (redlock: Redlock) => (() => void) | void;
  /** Budget per command on the workers' connections. @default 1000 */
  commandTimeoutMs?: number;
  /** @default LAB_LIMITS.maxRunMs */
  maxRunMs?: number;
  /** How often the charts get a point. @default 250 */
  sampleEveryMs?: number;
  /**
   * TTL of the run's keys (the stock, the fences), renewed while the run lives, so a run
   * whose process dies without cleaning up leaves nothing behind for longer than this.
   * @default LAB_KEY_TTL_MS
   */
  keyTtlMs?: number;
}

/** The run's keys outlive a run that stopped renewing them (its console killed) by at most this. */
export const LAB_KEY_TTL_MS = 60_000;
/** Renewals come at least this often (more often for a short key TTL: three per TTL). */
const KEY_RENEW_MAX_EVERY_MS = 5_000;

export interface LabOutcome {
  /** null when there is nothing to judge: the sale never began (stopped while connecting), or the stock vanished mid-run (see `error`). */
  result: RunResult | null;
  stopReason: StopReason;
  fault: FaultReport | null;
  series: SeriesPoint[];
  /** Things that went wrong on the side (cleanup of a node that did not answer, a node down at start). */
  notes: string[];
  /** Set when the run could not do its job (stopReason "error"). */
  error?: string;
}

/** Samples kept for the charts (four a second; a longer run keeps every other one, and so on). */
/** How long node 0 (the stock) may stay silent before the run gives up. */
const STOCK_NODE_SILENCE_MS = 10_000;

const STRATEGIES: Record<RunSettings["strategy"], Strategy> = { none, naive, redlock, "redlock-fenced": redlock, atomic };

export class LabRun {
  readonly keys: RunKeys;
  readonly settings: RunSettings;
  readonly faultMode: FaultMode;
  readonly #options: LabRunOptions;
  readonly #tally: Tally = { sold: 0, ordersPlaced: 0, retries: 0, staleWritesRejected: 0, locksLost: 0, releaseErrors: 0, errors: 0, waitingAtStop: 0, minStockSeen: Infinity, waits: new Samples() };
  readonly #sampler = new Sampler();
  readonly #notes: string[] = [];
  readonly #switches: NodeSwitch[];
  /** Stops every loop, including work inside a critical section: cancel, shutdown, the time limit. */
  readonly #halt = new AbortController();
  /** Stops placing orders and waiting for locks (sold out, orders reached); holders finish their order. */
  readonly #close = new AbortController();
  #workers: Worker[] = [];
  #control: Redis | null = null;
  /** One connection per node the run uses, for renewing its keys' TTLs (node 0's is `#control`). */
  #keepers: Redis[] = [];
  #renewing = false;
  #renewedOnce = false;
  /** Set when node 0 lost the run's keys mid-run: the sale's numbers mean nothing any more. */
  #stockVanished = false;
  #phase: RunProgress["phase"] = "connecting";
  #startedAt = 0;
  /** When the workers stopped (0 until then): the run's duration ends here, not after the fault is undone and the keys removed. */
  #saleEndedAt = 0;
  #lastStock: number | null = null;
  #stopReason: StopReason | null = null;
  #error: string | undefined;
  readonly #faults: FaultInjector;
  /** What the strategies see of this run. */
  readonly #context: StrategyContext;

  constructor(options: LabRunOptions) {
    // Every worker waits on these two signals at once (up to 500 listeners each).
    setMaxListeners(0, this.#halt.signal, this.#close.signal);
    this.#options = options;
    this.settings = options.settings;
    this.keys = runKeys(options.id);
    this.faultMode = options.processControl ? "process" : "connections";
    this.#context = {
      runId: options.id,
      keys: this.keys,
      settings: this.settings,
      tally: this.#tally,
      halt: this.#halt.signal,
      close: this.#close.signal,
      busy: () => this.#busy(),
      sold: (stockAfter) => this.#sold(stockAfter),
      vanished: () => this.#vanished(),
    };
    this.#switches = options.nodeUrls.map(() => new NodeSwitch());
    const fault = options.settings.fault;
    if (fault && fault.node >= options.nodeUrls.length) {
      throw new RangeError(`fault.node ${fault.node} is not one of the ${options.nodeUrls.length} nodes`);
    }
    this.#faults = new FaultInjector(fault, this.faultMode, {
      processControl: options.processControl ?? null,
      switches: this.#switches,
      workers: () => this.#workers,
      notes: this.#notes,
      startedAt: () => this.#startedAt,
      saleTimeMs: () => this.#saleTimeMs(),
      mayStart: () => !this.#halt.signal.aborted && this.#phase === "running",
    });
    const signal = options.signal;
    if (signal) {
      const onAbort = () => {
        // An error as the reason (the lab lease lost) fails the run and says why.
        if (isFailure(signal.reason)) this.#error ??= signal.reason.message;
        this.#stop(stopReasonOf(signal.reason));
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    }
  }

  /** Live numbers for the progress bar. */
  progress(): RunProgress {
    const t = this.#tally;
    return {
      phase: this.#phase,
      fraction: round3(
        // Full only for a sale that ended (sold out, or every order placed); one stopped early shows how far it came.
        this.#phase === "finished" && (this.#stopReason === "sold-out" || this.#stopReason === "orders")
          ? 1
          : progressFraction({ stock: this.settings.stock, remaining: this.#lastStock, orders: this.settings.orders, ordersPlaced: t.ordersPlaced }),
      ),
      // Stops with the workers, as `durationMs` does: undoing a fault and cleaning up a stalled node are not the sale's time.
      elapsedMs: this.#startedAt === 0 ? 0 : Math.round(this.#saleTimeMs()),
      sold: t.sold,
      orders: t.ordersPlaced,
      stock: this.#lastStock,
      retries: t.retries,
      staleWritesRejected: t.staleWritesRejected,
      errors: t.errors,
    };
  }

  series(): SeriesPoint[] {
    return this.#sampler.series();
  }

  fault(): FaultReport | null {
    return this.#faults.report ? { ...this.#faults.report } : null;
  }

  /** Runs to the end (sold out, orders placed, cancelled, time limit) and always cleans up. */
  async run(): Promise<LabOutcome> {
    const { settings } = this;
    const maxRunMs = this.#options.maxRunMs ?? LAB_LIMITS.maxRunMs;
    let durationMs = 0;
    let remaining: number | null = null;
    try {
      await this.#connect();
      if (!this.#halt.signal.aborted) await this.#checkScripts();
      if (!this.#halt.signal.aborted) {
        await this.#control!
          .multi()
          .set(this.keys.stock, String(settings.stock), "PX", this.#keyTtlMs)
          .set(this.keys.marker, String(settings.stock), "PX", this.#keyTtlMs)
          .exec();
        this.#lastStock = settings.stock;
        this.#tally.minStockSeen = settings.stock;
        this.#phase = "running";
        this.#startedAt = performance.now();
        this.#sampler.start(settings.stock);
        const limit = setTimeout(() => this.#stop("time-limit"), maxRunMs);
        const sampler = this.#startSampler();
        const renewer = setInterval(() => this.#renewKeys(), Math.min(KEY_RENEW_MAX_EVERY_MS, Math.ceil(this.#keyTtlMs / 3)));
        this.#faults.schedule();
        try {
          await Promise.all(this.#workers.map((w) => this.#work(w)));
        } finally {
          clearInterval(renewer);
          this.#saleEndedAt = performance.now();
        }
        durationMs = this.#saleTimeMs();
        this.#phase = "stopping";
        clearTimeout(limit);
        clearInterval(sampler);
        await this.#faults.endOrNote();
        const read = await this.#finalStock();
        if (read === null) this.#unjudged(`Node 0, which holds the stock, did not answer the final read of it for ${STOCK_NODE_SILENCE_MS / 1000} s, so what was sold cannot be judged.`);
        else if (!read.kept) this.#vanished();
        remaining = read?.stock ?? null;
        if (remaining !== null) this.#lastStock = remaining;
        this.#sample({ final: true });
        this.#stopReason ??= settings.orders !== undefined && this.#tally.ordersPlaced >= settings.orders ? "orders" : "sold-out";
      }
    } catch (error) {
      this.#stopReason = "error";
      this.#error ??= errorText(error);
      this.#halt.abort("error");
      this.#close.abort("error");
    } finally {
      this.#phase = "cleaning";
      this.#faults.cancel();
      await this.#faults.endOrNote();
      await this.#closeWorkers();
      await this.#cleanup();
      this.#control?.disconnect();
      for (const keeper of this.#keepers) keeper.disconnect();
      this.#phase = "finished";
    }
    if (durationMs === 0 && this.#startedAt !== 0) durationMs = this.#saleTimeMs();
    // Stopped while the workers were still connecting: the stock was never written, so there is nothing to judge.
    const started = this.#startedAt !== 0;
    if (!started && this.#stopReason !== "error") {
      this.#notes.push("It stopped before the sale began (its workers were still connecting): no stock was written and nothing was sold, so it has no figures.");
    }
    return {
      result: this.#stockVanished || !started ? null : this.#result(remaining, durationMs),
      stopReason: this.#stopReason ?? "error",
      fault: this.fault(),
      series: this.series(),
      notes: this.#notes.slice(),
      ...(this.#error !== undefined ? { error: this.#error } : {}),
    };
  }

  /** ms from the workers' start to their stop (to now while they run). */
  #saleTimeMs(): number {
    return (this.#saleEndedAt === 0 ? performance.now() : this.#saleEndedAt) - this.#startedAt;
  }

  #stop(reason: StopReason): void {
    if (this.#halt.signal.aborted) return;
    this.#stopReason ??= reason;
    this.#close.abort(reason);
    this.#halt.abort(reason);
    // A stalled node's queued commands must go out, or the workers waiting on them never finish.
    for (const s of this.#switches) s.resume();
  }

  #soldOut(): void {
    if (!this.#close.signal.aborted) this.#close.abort("sold-out");
  }

  /** Node 0 lost the stock mid-run: the run fails, and its numbers are not a result. */
  #vanished(): void {
    this.#unjudged("The stock on node 0 vanished mid-run (node 0 restarted empty, or the run's keys were deleted), so what was sold cannot be judged.");
  }

  /** The run's figures cannot be told (the stock gone, or not read at the end): it fails, with no result to misread. */
  #unjudged(why: string): void {
    if (this.#stockVanished) return;
    this.#stockVanished = true;
    this.#stopReason = "error";
    this.#error = why;
    this.#stop("error");
  }

  /**
   * The stock once the workers stopped, asked again for up to `STOCK_NODE_SILENCE_MS` while node 0 does not
   * answer (a figure from before the end would count the last sales as lost or unsold); null if it never does.
   */
  async #finalStock(): Promise<{ stock: number | null; kept: boolean } | null> {
    const until = performance.now() + STOCK_NODE_SILENCE_MS;
    for (;;) {
      const read = await this.#readStock();
      if (read !== null || performance.now() >= until) return read;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  get #keyTtlMs(): number {
    return this.#options.keyTtlMs ?? LAB_KEY_TTL_MS;
  }

  /**
   * Renews the TTL of the run's keys on every node (never the lock's: that TTL is the lock's own). A node
   * that does not answer is renewed on the next round; keys a restarted node gets again get their TTL then.
   */
  #renewKeys(): void {
    if (this.#renewing) return;
    this.#renewing = true;
    const { stockNode, everyNode } = this.keys.expiring;
    const ttl = this.#keyTtlMs;
    void Promise.allSettled(
      [this.#control!, ...this.#keepers].map((client, node) => {
        const pipeline = client.pipeline();
        // PEXPIRE never creates a key: one not made yet (or already cleaned up) is left alone.
        for (const key of node === 0 ? [...stockNode, ...everyNode] : everyNode) pipeline.pexpire(key, ttl);
        return pipeline.exec();
      }),
    ).finally(() => (this.#renewing = false));
  }

  async #connect(): Promise<void> {
    const { nodeUrls, id } = this.#options;
    const commandTimeoutMs = this.#options.commandTimeoutMs ?? 1000;
    const nodeCount = MULTI_NODE_STRATEGIES.has(this.settings.strategy) ? nodeUrls.length : 1;
    this.#control = openLabClient(nodeUrls[0]!, commandTimeoutMs, `lockscope:lab:${id}:control`);
    await this.#control.connect();
    this.#keepers = nodeUrls.slice(1, nodeCount).map((url) => openLabClient(url, commandTimeoutMs, `lockscope:lab:${id}:keys`));
    // A node down now is renewed once it is back (the client keeps trying).
    for (const keeper of this.#keepers) keeper.connect().catch(() => {});
    const retryDelayMs = retryDelayFor(this.settings.workers);
    this.#workers = Array.from({ length: this.settings.workers }, (_, index) => ({
      index,
      clients: nodeUrls.slice(0, nodeCount).map((url) => openLabClient(url, commandTimeoutMs, `lockscope:lab:${id}:w${index}`)),
      redlock: null,
      detach: null,
      waiting: null,
    }));
    const unreachable = new Set<number>();
    // 500 workers x 3 nodes is 1,500 connections: open them in parallel, but not all at once.
    await boundedAll(this.#workers, 32, async (worker) => {
      if (this.#halt.signal.aborted) return;
      await Promise.all(
        worker.clients.map((client, node) =>
          client.connect().catch((error: unknown) => {
            // The stock node must answer; another node may be down at start (Redlock needs only a quorum).
            if (node === 0) throw error;
            unreachable.add(node);
          }),
        ),
      );
    });
    for (const node of unreachable) this.#notes.push(`Node ${node} did not answer when the workers connected; they kept trying.`);
    if (MULTI_NODE_STRATEGIES.has(this.settings.strategy)) {
      for (const worker of this.#workers) {
        const clients = worker.clients.map((client, node) => new SwitchedClient(client, this.#switches[node]!));
        const redlock = new Redlock(clients, {
          retryCount: -1,
          retryDelayMs,
          retryJitterMs: Math.ceil(retryDelayMs / 2),
          // Waiters poll, as with the naive lock, so the two compare fairly (with the hand-over every worker
          // would also hold a subscriber connection per node).
          wakeOnRelease: false,
          fenced: this.settings.strategy === "redlock-fenced",
          label: `lab ${id} worker ${worker.index}`,
        });
        worker.redlock = redlock;
        worker.detach = this.#options.onRedlock?.(redlock) ?? null;
      }
    }
  }

  /** Fails the run before the sale when its nodes refuse the scripts its strategy needs (see scripts-check.ts). */
  async #checkScripts(): Promise<void> {
    const clients = this.#workers[0]?.clients ?? [];
    const refusals = (await Promise.all(clients.map((client, node) => scriptRefusal(client, node)))).filter((r) => r !== null);
    const verdict = scriptVerdict(this.settings.strategy, clients.length, refusals);
    if (verdict && "fail" in verdict) throw new Error(verdict.fail);
    if (verdict) this.#notes.push(verdict.note);
  }

  async #closeWorkers(): Promise<void> {
    await Promise.all(
      this.#workers.map(async (worker) => {
        worker.detach?.();
        await worker.redlock?.quit().catch(() => {});
        for (const client of worker.clients) client.disconnect();
      }),
    );
  }

  /** Deletes every key of this run (its exact prefixes, on every node), and nothing else; a node that does not answer, once it does. */
  async #cleanup(): Promise<void> {
    this.#notes.push(...(await removeRunKeys(this.#options.nodeUrls, this.#options.id, { untilAnswered: true })));
  }

  #startSampler(): ReturnType<typeof setInterval> {
    let lastReadOk = performance.now();
    let sampling = false;
    return setInterval(() => {
      if (sampling) return;
      sampling = true;
      void this.#readStock()
        .then((read) => {
          if (read?.kept === false) {
            this.#vanished();
          } else if (read) {
            if (read.stock !== null) this.#lastStock = read.stock;
            lastReadOk = performance.now();
          } else if (performance.now() - lastReadOk > STOCK_NODE_SILENCE_MS) {
            this.#error = `Node 0, which holds the stock, has not answered for ${STOCK_NODE_SILENCE_MS / 1000} s.`;
            this.#stop("error");
          }
          this.#sample();
        })
        .finally(() => (sampling = false));
    }, this.#options.sampleEveryMs ?? 250);
  }

  /** `final`: the run's last point (the stock once the workers stopped), which the chart always keeps. */
  #sample({ final = false } = {}): void {
    // A read still in flight when the workers stopped is left out: the final point, at the sale's end, stands for it.
    if (!final && this.#saleEndedAt !== 0) return;
    // At the sale's end for the final point, not once the fault is undone (a killed node restarted, a stalled one
    // answered): the chart spans the run's duration, as `durationMs` does, and its last rate is not diluted.
    const t = Math.round(this.#saleTimeMs());
    this.#sampler.sample(t, this.#tally, this.#lastStock, { final });
    if (this.#lastStock !== null) this.#tally.minStockSeen = Math.min(this.#tally.minStockSeen, this.#lastStock);
  }

  /**
   * The stock on node 0, and whether node 0 still has the run's keys (the marker and the stock: the stock is
   * written with the marker and deleted only by the cleanup, so one gone alone, evicted or deleted by hand, is
   * lost too, and a stock read earlier is no figure to judge the sale by); null when node 0 did not answer.
   */
  async #readStock(): Promise<{ stock: number | null; kept: boolean } | null> {
    try {
      const [stock, marker] = await this.#control!.mget(this.keys.stock, this.keys.marker);
      const present = (value: string | null | undefined): value is string => value !== null && value !== undefined;
      return { stock: present(stock) ? Number(stock) : null, kept: present(marker) && present(stock) };
    } catch {
      return null;
    }
  }

  /** Takes an order slot; false once `orders` have been placed or the sale is closed. */
  #claimOrder(): boolean {
    if (this.#close.signal.aborted) return false;
    const { orders } = this.settings;
    // The last orders are placed: no more are taken, and those placed (workers still waiting for the lock with
    // theirs) go through. Closing the sale here stopped them, so a locking strategy placed fewer than asked.
    if (orders !== undefined && this.#tally.ordersPlaced >= orders) return false;
    this.#tally.ordersPlaced += 1;
    return true;
  }

  async #work(worker: Worker): Promise<void> {
    try {
      await this.#orders(worker);
    } finally {
      // An order still waiting for its lock when the worker stops is abandoned: no wait to count, so the
      // percentiles leave it out; it is counted here, for the result to say how many the percentiles miss.
      if (worker.waiting) this.#tally.waitingAtStop += 1;
      worker.waiting = null;
    }
  }

  async #orders(worker: Worker): Promise<void> {
    const tally = this.#tally;
    while (!this.#halt.signal.aborted && this.#claimOrder()) {
      let outcome: StepOutcome;
      try {
        outcome = await this.#step(worker);
      } catch (error) {
        if (this.#halt.signal.aborted || isAbort(error)) {
          tally.ordersPlaced -= 1;
          break;
        }
        // A node down or slow: the order did not go through; count it and place it again shortly. One still
        // waiting for its lock keeps its wait and attempts (worker.waiting): the next step goes on with them.
        tally.errors += 1;
        tally.ordersPlaced -= 1;
        await abortableSleep(20 + Math.random() * 30, this.#halt.signal);
        continue;
      }
      if (outcome === "sold-out") {
        tally.ordersPlaced -= 1;
        this.#soldOut();
        break;
      }
      if (outcome === "stopped") {
        tally.ordersPlaced -= 1;
        break;
      }
    }
  }

  /** Works inside the critical section: the order's own work, plus now and then a stall (a GC pause). */
  async #busy(): Promise<void> {
    const { workMs, pause } = this.settings;
    let ms = workMs;
    if (pause && pause.probability > 0 && Math.random() < pause.probability) ms += pause.ms;
    await abortableSleep(ms, this.#halt.signal);
  }

  #sold(stockAfter: number): StepOutcome {
    // By the first sale the engine has made its keys for the run: give them their TTL now, not a round later.
    if (!this.#renewedOnce) {
      this.#renewedOnce = true;
      this.#renewKeys();
    }
    this.#tally.sold += 1;
    this.#tally.minStockSeen = Math.min(this.#tally.minStockSeen, stockAfter);
    return "sold";
  }

  #step(worker: Worker): Promise<StepOutcome> {
    return STRATEGIES[this.settings.strategy].step(worker, this.#context);
  }

  #result(remainingRead: number | null, durationMs: number): RunResult {
    const t = this.#tally;
    const { stock } = this.settings;
    const remaining = remainingRead ?? this.#lastStock ?? stock;
    const waits = t.waits.slice();
    return {
      sold: t.sold,
      remaining,
      lostUpdates: lostUpdates(t.sold, stock, remaining),
      oversold: oversold(t.sold, stock),
      stockNeverNegative: t.minStockSeen >= 0 && remaining >= 0,
      ordersPerSec: ordersPerSec(t.sold, durationMs),
      ...waitFigures(waits, LOCKING_STRATEGIES.has(this.settings.strategy)),
      retries: t.retries,
      staleWritesRejected: t.staleWritesRejected,
      durationMs: Math.round(durationMs),
      orders: t.ordersPlaced,
      locksLost: t.locksLost,
      releaseErrors: t.releaseErrors,
      errors: t.errors,
      waitingAtStop: t.waitingAtStop,
    };
  }
}

function isAbort(error: unknown): boolean {
  return error instanceof Error && error.name === "AbortError";
}

/** A reason to stop that is a failure, not a cancel (`abort()` without a reason gives an AbortError). */
function isFailure(reason: unknown): reason is Error {
  return reason instanceof Error && reason.name !== "AbortError";
}

function stopReasonOf(reason: unknown): StopReason {
  if (reason === "error" || isFailure(reason)) return "error";
  return reason === "shutdown" || reason === "time-limit" ? reason : "cancelled";
}

/**
 * The run's lock-wait percentiles: 0 for a strategy without a lock; null for a locking run that never took its
 * lock (a 0 would read as "took it at once", which is the opposite of what happened).
 */
function waitFigures(waits: Float64Array, locking: boolean): Pick<RunResult, "waitP50Ms" | "waitP99Ms"> {
  if (!locking) return { waitP50Ms: 0, waitP99Ms: 0 };
  const p50 = percentile(waits, 50);
  const p99 = percentile(waits, 99);
  return { waitP50Ms: p50 === null ? null : round2(p50), waitP99Ms: p99 === null ? null : round2(p99) };
}

const round2 = (n: number) => Math.round(n * 100) / 100;
const round3 = (n: number) => Math.round(n * 1000) / 1000;
