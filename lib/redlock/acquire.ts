import { ACQUIRE_LUA, LEAVE_QUEUE_LUA } from "./acquire.lua";
import { COMMIT_FENCE_LUA } from "./commit-fence.lua";
import { driftMs, reportErrors, votesOf, type Engine } from "./engine";
import { AcquireAbortedError, FenceUnavailableError, NodesFailedError, ResourceHeldError, type FenceNodeEvidence, type HeldBy } from "./errors";
import { composeLockValue, decodeLockValue, encodeIdentityTail, lockValueId, randomId } from "./identity";
import { Lock, type LockState } from "./lock";
import type { Waiter } from "./notifications";
import { releaseOnNodes } from "./release";
import { runRound, SET_NX_PX, type NodeOutcome, type RoundOptions } from "./round";
import { defineScript } from "./script";
import { retryCount as checkRetryCount, type ResolvedSettings } from "./settings";
import * as check from "./validate";

const ACQUIRE = defineScript(ACQUIRE_LUA);
const COMMIT_FENCE = defineScript(COMMIT_FENCE_LUA);
const LEAVE_QUEUE = defineScript(LEAVE_QUEUE_LUA);

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

/**
 * @internal What a node told a fenced acquisition about the resources' fences: its highest one, and whether
 * it has its fence marker (it kept its fences: see reseed.ts).
 */
export interface FenceKnowledge {
  fence: string;
  marked: boolean;
}

/**
 * @internal One node's answer to the acquire script, or to the plain first try ("unchecked": SET NX was
 * refused there; the acquire script runs next on that node and answers with one of the others). `known`:
 * the node's fence knowledge (fenced acquisitions only, on every reply, null otherwise). "damaged": a fence
 * key of resource `index` holds something that is not a fence (nothing was taken there).
 */
export type AcquireReply =
  | { kind: "granted"; known: FenceKnowledge | null }
  | { kind: "held"; index: number; value: string | null; pttlMs: number; known: FenceKnowledge | null }
  | { kind: "queued"; index: number; head: string; known: FenceKnowledge | null }
  | { kind: "damaged"; index: number; known: null }
  | { kind: "unchecked"; known: null };

const GRANTED: AcquireReply = Object.freeze({ kind: "granted", known: null });
const UNCHECKED: AcquireReply = Object.freeze({ kind: "unchecked", known: null });

const FENCE_PATTERN = /^(0|[1-9][0-9]{0,39})$/;

/** The fence knowledge at `at` in a fenced reply (a fence the script validated, and the marker or nil). */
function knowledgeAt(reply: unknown[], at: number): FenceKnowledge | null {
  if (reply.length <= at) return null;
  const fence = reply[at];
  if (typeof fence !== "string" || !FENCE_PATTERN.test(fence)) throw new Error(`Unexpected fence in the acquire script's reply: ${String(fence)}`);
  return { fence, marked: typeof reply[at + 1] === "string" };
}

function parseSetReply(raw: unknown): AcquireReply {
  if (raw === "OK") return GRANTED;
  if (raw === null) return UNCHECKED;
  throw new Error(`Unexpected reply to SET NX PX: ${JSON.stringify(raw)}`);
}

function parseAcquireReply(raw: unknown): AcquireReply {
  // The common reply (taken, unfenced) is the integer 1: no object is made for it.
  if (raw === 1) return GRANTED;
  if (!Array.isArray(raw)) throw new Error(`Unexpected reply from the acquire script: ${String(raw)}`);
  const reply = raw as unknown[];
  switch (reply[0]) {
    case 1:
      return { kind: "granted", known: knowledgeAt(reply, 1) };
    case 0:
      return {
        kind: "held",
        index: Number(reply[1]) - 1,
        value: typeof reply[2] === "string" ? reply[2] : null,
        pttlMs: typeof reply[3] === "number" ? reply[3] : -2,
        known: knowledgeAt(reply, 4),
      };
    case 2:
      return { kind: "queued", index: Number(reply[1]) - 1, head: String(reply[2]), known: knowledgeAt(reply, 3) };
    case 3:
      return { kind: "damaged", index: Number(reply[1]) - 1, known: null };
    default:
      throw new Error(`Unexpected reply from the acquire script: ${String(reply[0])}`);
  }
}

/** @internal */
export const isGranted = (reply: AcquireReply): boolean => reply.kind === "granted";
/** @internal A fenced round may resolve early on a quorum of nodes that granted and kept their fences. */
export const isGrantedAndMarked = (reply: AcquireReply): boolean => reply.kind === "granted" && reply.known !== null && reply.known.marked;
const parseNumber = (raw: unknown): number => {
  if (typeof raw !== "number") throw new Error(`Unexpected reply: ${String(raw)}`);
  return raw;
};

