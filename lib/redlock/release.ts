import { reportErrors, votesOf, type Engine } from "./engine.ts";
import { doubtAcrossDrops } from "./drops.ts";
import { LockLostError, toError } from "./errors.ts";
import { lockState, type RedlockLock, type HoldState, type ReleaseResult } from "./lock.ts";
import { RELEASE_LUA } from "./release.lua.ts";
import type { ScriptClient } from "./client.ts";
import { deliverLocalGrant } from "./notifications.ts";
import type { ReleaseReply } from "./replies.ts";
import { runRound, type NodeOutcome } from "./round.ts";
import { defineScript } from "./script.ts";

const RELEASE = defineScript(RELEASE_LUA);


// The common replies, made once (the release is on the hot path).
const REPLIES: readonly ReleaseReply[] = [Object.freeze({ deleted: 0, waited: false }), Object.freeze({ deleted: 1, waited: false })];

function parseRelease(raw: unknown, client: ScriptClient): ReleaseReply {
  if (typeof raw === "number") return REPLIES[raw] ?? { deleted: raw, waited: false };
  if (!Array.isArray(raw) || typeof raw[0] !== "number") throw new Error(`Unexpected reply from the release script: ${String(raw)}`);
  // Grants: a waiter of this process hears of them now, with this reply, instead of by the message that
  // follows it (the message still comes, and counts once).
  for (let i = 1; i + 2 < raw.length; i += 3) deliverLocalGrant(client, String(raw[i]), Number(raw[i + 1]), String(raw[i + 2]));
  return { deleted: raw[0], waited: true };
}

/** @internal A vote for a one-resource release. */
export const deletedOne = (reply: ReleaseReply): boolean => reply.deleted === 1;

const yieldToOthers = () => new Promise<void>((resolve) => setImmediate(resolve));

/** @internal Compare-and-delete of `values` on the given nodes; never rejects. */
export async function releaseOnNodes(
  engine: Engine,
  resources: readonly string[],
  values: readonly string[],
  nodes: readonly number[],
): Promise<Array<NodeOutcome<ReleaseReply>>> {
  const clients = nodes.length === engine.clients.length ? engine.clients : nodes.map((i) => engine.clients[i]!);
  const outcomes = await runRound(clients, RELEASE, {
    keys: resources,
    args: values,
    timeoutMs: engine.settings.nodeTimeoutMs,
    parse: parseRelease,
    onLate: engine.onLateRelease,
    nodes,
  });
  reportErrors(engine, outcomes, "release", nodes);
  return outcomes;
}

/**
 * Releases a lock on every node. Resolves `{released: true}` when a quorum still held it and deleted it;
 * `{released: false}` when it was already gone (expired or taken: a `lost` event says so) or too few
 * nodes answered. Never rejects for node failures: an unreleased lock expires on its own.
 */
export function releaseLock(engine: Engine, lock: RedlockLock): Promise<ReleaseResult> {
  let state: HoldState;
  try {
    state = lockState(lock);
  } catch (error) {
    // A promise-returning call reports a bad argument by rejecting, so a `.catch()` sees it.
    return Promise.reject(toError(error));
  }
  // A second release (or one racing with using()'s) shares the first: the value is deleted once.
  return (state.releasing ??= releaseOnce(engine, lock, state));
}

async function releaseOnce(engine: Engine, lock: RedlockLock, state: HoldState): Promise<ReleaseResult> {
  const resources = lock.resources;
  const early = resources.length === 1 ? engine.releaseEarly : { quorum: engine.quorum, isFor: (reply: ReleaseReply) => reply.deleted === resources.length, when: "either" as const };
  const sentAt = performance.now();
  const outcomes = await runRound(engine.clients, RELEASE, {
    keys: resources,
    args: state.previousValue === null ? [state.value] : [state.value, state.previousValue],
    timeoutMs: engine.settings.nodeTimeoutMs,
    parse: parseRelease,
    early,
    onLate: engine.onLateRelease,
  });
  // A node that answered "not deleted" after its connection dropped may have deleted it in the first run: never a
  // sign that the lock was lost.
  doubtAcrossDrops(outcomes, engine.drops, sentAt, (reply) => !early.isFor(reply));
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
  // The lock went to a waiter (or one was woken). A waiter in another engine instance of this process that
  // does not share our clients hears of it by a message arriving with this reply: resolving one event-loop
  // turn later lets it start first, instead of this caller's next step (often asking for the same lock
  // again, which can only queue behind it).
  if (outcomes.some((o) => o.state === "ok" && o.value.waited)) await yieldToOthers();
  return { released, votes };
}
