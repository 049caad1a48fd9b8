import { randomBytes } from "node:crypto";
import { fenceKey, lastFenceKey, waitDeadlineKey, waitQueueKey, waitTicketKey } from "@lockscope/redlock";

/**
 * Key names of a lab run. Every run has its own namespace: its lock key sits under the default lock
 * patterns (`lock:*`), so the live view shows the lab's locks; the stock and the engine's companion keys
 * sit outside them. Cleanup deletes exactly these names, each with the run id in it, and nothing else.
 */

/** `r` + base36 time + 6 random base36 characters: sortable by creation, only [0-9a-z], no glob characters. */
export function newRunId(nowMs = Date.now()): string {
  const random = randomBytes(6).readUIntBE(0, 6).toString(36).padStart(6, "0").slice(-6);
  return `r${nowMs.toString(36)}${random}`;
}

export const RUN_ID_PATTERN = /^r[0-9a-z]{8,20}$/;

export function isRunId(id: string): boolean {
  return RUN_ID_PATTERN.test(id);
}

export interface RunKeys {
  /** The lock every worker contends for (one per run: the flash sale has one item). */
  lock: string;
  /** The stock counter, on node 0. */
  stock: string;
  /**
   * Written on node 0 with the stock and never again: when it is gone, node 0 lost the run's keys (it
   * restarted empty, or someone deleted them), even where a late write has put a stock value back.
   */
  marker: string;
  /**
   * The run's keys that would otherwise never expire, by where they live, for the run to keep a TTL on, so
   * a run that dies without cleaning up (its console killed) leaves nothing for good. The lock has the
   * lock's own TTL, and the engine's waiter queues keep one of their own (as long as their longest waiter).
   */
  expiring: { stockNode: string[]; everyNode: string[] };
  /**
   * Every key the run may make, on any node, by name: the run, the engine's companions of its lock (fence,
   * waiter queues) and of its stock (last fence). Deleted by name, never found by SCAN, which would walk every
   * key of nodes that also hold other data.
   */
  cleanupKeys: string[];
}

/** Every lab run's lock starts with this (then the run id and `:stock`). */
export const LAB_LOCK_PREFIX = "lock:lab:";
/** A lab run's lock, exactly: `lock:lab:<run id>:stock`. */
const LAB_LOCK_PATTERN = new RegExp(`^${LAB_LOCK_PREFIX}${RUN_ID_PATTERN.source.slice(1, -1)}:stock$`);
/**
 * Whether a lock is a lab run's: metrics label it `traffic="lab"` and the safety gauges and losses leave it out,
 * so production alerts ignore it. Only the exact shape the lab makes counts: an operator's own lock that merely
 * starts with `lock:lab:` (a service named "lab") is production and pages like any other.
 */
export const isLabResource = (resource: string): boolean => LAB_LOCK_PATTERN.test(resource);

export function runKeys(id: string): RunKeys {
  if (!isRunId(id)) throw new TypeError(`Expected \`id\` to be a lab run id, got \`${id.slice(0, 40)}\``);
  const lock = `${LAB_LOCK_PREFIX}${id}:stock`;
  const stock = `lab:${id}:stock`;
  const marker = `lab:${id}:run`;
  return {
    lock,
    stock,
    marker,
    expiring: { stockNode: [stock, marker, lastFenceKey(stock)], everyNode: [fenceKey(lock)] },
    cleanupKeys: [lock, fenceKey(lock), waitQueueKey(lock), waitDeadlineKey(lock), waitTicketKey(lock), stock, marker, lastFenceKey(stock)],
  };
}

/** Where the run history lives, on node 0: a list of run ids, newest first, and one JSON string per run. */
export const RUNS_LIST_KEY = "lockscope:lab:runs";
export const runRecordKey = (id: string): string => `lockscope:lab:run:${id}`;
/**
 * Rewritten by the console running a run at each progress write, with a TTL: how long node 0 has gone without
 * hearing from it is read from node 0's own clock (the key's PTTL), never by comparing two consoles' clocks.
 */
export const runHeartbeatKey = (id: string): string => `lockscope:lab:heartbeat:${id}`;
/** Set by a console asked to cancel a run that another console instance is running. */
export const runCancelKey = (id: string): string => `lockscope:lab:cancel:${id}`;
export const RUNS_KEPT = 50;
