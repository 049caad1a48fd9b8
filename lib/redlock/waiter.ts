import type { Waiter } from "./notifications.ts";
import { abortableSleep } from "./sleep.ts";

// Waiter and grant accounting of one acquisition between its attempts: which nodes granted it the lock by
// a release (hand-over), which grants no longer count, and the sleep until the next attempt.

/**
 * A waiter between attempts. `woken` also records a wake-up heard while an attempt was in flight. Grants
 * (a release wrote the lock in this waiter's value, see HAND_OVER_LUA) count for `attempt`, the latest
 * attempt: its refusal left the tickets those releases answered, and validity is measured from its start.
 */
export interface AcquireWaiter extends Waiter {
  pollsUntilListening: boolean;
  woken: boolean;
  resolve: (() => void) | null;
  attempt: number;
  /**
   * Per node, for `attempt`: GRANTED, or EXCLUDED (its grant would not hold: see `excludeNodes`), or 0.
   */
  nodes: Int8Array;
  /** How many nodes are GRANTED. */
  grants: number;
}

export const GRANTED_NODE = 1;
const EXCLUDED_NODE = -1;

export function newWaiter(id: string, nodes: number, quorum: number, pollsUntilListening = false): AcquireWaiter {
  const waiter: AcquireWaiter = {
    id,
    pollsUntilListening,
    woken: false,
    resolve: null,
    attempt: 0,
    nodes: new Int8Array(nodes),
    grants: 0,
    wake: () => {
      waiter.woken = true;
      waiter.resolve?.();
    },
    // (The fence a grant reports is not used: a fenced waiter reads the fences of every node itself, see
    // acquireLock.)
    grant: (node, attempt) => {
      if (attempt !== waiter.attempt || node >= nodes || waiter.nodes[node] !== 0) return;
      waiter.nodes[node] = GRANTED_NODE;
      waiter.grants += 1;
      if (waiter.grants >= quorum) waiter.wake();
    },
  };
  return waiter;
}

/**
 * Nodes released after a failed round, or whose answer to it is unknown (failed or timed out): the release
 * sent to them deletes, or may delete, what they grant, so their grants for this attempt do not count,
 * even one heard already.
 */
export function excludeNodes(waiter: AcquireWaiter, nodes: readonly number[]): void {
  for (const node of nodes) {
    if (waiter.nodes[node] === GRANTED_NODE) waiter.grants -= 1;
    waiter.nodes[node] = EXCLUDED_NODE;
  }
}

/** Starts counting grants for a new attempt. */
export function nextAttempt(waiter: AcquireWaiter, attempt: number): void {
  waiter.woken = false;
  waiter.attempt = attempt;
  waiter.nodes.fill(0);
  waiter.grants = 0;
}

/**
 * Sleeps until the retry time, a wake-up or a quorum of grants, or the signal. When the retry time comes
 * with some grants heard but not a quorum, the rest are probably on their way: it waits `graceMs` more
 * rather than start an attempt that would find those nodes mid-hand-over.
 */
export async function sleepUnlessWoken(waiter: AcquireWaiter | null, delayMs: number, graceMs: number, signal: AbortSignal | undefined): Promise<void> {
  if (delayMs <= 0 || signal?.aborted || waiter?.woken) return;
  const ranOut = await abortableSleep(delayMs, signal, waiter ?? undefined);
  if (ranOut && waiter && waiter.grants > 0 && !waiter.woken) await abortableSleep(graceMs, signal, waiter);
}

