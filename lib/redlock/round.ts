import type { ScriptClient } from "./client";
import { NodeTimeoutError, toError } from "./errors";
import { runScript, type Script } from "./script";

/** One node's answer in a round: a value, an error (including a timeout), or none yet. */
export type NodeOutcome<T> =
  | { state: "ok"; value: T }
  | { state: "error"; error: Error }
  | { state: "pending" };

export interface RoundOptions<T> {
  keys: readonly string[];
  args: ReadonlyArray<string | number>;
  /** Per-node budget: a node that has not answered by then counts as failed, so a stopped node cannot stall the round. */
  timeoutMs: number;
  /** Turns the raw reply into T; a throw counts as that node's error. */
  parse: (raw: unknown) => T;
  /**
   * Called after each answer: true resolves the round at once with the others still pending (their
   * answers still arrive in `onLate`). Without it the round waits for every node or the timeout.
   */
  decided?: (outcomes: ReadonlyArray<NodeOutcome<T>>) => boolean;
  /** An answer that arrived after the round resolved (success or failure), for events and cleanup. */
  onLate?: (index: number, outcome: NodeOutcome<T>) => void;
}

/**
 * Runs one script on every node in parallel. A single timer covers the whole round (not one per node):
 * rounds are the engine's hot path and a timer per command would cost more CPU than the commands.
 */
export function runRound<T>(clients: readonly ScriptClient[], script: Script, options: RoundOptions<T>): Promise<Array<NodeOutcome<T>>> {
  const outcomes: Array<NodeOutcome<T>> = clients.map(() => ({ state: "pending" }));
  return new Promise((resolve) => {
    let done = false;
    let answered = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const finish = () => {
      if (done) return;
      done = true;
      if (timer !== undefined) clearTimeout(timer);
      resolve(outcomes.slice());
    };
    const settle = (index: number, outcome: NodeOutcome<T>) => {
      if (done) {
        options.onLate?.(index, outcome);
        return;
      }
      outcomes[index] = outcome;
      answered += 1;
      if (answered === clients.length || options.decided?.(outcomes)) finish();
    };
    clients.forEach((client, index) => {
      let call: Promise<unknown>;
      try {
        call = runScript(client, script, options.keys, options.args);
      } catch (error) {
        call = Promise.reject(toError(error));
      }
      call.then(
        (raw) => {
          let outcome: NodeOutcome<T>;
          try {
            outcome = { state: "ok", value: options.parse(raw) };
          } catch (error) {
            outcome = { state: "error", error: toError(error) };
          }
          settle(index, outcome);
        },
        (error: unknown) => settle(index, { state: "error", error: toError(error) }),
      );
    });
    if (!done) {
      timer = setTimeout(() => {
        timer = undefined;
        outcomes.forEach((outcome, index) => {
          if (outcome.state === "pending") outcomes[index] = { state: "error", error: new NodeTimeoutError(index, options.timeoutMs) };
        });
        finish();
      }, options.timeoutMs);
    }
  });
}

export const quorumOf = (nodeCount: number): number => Math.floor(nodeCount / 2) + 1;