/**
 * Why an attempt failed. `fence`: a fenced attempt that had a quorum but no fence it could hand out safely
 * (it becomes the error when it is the last attempt, or at once when `fatal`: no retry can help).
 */
type Failure = {
  reason: "conflict" | "nodes-failed" | "validity";
  votes: ReturnType<typeof votesOf>;
  fence?: FenceUnavailableError;
  fatal?: boolean;
};

/** @internal One node's answer to commit-fence: it holds the lock (with the fence in its value); it has its marker. */
export interface CommitReply {
  held: boolean;
  marked: boolean;
  damaged: boolean;
}

function parseCommitReply(raw: unknown): CommitReply {
  if (!Array.isArray(raw)) throw new Error(`Unexpected reply from the commit-fence script: ${String(raw)}`);
  const reply = raw as unknown[];
  return { held: reply[0] === 1, marked: typeof reply[1] === "string", damaged: reply[0] === -1 };
}

/** @internal */
export const heldAndMarked = (reply: CommitReply): boolean => reply.held && reply.marked;

/**
 * A waiter between attempts. `woken` also records a wake-up heard while an attempt was in flight. Grants
 * (a release wrote the lock in this waiter's value, see HAND_OVER_LUA) count for `attempt`, the latest
 * attempt: its refusal left the tickets those releases answered, and validity is measured from its start.
 */
