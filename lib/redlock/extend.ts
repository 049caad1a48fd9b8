import { driftMs, reportErrors, votesOf, type Engine } from "./engine.ts";
import { LockExpiredError, LockLostError, NodesFailedError } from "./errors.ts";
import { EXTEND_LUA } from "./extend.lua.ts";
import { lockState, renewLock, type RedlockLock } from "./lock.ts";
import { runRound } from "./round.ts";
import { defineScript } from "./script.ts";
import * as check from "./validate.ts";

const EXTEND = defineScript(EXTEND_LUA);
const isOne = (reply: number) => reply === 1;
/** The node holds none of it: it came back empty (or its key expired early) and the rest is ours. */
const MISSING = 2;

function parseFlag(raw: unknown): number {
  if (typeof raw !== "number") throw new Error(`Unexpected reply from the extend script: ${String(raw)}`);
  return raw;
}

/**
 * Gives the lock `ttlMs` more from now, on the nodes that still hold it, and updates the same `RedlockLock`.
 * Refuses a lock whose validity already ran out (`LockExpiredError`): its keys may belong to someone
 * else by now. Rejects with `LockLostError` when a quorum answered and does not hold it, and with
 * `NodesFailedError` when too few nodes answered.
 *
 * Nodes where the lock is missing (a node that came back empty after a restart) get it written back once
 * a quorum extended it, and are reported with a `restored` event: otherwise two such restarts in turn
 * would leave the lock on fewer nodes than a quorum while its holder still believes in it, and a second
 * holder could take it.
 */
export async function extendLock(engine: Engine, lock: RedlockLock, ttlArg: unknown): Promise<RedlockLock> {
  const state = lockState(lock);
  const ttlMs = check.positiveInteger("ttlMs", ttlArg);
  check.ttlAboveDrift(ttlMs, driftMs(engine.settings, ttlMs));
  const resources = lock.resources;
  if (state.releasing) throw new LockLostError(resources, state.value, [], `Lock on ${JSON.stringify(resources)} was released`);
  const roundStart = performance.now();
  if (roundStart >= state.deadline) throw new LockExpiredError(resources, roundStart - state.deadline);

  const outcomes = await runRound(engine.clients, EXTEND, {
    keys: resources,
    args: [state.value, ttlMs, state.previousValue ?? "", ""],
    timeoutMs: engine.settings.nodeTimeoutMs,
    parse: parseFlag,
    early: { quorum: engine.quorum, isFor: isOne, when: "either" },
    onLate: (index, outcome, _options, succeeded) => {
      if (outcome.state === "error") engine.nodeError(index, outcome.error, "extend");
      // A node that came back empty answers after the quorum that extended the lock, often.
      else if (succeeded && outcome.state === "ok" && outcome.value === MISSING) void restoreOn(engine, lock, [index], ttlMs, roundStart);
    },
  });
  reportErrors(engine, outcomes, "extend");
  const votes = votesOf(outcomes, isOne);
  // Released while the extension ran (the release was sent after it on every connection, so it deleted what
  // was extended): that is the caller's own doing, not slow or failed nodes.
  if (state.releasing) throw new LockLostError(resources, state.value, votes, `Lock on ${JSON.stringify(resources)} was released`);
  const votesFor = votes.filter((v) => v.vote === "for").length;
  let error: Error | null = null;
  if (votesFor >= engine.quorum) {
    const deadline = roundStart + ttlMs - driftMs(engine.settings, ttlMs);
    const validityMs = deadline - performance.now();
    if (validityMs > 0) {
      state.deadline = deadline;
      renewLock(lock, validityMs);
      if (engine.listening("extended")) engine.emit("extended", { resources, ttlMs, validityMs });
      const missing: number[] = [];
      outcomes.forEach((o, i) => {
        if (o.state === "ok" && o.value === MISSING) missing.push(i);
      });
      if (missing.length > 0) await restoreOn(engine, lock, missing, ttlMs, roundStart);
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

/**
 * Writes the lock back on `nodes`, where the extension found it missing, for what is left of the new TTL
 * (a quorum extended it, so it is still ours). Never rejects: a node that fails here only stays without.
 */
async function restoreOn(engine: Engine, lock: RedlockLock, nodes: number[], ttlMs: number, roundStart: number): Promise<void> {
  const state = lockState(lock);
  const leftMs = Math.floor(ttlMs - (performance.now() - roundStart));
  // Never for a lock its holder was told it lost (see usingLock): an operator may have deleted it there.
  if (leftMs <= 0 || state.releasing || state.lostReported) return;
  const restored = await runRound(
    nodes.map((i) => engine.clients[i]!),
    EXTEND,
    {
      keys: lock.resources,
      args: [state.value, leftMs, state.previousValue ?? "", "restore"],
      timeoutMs: engine.settings.nodeTimeoutMs,
      parse: parseFlag,
      nodes,
    },
  );
  reportErrors(engine, restored, "extend", nodes);
  const written = nodes.filter((_, j) => {
    const o = restored[j]!;
    return o.state === "ok" && o.value === 1;
  });
  if (written.length > 0 && engine.listening("restored")) engine.emit("restored", { resources: lock.resources, nodes: written });
}
