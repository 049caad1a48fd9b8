import { z } from "zod";
import type { FaultMode } from "./types";

/**
 * A contention-lab run's settings, as `POST /api/demo/runs` takes them. The limits keep one run bounded on
 * one machine: at most 500 workers (each with its own connection to every node) and 5 minutes.
 */
export const STRATEGIES = ["none", "naive", "redlock", "redlock-fenced", "atomic"] as const;
export type Strategy = (typeof STRATEGIES)[number];

export const LAB_LIMITS = Object.freeze({
  maxStock: 100_000,
  maxWorkers: 500,
  maxOrders: 1_000_000,
  minTtlMs: 50,
  maxTtlMs: 60_000,
  maxWorkMs: 10_000,
  maxPauseMs: 60_000,
  /** The hard cap on a run's duration, and on when a fault may start and end. */
  maxRunMs: 5 * 60_000,
});

/** Which strategies take a lock at all (the others have no lock wait and no retries). */
export const LOCKING_STRATEGIES: ReadonlySet<Strategy> = new Set(["naive", "redlock", "redlock-fenced"]);
/** Which strategies use nodes other than the first (the stock node). */
export const MULTI_NODE_STRATEGIES: ReadonlySet<Strategy> = new Set(["redlock", "redlock-fenced"]);

// One message per value: the range first (1e20 is "at most", not also "not whole": zod's whole numbers stop at
// 2^53), each check stopping the rest once it fails.
const int = (what: string, min: number, max: number) =>
  z
    .number({ error: `${what} must be a number` })
    .min(min, { error: `${what} must be at least ${min}`, abort: true })
    .max(max, { error: `${what} must be at most ${max.toLocaleString("en-US")}`, abort: true })
    .int({ error: `${what} must be a whole number` });

export const pauseSchema = z.strictObject({
  /** Chance, per order, that the worker stalls inside its critical section (between reading and writing the stock). */
  probability: z
    .number({ error: "pause.probability must be a number" })
    .min(0, { error: "pause.probability must be between 0 and 1" })
    .max(1, { error: "pause.probability must be between 0 and 1" }),
  /** How long the stall lasts: longer than the TTL, it is the GC pause of the Redlock debate. */
  ms: int("pause.ms", 1, LAB_LIMITS.maxPauseMs),
});

export const faultSchema = z.strictObject({
  /** 0-based index in REDIS_URLS; 0 holds the stock and cannot be faulted. */
  node: int("fault.node", 1, 14),
  kind: z.enum(["kill", "pause"], { error: 'fault.kind must be "kill" or "pause"' }),
  /** When the fault starts, after the workers start. */
  atMs: int("fault.atMs", 0, LAB_LIMITS.maxRunMs),
  /** How long the node stays down (killed) or stalled (paused); absent: until the run ends. */
  forMs: int("fault.forMs", 1, LAB_LIMITS.maxRunMs).optional(),
});

export const runSettingsSchema = z
  .strictObject({
    strategy: z.enum(STRATEGIES, { error: `strategy must be one of ${STRATEGIES.map((s) => `"${s}"`).join(", ")}` }),
    stock: int("stock", 1, LAB_LIMITS.maxStock),
    workers: int("workers", 1, LAB_LIMITS.maxWorkers),
    /** Orders placed in total (each one a worker's purchase attempt); absent: until sold out. */
    orders: int("orders", 1, LAB_LIMITS.maxOrders).optional(),
    ttlMs: int("ttlMs", LAB_LIMITS.minTtlMs, LAB_LIMITS.maxTtlMs),
    /** Time spent inside the critical section per order, between reading and writing the stock. */
    workMs: int("workMs", 0, LAB_LIMITS.maxWorkMs),
    pause: pauseSchema.optional(),
    fault: faultSchema.optional(),
  })
  .superRefine((s, ctx) => {
    if (s.fault && s.fault.atMs + (s.fault.forMs ?? 0) > LAB_LIMITS.maxRunMs) {
      ctx.addIssue({
        code: "custom",
        path: ["fault"],
        message: `the fault must end within a run's ${LAB_LIMITS.maxRunMs / 60_000} minutes (atMs + forMs <= ${LAB_LIMITS.maxRunMs})`,
      });
    }
  });

export type RunSettings = z.infer<typeof runSettingsSchema>;
export type PauseSettings = z.infer<typeof pauseSchema>;
export type FaultSettings = z.infer<typeof faultSchema>;

/**
 * Checks that need the number of nodes the lab runs on. Returns a message for the 422, or null when the settings
 * fit. `deployment`: the name of the deployment the lab runs on, said where the console watches several (its
 * own node count is then larger than the lab's).
 */
