import { reportErrors, votesOf, type Engine } from "./engine";
import { LockLostError } from "./errors";
import { lockState, type Lock, type LockState, type ReleaseResult } from "./lock";
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

const isDone = (deleted: number, resources: number): boolean => deleted === resources;

/**
 * Releases a lock on every node. Resolves `{released: true}` when a quorum still held it and deleted it;
 * `{released: false}` when it was already gone (expired or taken: a `lost` event says so) or too few
 * nodes answered. Never rejects for node failures: an unreleased lock expires on its own.
 */
export function releaseLock(engine: Engine, lock: Lock): Promise<ReleaseResult> {
  const state = lockState(lock);
  // A second release (or one racing with using()'s) shares the first: the value is deleted once.
  return (state.releasing ??= releaseOnce(engine, lock, state));
}

async function releaseOnce(engine: Engine, lock: Lock, state: LockState): Promise<ReleaseResult> {
  const resources = lock.resources;
  const early = resources.length === 1 ? engine.releaseEarly : { quorum: engine.quorum, isFor: (deleted: number) => isDone(deleted, resources.length), when: "either" as const };
  const outcomes = await runRound(engine.clients, RELEASE, {
    keys: resources,
    args: state.previousValue === null ? [state.value] : [state.value, state.previousValue],
    timeoutMs: engine.settings.nodeTimeoutMs,
    parse: parseCount,
    early,
    onLate: engine.onLateRelease,
  });
  reportErrors(engine, outcomes, "release");
  const votes = votesOf(outcomes, early.isFor);
  let votesFor = 0;
  let votesAgainst = 0;
  for (const vote of votes) {
    if (vote.vote === "for") votesFor += 1;
    else if (vote.vote === "against") votesAgainst += 1;
  }
  const released = votesFor >= engine.quorum;
  if (released) {
    if (engine.listening("released")) {
      const now = performance.now();
      engine.emit("released", { resources, heldMs: now - state.acquiredAtMono, validityMarginMs: state.deadline - now });
    }
  } else if (votesAgainst > engine.clients.length - engine.quorum) {
    // A quorum answered and does not hold it: it was lost before this release.
    if (!state.lostReported && engine.listening("lost")) engine.emit("lost", { resources, reason: new LockLostError(resources, state.value, votes) });
  }
  state.deadline = -Infinity;
  return { released, votes };
}
