import { ACQUIRE_LUA } from "./acquire.lua.ts";
import { commitFence } from "./commit-fence.ts";
import { driftMs, reportErrors, votesOf, type Engine } from "./engine.ts";
import { AcquireAbortedError, FenceUnavailableError, NodesFailedError, ResourceHeldError, type NodeVote } from "./errors.ts";
import { composeLockValue, encodeIdentityTail, randomId } from "./identity.ts";
import { leaveQueue } from "./leave-queue.ts";
import { RedlockLock, type HoldState } from "./lock.ts";
import { releaseOnNodes } from "./release.ts";
import {
  countGranted,
  evidenceOf,
  GRANTED_OUTCOME,
  heldByOf,
  isGranted,
  isSplitVote,
  parseAcquireReply,
  parseSetReply,
  PENDING_OUTCOME,
  shortestPttl,
  type AcquireReply,
  type Failure,
} from "./replies.ts";
import { runRound, SET_NX_PX, type NodeOutcome } from "./round.ts";
import { defineScript } from "./script.ts";
import { retryCount as checkRetryCount } from "./settings.ts";
import * as check from "./validate.ts";
import { excludeNodes, GRANTED_NODE, newWaiter, nextAttempt, sleepUnlessWoken, type AcquireWaiter } from "./waiter.ts";

const ACQUIRE = defineScript(ACQUIRE_LUA);

export interface AcquireOptions {
  /** Aborting it stops waiting: `acquire` rejects with `AcquireAbortedError` (name "AbortError"). */
  signal?: AbortSignal;
  /** Holder label for this lock. @default the instance's `label` */
  label?: string | null;
  /** Issue a fencing token (`lock.fence`). @default the instance's `fenced` */
  fenced?: boolean;
  /** Wait in arrival order. @default the instance's `fair` */
  fair?: boolean;
  /** @default the instance's `retryCount` */
  retryCount?: number;
}

const ACQUIRE_OPTION_NAMES: readonly (keyof AcquireOptions)[] = Object.freeze(["signal", "label", "fenced", "fair", "retryCount"]);

/** @internal Told each attempt's votes, granted or not (the node-redlock-compatible entry keeps per-attempt stats). */
export type AttemptObserver = (votes: readonly NodeVote[], granted: boolean) => void;

/** @internal An acquisition's arguments, checked (see `checkAcquire`). */
export interface AcquireRequest {
  resources: string[];
  ttlMs: number;
  signal: AbortSignal | undefined;
  fenced: boolean;
  fair: boolean;
  retries: number;
  /** `encodeIdentityTail` of the lock's host and label. */
  tail: string;
  /**
   * The waiter is not woken when the engine's subscriber connections, opened at its first refusal, start
   * listening (see `Waiter.pollsUntilListening`): the compat entry's attempts are counted as node-redlock's.
   */
  pollsUntilListening?: boolean;
}

/**
 * @internal Checks an acquisition's arguments, sending nothing: the entry points that open the engine's
 * subscriber connections before they acquire (`using()`, the compat entry) call it first, so a bad argument
 * fails at once and opens no connection.
 */
export function checkAcquire(engine: Engine, resourcesArg: unknown, ttlArg: unknown, options?: AcquireOptions): AcquireRequest {
  const resources = check.resourceList("resources", resourcesArg);
  const ttlMs = check.positiveInteger("ttlMs", ttlArg);
  if (engine.clustered) check.oneSlot(resources);
  const settings = engine.settings;
  const request: AcquireRequest = { resources, ttlMs, signal: undefined, fenced: settings.fenced, fair: settings.fair, retries: settings.retryCount, tail: engine.identityTail };
  if (options !== undefined) {
    check.optionsObject<AcquireOptions>("acquire", options, ACQUIRE_OPTION_NAMES);
    request.signal = check.abortSignal("signal", options.signal);
    if (options.fenced !== undefined) request.fenced = check.boolean("fenced", options.fenced);
    if (options.fair !== undefined) request.fair = check.boolean("fair", options.fair);
    if (options.retryCount !== undefined) request.retries = checkRetryCount("retryCount", options.retryCount);
    if (options.label !== undefined) request.tail = encodeIdentityTail(settings.host, check.holderField("label", options.label));
  }
  check.ttlAboveDrift(ttlMs, driftMs(settings, ttlMs));
  return request;
}

