import { ACQUIRE_LUA, LEAVE_QUEUE_LUA } from "./acquire.lua";
import { COMMIT_FENCE_LUA } from "./commit-fence.lua";
import { driftMs, reportErrors, votesOf, type Engine } from "./engine";
import { AcquireAbortedError, NodesFailedError, ResourceHeldError, type HeldBy } from "./errors";
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
 * @internal One node's answer to the acquire script, or to the plain first try ("unchecked": SET NX was
 * refused there; the acquire script runs next on that node and answers with one of the others).
 */
export type AcquireReply =
  | { kind: "granted"; fence: string | null }
  | { kind: "held"; index: number; value: string | null; pttlMs: number }
  | { kind: "queued"; index: number; head: string }
  | { kind: "unchecked" };

const GRANTED: AcquireReply = Object.freeze({ kind: "granted", fence: null });
const UNCHECKED: AcquireReply = Object.freeze({ kind: "unchecked" });

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
      return { kind: "granted", fence: typeof reply[1] === "string" ? reply[1] : null };
    case 0:
      return {
        kind: "held",
        index: Number(reply[1]) - 1,
        value: typeof reply[2] === "string" ? reply[2] : null,
        pttlMs: typeof reply[3] === "number" ? reply[3] : -2,
      };
    case 2:
      return { kind: "queued", index: Number(reply[1]) - 1, head: String(reply[2]) };
    default:
      throw new Error(`Unexpected reply from the acquire script: ${String(reply[0])}`);
  }
}

/** @internal */
export const isGranted = (reply: AcquireReply): boolean => reply.kind === "granted";
const isOne = (reply: number) => reply === 1;
const parseNumber = (raw: unknown): number => {
  if (typeof raw !== "number") throw new Error(`Unexpected reply: ${String(raw)}`);
  return raw;
};

type Failure = { reason: "conflict" | "nodes-failed" | "validity"; votes: ReturnType<typeof votesOf> };

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
  /** The highest fence reported with the grants ("" for none). */
  grantFence: string;
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
    grantFence: "",
    wake: () => {
      waiter.woken = true;
      waiter.resolve?.();
    },
    grant: (node, attempt, fence) => {
      if (attempt !== waiter.attempt || node >= nodes || waiter.nodes[node] !== 0) return;
      waiter.nodes[node] = GRANTED_NODE;
      waiter.grants += 1;
      if (fence !== "" && (waiter.grantFence === "" || BigInt(fence) > BigInt(waiter.grantFence))) waiter.grantFence = fence;
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
  waiter.grantFence = "";
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

  try {
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw new AcquireAbortedError(resources, attempt - 1, signal.reason);
      // Granted by releases while waiting (see HAND_OVER_LUA): the lock is ours on a quorum already.
      const grantedBy = waiter && waiter.grants >= quorum ? waiter : null;
      let outcomes: Array<NodeOutcome<AcquireReply>>;
      // The nodes that ran the acquire script in this attempt (null: all of them), so may have queued it.
      let scriptNodes: number[] | null = null;
      if (grantedBy) {
        attempt -= 1; // no new attempt: the one the grants answer
        const grant: NodeOutcome<AcquireReply> = fenced ? { state: "ok", value: { kind: "granted", fence: grantedBy.grantFence || "0" } } : GRANTED_OUTCOME;
        outcomes = Array.from(grantedBy.nodes, (state) => (state === GRANTED_NODE ? grant : PENDING_OUTCOME));
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
            early: engine.acquireEarly,
            onLate: engine.onLateAcquire,
          });
          reportErrors(engine, outcomes, "acquire");
        }
      }

      let granted = 0;
      let answered = 0;
      let highestFence = "";
      for (let i = 0; i < outcomes.length; i++) {
        const outcome = outcomes[i]!;
        if (outcome.state !== "ok") continue;
        answered += 1;
        if (outcome.value.kind === "granted") {
          granted += 1;
          const fence = outcome.value.fence;
          if (fence !== null && (highestFence === "" || BigInt(fence) > BigInt(highestFence))) highestFence = fence;
        }
      }

      let failure: Failure | null = null;
      let lockValue = value;
      let fence: string | null = null;
      if (granted >= quorum) {
        if (fenced) {
          // Record the fence on a quorum before handing it out (see commit-fence.lua.ts for why).
          fence = (BigInt(highestFence || "0") + 1n).toString();
          lockValue = composeLockValue(id, acquiredAt, settings.pid, fence, tail);
          const commit = await runRound(clients, COMMIT_FENCE, {
            keys: resources,
            args: [value, lockValue, fence],
            timeoutMs,
            parse: parseNumber,
            early: { quorum, isFor: isOne, when: "either" },
            onLate: (index, outcome) => {
              if (outcome.state === "error") engine.nodeError(index, outcome.error, "commit-fence");
            },
          });
          reportErrors(engine, commit, "commit-fence");
          const votes = votesOf(commit, isOne);
          const committed = votes.filter((v) => v.vote === "for").length;
          const replied = votes.filter((v) => v.vote === "for" || v.vote === "against").length;
          if (committed < quorum) failure = { reason: replied < quorum ? "nodes-failed" : "conflict", votes };
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
        // A split vote (some nodes granted, too few): contenders raced for a free lock and none won, or the
        // winner is not known yet. Retry soon, after a random pause so the racers fall out of step (two
        // cannot split forever, each node grants only one of them, but three or more could).
        if (grantedNodes.length > 0) delayMs = Math.min(delayMs, 1 + Math.floor(Math.random() * 10));
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
