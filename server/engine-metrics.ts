import "server-only";
import type { EventEmitter } from "node:events";
import type { RedlockEvents } from "@lockscope/redlock";
import { ATTEMPT_RESULTS, ENGINE_OPERATIONS, count, declared, initialiseFor, metricGroup } from "./metrics";

/** What `instrumentRedlock` needs of a `Redlock`: its typed events. */
export type InstrumentableRedlock = Pick<EventEmitter<RedlockEvents>, "on" | "off">;

export interface InstrumentOptions {
  /**
   * The console node id of each of the instance's clients, by index (`node-<i>` when the instance was
   * made over the console's nodes in their configured order, which is the default).
   */
  nodeIds?: readonly string[];
}

/** Counts each group once per resource list: a multi-resource lock counts under its first resource's group. */
function groupOf(resources: readonly string[]): string {
  return metricGroup(resources[0] ?? "");
}

function attempt(group: string, result: (typeof ATTEMPT_RESULTS)[number]): void {
  initialiseFor("lockscope_redlock_acquire_attempts_total", { group: [group], result: ATTEMPT_RESULTS });
  // A lock is lost only after it was acquired: its group's series is at 0 by then, so increase() sees the first loss.
  initialiseFor("lockscope_redlock_locks_lost_total", { group: [group] });
  count("lockscope_redlock_acquire_attempts_total", { group, result });
}

/**
 * Turns a `Redlock` instance's events into the engine metrics: attempts by result, wait, hold and
 * validity-margin histograms, extensions, lost locks and per-node errors. No label holds a lock key
 * (groups come from `metricGroup`). Returns a function that detaches the listeners.
 */
export function instrumentRedlock(redlock: InstrumentableRedlock, options: InstrumentOptions = {}): () => void {
  const nodeId = (index: number) => options.nodeIds?.[index] ?? `node-${index}`;
  if (options.nodeIds) initialiseFor("lockscope_redlock_node_errors_total", { node: options.nodeIds, operation: ENGINE_OPERATIONS });

  const onAcquired = (e: RedlockEvents["acquired"][0]) => {
    attempt(groupOf(e.resources), "acquired");
    declared("lockscope_redlock_acquire_wait_seconds").observe(e.waitMs / 1000);
  };
  const onAttemptFailed = (e: RedlockEvents["attempt-failed"][0]) => attempt(groupOf(e.resources), e.reason);
  const onReleased = (e: RedlockEvents["released"][0]) => {
    declared("lockscope_redlock_hold_seconds").observe(e.heldMs / 1000);
    declared("lockscope_redlock_release_validity_margin_seconds").observe(e.validityMarginMs / 1000);
  };
  const onExtended = () => declared<"result">("lockscope_redlock_extensions_total").inc({ result: "ok" });
  const onExtendFailed = () => declared<"result">("lockscope_redlock_extensions_total").inc({ result: "failed" });
  const onLost = (e: RedlockEvents["lost"][0]) => {
    const group = groupOf(e.resources);
    initialiseFor("lockscope_redlock_locks_lost_total", { group: [group] });
    count("lockscope_redlock_locks_lost_total", { group });
  };
  const onNodeError = (e: RedlockEvents["node-error"][0]) => {
    const node = nodeId(e.index);
    initialiseFor("lockscope_redlock_node_errors_total", { node: [node], operation: ENGINE_OPERATIONS });
    declared<"node" | "operation">("lockscope_redlock_node_errors_total").inc({ node, operation: e.operation });
  };

  const attach = (method: "on" | "off") => {
    redlock[method]("acquired", onAcquired);
    redlock[method]("attempt-failed", onAttemptFailed);
    redlock[method]("released", onReleased);
    redlock[method]("extended", onExtended);
    redlock[method]("extend-failed", onExtendFailed);
    redlock[method]("lost", onLost);
    redlock[method]("node-error", onNodeError);
  };
  attach("on");
  return () => attach("off");
}