export async function acquireLock(engine: Engine, resourcesArg: unknown, ttlArg: unknown, options?: AcquireOptions, onAttempt?: AttemptObserver): Promise<RedlockLock> {
  return acquireChecked(engine, checkAcquire(engine, resourcesArg, ttlArg, options), onAttempt);
}

/** @internal `acquireLock` with arguments `checkAcquire` passed. */
export async function acquireChecked(engine: Engine, request: AcquireRequest, onAttempt?: AttemptObserver): Promise<RedlockLock> {
  const { resources, ttlMs, signal, fenced, fair, retries, tail } = request;
  const settings = engine.settings;
  const { clients, quorum } = engine;
  const maxAttempts = retries === -1 ? Infinity : retries + 1;
  const id = randomId(engine.instanceTag);
  const acquiredAt = Date.now();
  const value = composeLockValue(id, acquiredAt, settings.pid, null, tail);
  const queued = fair || settings.wakeOnRelease;
  const modeIndex = (fenced ? 1 : 0) | (fair ? 2 : 0);
  let waiter: AcquireWaiter | null = null;
  const timeoutMs = settings.nodeTimeoutMs;
  const drift = driftMs(settings, ttlMs);
  // The first try of a one-resource, unfenced, unfair acquisition is the bare `SET NX PX` (a node runs no
  // script for the common, uncontended case); the nodes that refuse it run the acquire script right after,
  // which publishes the refusal, queues the waiter and says who holds the lock. Fenced acquisitions need
  // the nodes' fences, fair ones must not take a free lock reserved for another waiter, and several
  // resources must be taken atomically: those always run the script.
  const plainFirst = resources.length === 1 && !fenced && !fair;
  const started = performance.now();
  let roundStart = started;
  let acquired = false;
  // Whether any command went out: an acquisition stopped before its first round has no queue to leave.
  let sent = false;
  let bootstrapped = false;
  // The nodes whose acquire script refused it at least once: with telemetry on, the waiter was announced on
  // the contention channel there, so giving up is announced too.
  const refusedOn = new Set<number>();
  // Set while nodes may hold this acquisition's value that nothing has released yet (granted, and kept for the
  // attempt run again after a fence bootstrap): giving up then must take it back, queued or not.
  let mayHold = false;

  try {
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw new AcquireAbortedError(resources, attempt - 1, signal.reason);
      // Granted by releases while waiting (see HAND_OVER_LUA): the lock is ours on a quorum already. A
      // fenced waiter still runs its next attempt (which finds its own value and renews it): it must read
      // the fences of every node that answers, not only of the nodes that granted it.
      const grantedBy = waiter && !fenced && waiter.grants >= quorum ? waiter : null;
      sent = true;
      let outcomes: Array<NodeOutcome<AcquireReply>>;
      // The nodes that ran the acquire script in this attempt (null: all of them), so may have queued it.
      let scriptNodes: number[] | null = null;
      if (grantedBy) {
        attempt -= 1; // no new attempt: the one the grants answer
        outcomes = Array.from(grantedBy.nodes, (state) => (state === GRANTED_NODE ? GRANTED_OUTCOME : PENDING_OUTCOME));
      } else {
        if (waiter) nextAttempt(waiter, attempt);
        roundStart = attempt === 1 ? started : performance.now();
        // The acquire script's arguments for this attempt (the mode: see acquireModes).
        const scriptArgs = () => [value, ttlMs, engine.acquireModes[modeIndex | (attempt > 1 ? 4 : 0) | (resources.length === 1 && attempt < maxAttempts ? 8 : 0)]!, attempt];
        if (plainFirst && attempt === 1) {
          outcomes = await runRound(clients, SET_NX_PX, {
            keys: resources,
            args: [value, ttlMs],
            timeoutMs,
            parse: parseSetReply,
            early: engine.acquireEarly,
            onLate: engine.onLateAcquire,
          });
          reportErrors(engine, outcomes, "acquire");
          scriptNodes = [];
          if (countGranted(outcomes) < quorum) {
            outcomes.forEach((o, i) => {
              if (o.state === "ok" && o.value.kind === "unchecked") scriptNodes!.push(i);
            });
            if (scriptNodes.length > 0) outcomes = await acquireScriptOn(engine, scriptNodes, outcomes, resources, scriptArgs());
          }
        } else {
          outcomes = await runRound(clients, ACQUIRE, {
            keys: resources,
            args: scriptArgs(),
            timeoutMs,
            parse: parseAcquireReply,
            // Resolve early on success only: a failed round waits for every node (or the timeout), so that in
            // the common contended case every node has answered "held" and there is nothing to clean up.
            // Fenced, success needs a quorum that granted and kept their fences (see fenceDecision).
            early: fenced ? engine.fencedAcquireEarly : engine.acquireEarly,
            onLate: engine.onLateAcquire,
          });
          reportErrors(engine, outcomes, "acquire");
        }
      }

      let granted = 0;
      let answered = 0;
      let damaged = 0;
      for (let i = 0; i < outcomes.length; i++) {
        const outcome = outcomes[i]!;
        if (outcome.state !== "ok") continue;
        answered += 1;
        if (outcome.value.kind === "granted") granted += 1;
        else if (outcome.value.kind === "damaged") damaged += 1;
        else if (outcome.value.kind !== "unchecked") refusedOn.add(i);
      }

      if (granted > 0) mayHold = true;
      let failure: Failure | null = null;
      let lockValue = value;
      let fence: string | null = null;
      if (granted >= quorum) {
        if (fenced) {
          const decision = await fenceDecision(engine, resources, outcomes, attempt, !bootstrapped);
          if (decision.kind === "seeded") {
            // No node had a marker (a new deployment, or fences from before markers): every node was seeded
            // and marked; the same attempt runs again (its value, already written where it was granted,
            // counts as free there).
            bootstrapped = true;
            attempt -= 1;
            continue;
          }
          if (decision.kind === "failed") failure = decision.failure;
          else {
            // Record the fence on a quorum of nodes that kept their fences before handing it out (see
            // commit-fence.lua.ts for why).
            fence = decision.fence;
            lockValue = composeLockValue(id, acquiredAt, settings.pid, fence, tail);
            failure = await commitFence(engine, resources, value, lockValue, fence, attempt);
          }
        }
        if (!failure) {
          const deadline = roundStart + ttlMs - drift;
          const now = performance.now();
          const validityMs = deadline - now;
          if (validityMs > 0) {
            if (queued && !grantedBy && (scriptNodes === null ? attempt > 1 || answered > granted : scriptNodes.length > 0)) {
              // Queued on a node by this or an earlier refused attempt: leave it there (nodes still pending
              // are handled by the round's late answers, see `onLateAcquire`). A plain first try queued
              // only where the script ran after it. Granted by releases, it stays queued on the nodes
              // whose grant has not come yet (it is probably on its way): the release of this lock leaves
              // those queues (RELEASE_LUA).
              const notGranted: number[] = [];
              outcomes.forEach((o, i) => {
                if (!(o.state === "ok" && o.value.kind === "granted") && (scriptNodes === null || scriptNodes.includes(i))) notGranted.push(i);
              });
              leaveQueue(engine, resources, id, notGranted);
            }
            const state: HoldState = {
              value: lockValue,
              previousValue: fenced ? value : null,
              deadline,
              acquiredAtMono: now,
              releasing: null,
              lostReported: false,
              owner: engine.owner,
            };
            // Epoch expiry from the epoch start of the acquisition plus monotonic time: no second clock read.
            const lock = new RedlockLock(resources, fence, attempt, state, validityMs, acquiredAt + (deadline - started));
            if (engine.listening("acquired")) {
              engine.emit("acquired", { resources, fence, waitMs: now - started, attempts: attempt, validityMs });
            }
            acquired = true;
            onAttempt?.(votesOf(outcomes, isGranted), true);
            return lock;
          }
          failure = { reason: "validity", votes: votesOf(outcomes, isGranted) };
        }
      } else if (damaged > 0 && granted + damaged >= quorum) {
        // A quorum would have granted but for damaged fence keys: that is what to tell, not "taken".
        failure = { reason: "nodes-failed", votes: votesOf(outcomes, isGranted), fence: new FenceUnavailableError(resources, "damaged", evidenceOf(outcomes), quorum, attempt) };
      } else {
        failure = { reason: answered < quorum ? "nodes-failed" : "conflict", votes: votesOf(outcomes, isGranted) };
      }

      // Partial locks come off before the next attempt, or they would block everyone's quorum until they
      // expire. Nodes that refused hold nothing of ours; a node that failed or timed out may still apply
      // our SET later, so it gets a release too (queued behind the SET on the same connection, which
      // keeps the order), without waiting for a node that may not answer.
      const grantedNodes: number[] = [];
      const unknownNodes: number[] = [];
      outcomes.forEach((o, i) => {
        if (o.state !== "ok") {
          if (!grantedBy) unknownNodes.push(i);
        } else if (o.value.kind === "granted") grantedNodes.push(i);
      });
      const lastAttempt = attempt >= maxAttempts;
      if (!waiter && settings.wakeOnRelease && !lastAttempt) {
        // Registered before anything else is awaited, so a release heard from now on wakes it (and a
        // grant for this attempt heard a moment ago is replayed by addWaiter).
        waiter = newWaiter(id, clients.length, quorum, request.pollsUntilListening);
        waiter.attempt = attempt;
        engine.notifications.retain();
        engine.notifications.addWaiter(resources, waiter);
      }
      if (waiter) {
        // Granted, but too late (no validity left) or the fence could not be recorded: those grants are
        // released below; until the next attempt no grant counts (0 is no attempt's number).
        if (grantedBy) nextAttempt(waiter, 0);
        // Nodes released below or whose answer is unknown: their grants do not count (see excludeNodes).
        else if (unknownNodes.length > 0 || grantedNodes.length > 0) excludeNodes(waiter, [...unknownNodes, ...grantedNodes]);
      }
      const ours = fenced ? [lockValue, value] : [value];
      if (unknownNodes.length > 0) void releaseOnNodes(engine, resources, ours, unknownNodes);
      if (grantedNodes.length > 0) await releaseOnNodes(engine, resources, ours, grantedNodes);
      mayHold = false;
      if (engine.listening("attempt-failed")) engine.emit("attempt-failed", { resources, attempt, reason: failure.reason });
      onAttempt?.(failure.votes, false);

      if (failure.fence && (lastAttempt || failure.fatal)) throw failure.fence;
      if (lastAttempt) {
        if (failure.reason === "conflict") throw new ResourceHeldError(resources, heldByOf(resources, outcomes), failure.votes, attempt);
        throw new NodesFailedError(resources, failure.votes, quorum, attempt, failure.reason === "validity" ? "too-slow" : "errors");
      }

      let delayMs = settings.retryDelayMs + Math.round((Math.random() * 2 - 1) * settings.retryJitterMs);
      if (failure.reason === "conflict") {
        // No point sleeping past the holder's TTL: retry as it runs out (spread a little so waiters do not
        // all arrive in the same millisecond).
        const expiresIn = shortestPttl(outcomes);
        if (expiresIn >= 0) delayMs = Math.min(delayMs, expiresIn + 1 + Math.floor(Math.random() * 5));
        // A split vote (some nodes granted, too few, and no other holder has a quorum): contenders raced
        // for a free lock and none won, or the winner is not known yet. Retry soon, after a random pause so
        // the racers fall out of step (two cannot split forever, each node grants only one of them, but
        // three or more could). A lock another holder has on a quorum is no race, even when a node that
        // came back empty granted this attempt: the waiter waits its retry delay like any other.
        if (grantedNodes.length > 0 && isSplitVote(outcomes, quorum)) delayMs = Math.min(delayMs, 1 + Math.floor(Math.random() * 10));
      }
      await sleepUnlessWoken(waiter, delayMs, timeoutMs, signal);
    }
  } finally {
    // Giving up, for whatever reason (the signal, the last attempt, a throwing listener): leave the queues,
    // give back a lock that releases granted meanwhile, or that an attempt took and did not release yet (a
    // fence bootstrap keeps it for the attempt run again), and say so where the attempts were announced (a
    // waiter that never queued runs the same script for that, on the nodes that refused it: it leaves no
    // queue and finds no lock).
    const announce = !acquired && refusedOn.size > 0 && settings.telemetry;
    if (!acquired && (queued || mayHold) && sent) leaveQueue(engine, resources, id, clients.map((_, i) => i), value, announce);
    else if (announce) leaveQueue(engine, resources, id, [...refusedOn], value, true);
    if (waiter) {
      engine.notifications.removeWaiter(resources, waiter);
      engine.notifications.unretain();
    }
  }
}

