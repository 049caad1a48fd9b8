import { reportErrors, votesOf, type Engine } from "./engine";
import { LockLostError } from "./errors";
import { lockState, type Lock, type ReleaseResult } from "./lock";
import { RELEASE_LUA } from "./release.lua";
import { runRound, type NodeOutcome } from "./round";
import { defineScript } from "./script";

const RELEASE = defineScript(RELEASE_LUA);

function parseCount(raw: unknown): number {
  if (typeof raw !== "number") throw new Error(`Unexpected reply from the release script: ${String(raw)}`);
  return raw;
}

/** @internal Compare-and-delete of `values` on the given nodes; never rejects. */
export async function releaseOnNodes(
  engine: Engine,
  resources: readonly string[],
  values: readonly string[],
  nodes: readonly number[],
): Promise<Array<NodeOutcome<number>>> {
  const clients = nodes.length === engine.clients.length ? engine.clients : nodes.map((i) => engine.clients[i]!);
  const outcomes = await runRound(clients, RELEASE, {
    keys: resources,
    args: values,
    timeoutMs: engine.settings.nodeTimeoutMs,
    parse: parseCount,
    onLate: (i, outcome) => {
      if (outcome.state === "error") engine.nodeError(nodes[i]!, outcome.error, "release");
    },
  });
  if (engine.listening("node-error")) {
    outcomes.forEach((outcome, i) => {
      if (outcome.state === "error") engine.nodeError(nodes[i]!, outcome.error, "release");
    });
  }
  return outcomes;
}

/**
 * Releases a lock on every node. Resolves `{released: true}` when a quorum still held it and deleted it;
 * `{released: false}` when it was already gone (expired or taken: a `lost` event says so) or too few
 * nodes answered. Never rejects for node failures: an unreleased lock expires on its own.
 */
export function releaseLock(engine: Engine, lock: Lock): Promise<ReleaseResult> {
  const state = lockState(lock);
  // A second release (or one racing with using()'s) shares the first: the value is deleted once.
  state.releasing ??= (async () => {
    const resources = lock.resources;
    const isDone = (deleted: number) => deleted === resources.length;
    const values = state.previousValue === null ? [state.value] : [state.value, state.previousValue];
    const outcomes = await runRound(engine.clients, RELEASE, {
      keys: resources,
      args: values,
      timeoutMs: engine.settings.nodeTimeoutMs,
      parse: parseCount,
      early: { quorum: engine.quorum, isFor: isDone, when: "either" },
      onLate: engine.onLateRelease,
    });
    reportErrors(engine, outcomes, "release");
    const votes = votesOf(outcomes, isDone);
    const now = performance.now();
    const votesFor = votes.filter((v) => v.vote === "for").length;
    const released = votesFor >= engine.quorum;
    if (released) {
      if (engine.listening("released")) {
        engine.emit("released", { resources, heldMs: now - state.acquiredAtMono, validityMarginMs: state.deadline - now });
      }
    } else if (votes.filter((v) => v.vote === "against").length > engine.clients.length - engine.quorum) {
      // A quorum answered and does not hold it: it was lost before this release.
      if (!state.lostReported && engine.listening("lost")) engine.emit("lost", { resources, reason: new LockLostError(resources, state.value, votes) });
    }
    state.deadline = -Infinity;
    return { released, votes };
  })();
  return state.releasing;
}
