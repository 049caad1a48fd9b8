import { driftMs, reportErrors, votesOf, type Engine } from "./engine";
import { LockExpiredError, LockLostError, NodesFailedError } from "./errors";
import { EXTEND_LUA } from "./extend.lua";
import { lockState, type Lock } from "./lock";
import { runRound } from "./round";
import { defineScript } from "./script";
import * as check from "./validate";

const EXTEND = defineScript(EXTEND_LUA);
const isOne = (reply: number) => reply === 1;

function parseFlag(raw: unknown): number {
  if (typeof raw !== "number") throw new Error(`Unexpected reply from the extend script: ${String(raw)}`);
  return raw;
}

/**
 * Gives the lock `ttlMs` more from now, on the nodes that still hold it, and updates the same `Lock`.
 * Refuses a lock whose validity already ran out (`LockExpiredError`): its keys may belong to someone
 * else by now. Rejects with `LockLostError` when a quorum answered and does not hold it, and with
 * `NodesFailedError` when too few nodes answered.
 */
export async function extendLock(engine: Engine, lock: Lock, ttlArg: unknown): Promise<Lock> {
  const state = lockState(lock);
  const ttlMs = check.positiveInteger("ttlMs", ttlArg);
  const resources = lock.resources;
  if (state.releasing) throw new LockLostError(resources, state.value, [], `Lock on ${JSON.stringify(resources)} was released`);
  const roundStart = performance.now();
  if (roundStart >= state.deadline) throw new LockExpiredError(resources, roundStart - state.deadline);

  const outcomes = await runRound(engine.clients, EXTEND, {
    keys: resources,
    args: [state.value, ttlMs],
    timeoutMs: engine.settings.nodeTimeoutMs,
    parse: parseFlag,
    early: { quorum: engine.quorum, isFor: isOne, when: "either" },
    onLate: (index, outcome) => {
      if (outcome.state === "error") engine.nodeError(index, outcome.error, "extend");
    },
  });
  reportErrors(engine, outcomes, "extend");
  const votes = votesOf(outcomes, isOne);
  const votesFor = votes.filter((v) => v.vote === "for").length;
  let error: Error | null = null;
  if (votesFor >= engine.quorum) {
    const deadline = roundStart + ttlMs - driftMs(engine.settings, ttlMs);
    const validityMs = deadline - performance.now();
    if (validityMs > 0 && !state.releasing) {
      state.deadline = deadline;
      lock.renewed(validityMs);
      if (engine.listening("extended")) engine.emit("extended", { resources, ttlMs, validityMs });
      return lock;
    }
    error = new NodesFailedError(resources, votes, engine.quorum, 1, "too-slow");
  } else {
    const answered = votes.filter((v) => v.vote === "for" || v.vote === "against").length;
    error =
      answered - votesFor > engine.clients.length - engine.quorum
        ? new LockLostError(resources, state.value, votes)
        : new NodesFailedError(resources, votes, engine.quorum, 1);
  }
  if (engine.listening("extend-failed")) engine.emit("extend-failed", { resources, error });
  throw error;
}