/**
 * What a fenced attempt that a quorum granted may do with the fences its round read. F = (highest fence
 * over every node that answered) + 1 is safe when at least a quorum of those nodes kept their fences (have
 * their marker): every fence handed out before was recorded on a quorum of marked nodes, and two quorums
 * share a node (the proof is in docs/engine.md). Nodes without marker are re-seeded in the background.
 * With no marker anywhere and every node answering, every node is seeded first (`seeded`: run again).
 */
async function fenceDecision(
  engine: Engine,
  resources: readonly string[],
  outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>,
  attempt: number,
  mayBootstrap: boolean,
): Promise<{ kind: "fence"; fence: string } | { kind: "seeded" } | { kind: "failed"; failure: Failure }> {
  const quorum = engine.quorum;
  let trusted = 0;
  let unanswered = 0;
  let highest = 0n;
  const unmarked: number[] = [];
  outcomes.forEach((o, i) => {
    if (o.state !== "ok") {
      unanswered += 1;
      return;
    }
    const known = o.value.known;
    if (!known) return;
    const fence = BigInt(known.fence);
    if (fence > highest) highest = fence;
    if (known.marked) trusted += 1;
    else unmarked.push(i);
  });
  if (trusted >= quorum) {
    for (const index of unmarked) engine.fenceRepairs.schedule(index);
    return { kind: "fence", fence: (highest + 1n).toString() };
  }
  const votes = votesOf(outcomes, isGranted);
  if (mayBootstrap && unmarked.length === outcomes.length) {
    try {
      await engine.fenceRepairs.bootstrap(resources);
      return { kind: "seeded" };
    } catch (error) {
      if (!(error instanceof FenceUnavailableError)) throw error;
      return { kind: "failed", failure: { reason: "nodes-failed", votes, fence: new FenceUnavailableError(resources, "untrusted", error.nodes, quorum, attempt) } };
    }
  }
  // Fewer than a quorum of marked nodes answered. When the nodes that did not answer could not make up a
  // quorum either, no retry can help: an operator must re-seed (docs/engine.md), so it fails at once. Unless
  // no node that answered has a marker: then this may be a deployment whose nodes were never seeded, which
  // a later attempt seeds once every node answers.
  const mayBeNew = mayBootstrap && trusted === 0 && unmarked.length + unanswered === outcomes.length;
  return {
    kind: "failed",
    failure: {
      reason: "nodes-failed",
      votes,
      fence: new FenceUnavailableError(resources, "untrusted", evidenceOf(outcomes), quorum, attempt),
      fatal: trusted + unanswered < quorum && !mayBeNew,
    },
  };
}

/**
 * Runs the acquire script on the nodes that refused the plain first try, and returns the attempt's
 * outcomes with theirs in place of "unchecked". It waits for every one of those nodes (or the timeout):
 * most are about to answer "held" and be queued.
 */
async function acquireScriptOn(
  engine: Engine,
  nodes: readonly number[],
  outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>,
  resources: readonly string[],
  args: ReadonlyArray<string | number>,
): Promise<Array<NodeOutcome<AcquireReply>>> {
  const answers = await runRound(
    nodes.map((i) => engine.clients[i]!),
    ACQUIRE,
    {
      keys: resources,
      args,
      timeoutMs: engine.settings.nodeTimeoutMs,
      parse: parseAcquireReply,
      onLate: engine.onLateAcquire,
      nodes,
    },
  );
  reportErrors(engine, answers, "acquire", nodes);
  const merged = outcomes.slice();
  answers.forEach((answer, j) => (merged[nodes[j]!] = answer));
  return merged;
}