interface AcquireWaiter extends Waiter {
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

const GRANTED_NODE = 1;
const EXCLUDED_NODE = -1;

function newWaiter(id: string, nodes: number, quorum: number): AcquireWaiter {
  const waiter: AcquireWaiter = {
    id,
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
function excludeNodes(waiter: AcquireWaiter, nodes: readonly number[]): void {
  for (const node of nodes) {
    if (waiter.nodes[node] === GRANTED_NODE) waiter.grants -= 1;
    waiter.nodes[node] = EXCLUDED_NODE;
  }
}

/** Starts counting grants for a new attempt. */
function nextAttempt(waiter: AcquireWaiter, attempt: number): void {
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
function sleepUnlessWoken(waiter: AcquireWaiter | null, delayMs: number, graceMs: number, signal: AbortSignal | undefined): Promise<void> {
  if (delayMs <= 0 || signal?.aborted || waiter?.woken) return Promise.resolve();
  return new Promise<void>((resolve) => {
    let graced = false;
    let timer = setTimeout(onTimer, delayMs);
    function onTimer() {
      if (!graced && waiter && waiter.grants > 0) {
        graced = true;
        timer = setTimeout(onTimer, graceMs);
        return;
      }
      done();
    }
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      if (waiter) waiter.resolve = null;
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
    if (waiter) waiter.resolve = done;
  });
}

/**
 * @internal The engine's handler for late answers of acquire rounds. A node that refused after the round
 * had already succeeded on a quorum queued this (now holding) acquisition there: it leaves that queue at
 * once, or its stale entry would be named as the next waiter (fair mode: block the queue) until it lapses.
 */
export function lateAcquireHandler(engine: () => Engine): NonNullable<RoundOptions<AcquireReply>["onLate"]> {
  return (index, outcome, options, succeeded) => {
    if (outcome.state === "error") {
      engine().nodeError(index, outcome.error, "acquire");
      return;
    }
    // (A plain first try that was refused queued nothing.)
    if (!succeeded || outcome.state !== "ok" || outcome.value.kind === "granted" || outcome.value.kind === "unchecked") return;
    const mode = String(options.args[2]);
    if (mode.includes("q") || mode.includes("r")) leaveQueue(engine(), options.keys, lockValueId(String(options.args[0])) ?? "", [index]);
  };
}

/**
 * Leave the waiter queues on the given nodes (fire and forget: a stale entry lapses anyway). With
 * `value` (giving up), a lock a release granted to this waiter meanwhile is deleted and handed on.
 */
function leaveQueue(engine: Engine, resources: readonly string[], id: string, nodes: readonly number[], value?: string): void {
  if (nodes.length === 0) return;
  const clients = nodes.map((i) => engine.clients[i]!);
  const args = value === undefined ? [id] : [id, value];
  void runRound(clients, LEAVE_QUEUE, { keys: resources, args, timeoutMs: engine.settings.nodeTimeoutMs, parse: parseNumber, nodes }).then((outcomes) =>
    reportErrors(engine, outcomes, "leave-queue", nodes),
  );
}

/**
 * @internal The acquire script's mode argument for each combination of (fenced, fair, later attempt, one
 * resource and more attempts to come), built once per engine: index `(fenced ? 1 : 0) | (fair ? 2 : 0) |
 * (later ? 4 : 0) | (ticket ? 8 : 0)`.
 */
export function acquireModes(settings: ResolvedSettings): readonly string[] {
  // The longest a live waiter goes between two attempts (each refreshes its queue entry and its ticket):
  // its retry delay, plus a round that waits for a slow node, the release of a partial lock after it,
  // and the extra wait for grants still on their way (see sleepUnlessWoken).
  const betweenAttemptsMs = settings.retryDelayMs + settings.retryJitterMs + 3 * settings.nodeTimeoutMs;
  // The entry must outlive the longest pause between attempts.
  const queueEntryMs = Math.max(1000, 3 * betweenAttemptsMs);
  const modes: string[] = [];
  for (let index = 0; index < 16; index++) {
    const fenced = (index & 1) !== 0;
    const fair = (index & 2) !== 0;
    const later = (index & 4) !== 0;
    // Waiters join the resource's queue when refused: a release then hands the lock over to the one that
    // came first (or wakes it) instead of waking all of them at once (a stampede of attempts that mostly
    // fail). Fair mode also reserves a free resource for the head of its queue. From the second attempt
    // on, the waiter may be queued on a node: "w" makes taking the lock there leave the queue in the same
    // script.
    const queued = fair || settings.wakeOnRelease;
    // A grant ticket (one resource, not the last attempt): the release writes the lock in this waiter's
    // value, so the hand-over costs no round trip. It is honoured only while the waiter is known to be
    // alive (it asked within the longest pause between attempts), so a crashed waiter is not handed a lock
    // it would sit on; a last attempt leaves none, since nobody would be waiting for the grant.
    const ticket = queued && settings.wakeOnRelease && (index & 8) !== 0;
    const flags = `${fenced ? "f" : ""}${settings.telemetry ? "t" : ""}${queued ? (fair ? "r" : "q") : ""}${queued && later ? "w" : ""}${ticket ? "g" : ""}`;
    modes.push(queued ? `${flags}:${queueEntryMs}${ticket ? `:${betweenAttemptsMs}` : ""}` : flags);
  }
  return Object.freeze(modes);
}

export async function acquireLock(engine: Engine, resourcesArg: unknown, ttlArg: unknown, options?: AcquireOptions): Promise<Lock> {
  const resources = check.resourceList("resources", resourcesArg);
  const ttlMs = check.positiveInteger("ttlMs", ttlArg);
  const settings = engine.settings;
  let signal: AbortSignal | undefined;
  let fenced = settings.fenced;
  let fair = settings.fair;
  let retries = settings.retryCount;
  let tail = engine.identityTail;
  if (options !== undefined) {
    if (typeof options !== "object" || options === null) check.fail("options", "an object", options);
    signal = check.abortSignal("signal", options.signal);
    if (options.fenced !== undefined) fenced = check.boolean("fenced", options.fenced);
    if (options.fair !== undefined) fair = check.boolean("fair", options.fair);
    if (options.retryCount !== undefined) retries = checkRetryCount("retryCount", options.retryCount);
    if (options.label !== undefined) tail = encodeIdentityTail(settings.host, check.nullableString("label", options.label));
  }

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
  let bootstrapped = false;

  try {
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw new AcquireAbortedError(resources, attempt - 1, signal.reason);
      // Granted by releases while waiting (see HAND_OVER_LUA): the lock is ours on a quorum already. A
      // fenced waiter still runs its next attempt (which finds its own value and renews it): it must read
      // the fences of every node that answers, not only of the nodes that granted it.
      const grantedBy = waiter && !fenced && waiter.grants >= quorum ? waiter : null;
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
      }

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
            const state: LockState = {
              value: lockValue,
              previousValue: fenced ? value : null,
              deadline,
              acquiredAtMono: now,
              releasing: null,
              lostReported: false,
              owner: engine.owner,
            };
            // Epoch expiry from the epoch start of the acquisition plus monotonic time: no second clock read.
            const lock = new Lock(resources, fence, attempt, state, validityMs, acquiredAt + (deadline - started));
            if (engine.listening("acquired")) {
              engine.emit("acquired", { resources, fence, waitMs: now - started, attempts: attempt, validityMs });
            }
            acquired = true;
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
        waiter = newWaiter(id, clients.length, quorum);
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
      if (engine.listening("attempt-failed")) engine.emit("attempt-failed", { resources, attempt, reason: failure.reason });

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
    // and give back a lock that releases granted meanwhile.
    if (!acquired && queued) leaveQueue(engine, resources, id, clients.map((_, i) => i), value);
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
  // quorum either, no retry can help: an operator must re-seed (docs/engine.md), so it fails at once.
  return {
    kind: "failed",
    failure: { reason: "nodes-failed", votes, fence: new FenceUnavailableError(resources, "untrusted", evidenceOf(outcomes), quorum, attempt), fatal: trusted + unanswered < quorum },
  };
}

/**
 * Records fence F on the nodes (commit-fence). The lock is handed out only when a quorum holds it with F in
 * its value and a quorum recorded F with their marker present (a node that lost its data since the acquire
 * round has no marker: its record does not count).
 */
async function commitFence(engine: Engine, resources: readonly string[], value: string, lockValue: string, fence: string, attempt: number): Promise<Failure | null> {
  const quorum = engine.quorum;
  const commit = await runRound(engine.clients, COMMIT_FENCE, {
    keys: resources,
    args: [value, lockValue, fence],
    timeoutMs: engine.settings.nodeTimeoutMs,
    parse: parseCommitReply,
    // Early on success only: a failing commit waits for every node, since a node that holds the lock and
    // one that recorded F with its marker need not be the same.
    early: engine.commitEarly,
    onLate: (index, outcome) => {
      if (outcome.state === "error") engine.nodeError(index, outcome.error, "commit-fence");
    },
  });
  reportErrors(engine, commit, "commit-fence");
  let holders = 0;
  let marked = 0;
  let replied = 0;
  const evidence: FenceNodeEvidence[] = commit.map((o, index): FenceNodeEvidence => {
    if (o.state === "error") return { index, state: "error", fence: null, error: o.error };
    if (o.state === "pending") return { index, state: "pending", fence: null };
    replied += 1;
    if (o.value.held) holders += 1;
    if (o.value.marked) marked += 1;
    return { index, state: o.value.damaged ? "damaged" : o.value.marked ? "trusted" : "untrusted", fence: o.value.damaged ? null : fence };
  });
  if (holders >= quorum && marked >= quorum) return null;
  const votes = votesOf(commit, (reply) => reply.held);
  if (holders < quorum) return { reason: replied < quorum ? "nodes-failed" : "conflict", votes };
  return { reason: "nodes-failed", votes, fence: new FenceUnavailableError(resources, "commit", evidence, quorum, attempt) };
}

/** Per node, what a fenced round's replies told about its fences. */
function evidenceOf(outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>): FenceNodeEvidence[] {
  return outcomes.map((o, index): FenceNodeEvidence => {
    if (o.state === "error") return { index, state: "error", fence: null, error: o.error };
    if (o.state === "pending") return { index, state: "pending", fence: null };
    if (o.value.kind === "damaged") return { index, state: "damaged", fence: null };
    const known = o.value.known;
    return { index, state: known?.marked ? "trusted" : "untrusted", fence: known?.fence ?? null };
  });
}

/** No other holder has the lock on a quorum of nodes: contenders split a free lock. */
function isSplitVote(outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>, quorum: number): boolean {
  const holders = new Map<string, number>();
  for (const o of outcomes) {
    if (o.state !== "ok") continue;
    if (o.value.kind === "held" && o.value.value !== null) {
      const count = (holders.get(o.value.value) ?? 0) + 1;
      if (count >= quorum) return false;
      holders.set(o.value.value, count);
    }
  }
  return true;
}

function countGranted(outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>): number {
  let granted = 0;
  for (const o of outcomes) if (o.state === "ok" && o.value.kind === "granted") granted += 1;
  return granted;
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

const PENDING_OUTCOME: NodeOutcome<AcquireReply> = Object.freeze({ state: "pending" as const });
const GRANTED_OUTCOME: NodeOutcome<AcquireReply> = Object.freeze({ state: "ok" as const, value: GRANTED });

function shortestPttl(outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>): number {
  let shortest = -1;
  for (const o of outcomes) {
    if (o.state === "ok" && o.value.kind === "held" && o.value.pttlMs >= 0 && (shortest < 0 || o.value.pttlMs < shortest)) shortest = o.value.pttlMs;
  }
  return shortest;
}

function heldByOf(resources: readonly string[], outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>): HeldBy[] {
  const heldBy: HeldBy[] = [];
  outcomes.forEach((o, index) => {
    if (o.state !== "ok" || o.value.kind === "granted") return;
    // ("unchecked" never gets here: the acquire script answered for those nodes.)
    const resource = ("index" in o.value ? resources[o.value.index] : undefined) ?? resources[0]!;
    if (o.value.kind === "held") {
      heldBy.push({
        index,
        resource,
        value: o.value.value,
        holder: o.value.value === null ? null : decodeLockValue(o.value.value),
        pttlMs: o.value.pttlMs === -2 ? null : o.value.pttlMs,
      });
    } else {
      heldBy.push({ index, resource, value: null, holder: null, pttlMs: null });
    }
  });
  return heldBy;
}