export function checkAgainstNodes(settings: RunSettings, nodeCount: number, deployment?: string): string | null {
  if (settings.fault && settings.fault.node >= nodeCount) {
    const which = deployment === undefined ? "" : ` (deployment ${deployment})`;
    return nodeCount < 2
      ? `fault.node: the lab runs on one lock node${which}, which holds the stock and cannot be faulted.`
      : `fault.node: the lab runs on ${nodeCount} lock nodes${which}; choose a node from 1 to ${nodeCount - 1} (node 0 holds the stock and cannot be faulted).`;
  }
  return null;
}

/**
 * Things worth saying about settings that are allowed but do something the operator may not expect.
 * Shown with the run. `faultMode`: how the run's fault acts (on the node's process, or only on the lab
 * workers' connections to it, which leaves the node running with its keys). @default "process"
 * `nodeCount`: the lab's lock nodes, where known (a fault on one of two leaves Redlock no quorum).
 */
export function settingsNotes(settings: RunSettings, faultMode: FaultMode = "process", nodeCount?: number): string[] {
  const notes: string[] = [];
  const { fault, pause } = settings;
  if (fault && !MULTI_NODE_STRATEGIES.has(settings.strategy)) {
    notes.push(`The ${settings.strategy} strategy uses node 0 only, so the fault on node ${fault.node} does not touch its orders.`);
  }
  // A quorum is floor(n / 2) + 1: without one node, only two nodes (or fewer) fall short of it. The run then sells
  // nothing while the fault lasts, and its lock wait leaves out the orders that were still waiting when it stopped.
  if (fault && MULTI_NODE_STRATEGIES.has(settings.strategy) && nodeCount === 2) {
    const what =
      faultMode === "connections"
        ? fault.kind === "kill"
          ? `the lab workers' connections to node ${fault.node} are cut`
          : `the lab workers' commands to node ${fault.node} are held`
        : fault.kind === "kill"
          ? `node ${fault.node} is down`
          : `node ${fault.node} is stopped (SIGSTOP)`;
    const span = fault.forMs === undefined ? `from ${fault.atMs} ms until the run ends` : `from ${fault.atMs} ms for ${fault.forMs} ms`;
    notes.push(
      `With 2 lock nodes a Redlock quorum is both: no lock can be taken while ${what}, ${span}, so nothing sells meanwhile; ` +
        `orders still waiting for their lock when the run stops are not counted in the lock wait.`,
    );
  }
  if (fault?.kind === "kill" && fault.forMs !== undefined && fault.forMs < settings.ttlMs && MULTI_NODE_STRATEGIES.has(settings.strategy)) {
    // Only a node restarted empty forgets the locks it granted; a cut of the workers' connections does not.
    if (faultMode === "connections") {
      notes.push(
        `Node ${fault.node} keeps running with its locks through the cut, so it cannot grant a lock twice when the workers' connections come back ` +
          `${fault.forMs} ms later, sooner than the ${settings.ttlMs} ms TTL (a node restarted empty can; the lab restarts only nodes the console started).`,
      );
    } else {
      notes.push(
        `Node ${fault.node} comes back ${fault.forMs} ms after the kill, sooner than the ${settings.ttlMs} ms TTL: it restarts empty and can grant a lock ` +
          `another worker still holds on the other nodes, where that holder had no more nodes than a quorum (the Redis documentation asks for ` +
          `restarts delayed by at least the TTL).`,
      );
    }
  }
  if (LOCKING_STRATEGIES.has(settings.strategy)) {
    // A holder keeps its lock for its work plus any pause: that sum, not the pause alone, is what outlasts the TTL.
    if (settings.workMs >= settings.ttlMs) {
      notes.push(`${settings.workMs} ms of work per order outlasts the ${settings.ttlMs} ms TTL: every lock expires under its holder before it writes the stock.`);
    } else if (pause && pause.probability > 0 && settings.workMs + pause.ms < settings.ttlMs) {
      // Never a promise that no lock expires: the TTL runs from the node's SET, so taking the lock, reading and
      // writing the stock and a late timer spend the margin too (a 1 ms margin loses most locks).
      const spareMs = settings.ttlMs - settings.workMs - pause.ms;
      notes.push(
        `Pauses of ${pause.ms} ms (on top of ${settings.workMs} ms of work) fit in the ${settings.ttlMs} ms TTL with ${spareMs} ms to spare: ` +
          `a lock still expires under its holder when taking it, reading and writing the stock and the machine's own delays take longer than that.`,
      );
    }
  }
  return notes;
}

/**
 * Pause between a waiter's lock attempts: short, but growing with the crowd so 500 waiters polling do not
 * saturate a two-core machine. The same for the naive lock and Redlock, so they compare fairly.
 */
export function retryDelayFor(workers: number): number {
  return Math.min(100, 10 + Math.floor(workers / 10));
}
