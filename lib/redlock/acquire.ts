import { ACQUIRE_LUA, LEAVE_QUEUE_LUA } from "./acquire.lua";
import { COMMIT_FENCE_LUA } from "./commit-fence.lua";
import { driftMs, reportErrors, votesOf, type Engine } from "./engine";
import { AcquireAbortedError, NodesFailedError, ResourceHeldError, type HeldBy } from "./errors";
import { composeLockValue, decodeLockValue, encodeIdentityTail, randomId } from "./identity";
import { Lock, type LockState } from "./lock";
import type { Waiter } from "./notifications";
import { releaseOnNodes } from "./release";
import { runRound, type NodeOutcome } from "./round";
import { defineScript } from "./script";
import { retryCount as checkRetryCount } from "./settings";
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

type AcquireReply =
  | { kind: "granted"; fence: string | null }
  | { kind: "held"; index: number; value: string | null; pttlMs: number }
  | { kind: "queued"; index: number; head: string };

const GRANTED: AcquireReply = Object.freeze({ kind: "granted", fence: null });

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

const isGranted = (reply: AcquireReply) => reply.kind === "granted";
const isOne = (reply: number) => reply === 1;
const parseNumber = (raw: unknown): number => {
  if (typeof raw !== "number") throw new Error(`Unexpected reply: ${String(raw)}`);
  return raw;
};

type Failure = { reason: "conflict" | "nodes-failed" | "validity"; votes: ReturnType<typeof votesOf> };

/** A waiter between attempts; `woken` also records a release heard while an attempt was in flight. */
interface AcquireWaiter extends Waiter {
  woken: boolean;
  resolve: (() => void) | null;
}

/** Sleeps until the retry time, a release naming this waiter (or anyone), or the signal. */
function sleepUnlessWoken(waiter: AcquireWaiter | null, delayMs: number, signal: AbortSignal | undefined): Promise<void> {
  if (delayMs <= 0 || signal?.aborted || waiter?.woken) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, delayMs);
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

/** Leave the waiter queues on the given nodes (fire and forget: a stale entry lapses anyway). */
function leaveQueue(engine: Engine, resources: readonly string[], id: string, nodes: readonly number[]): void {
  if (nodes.length === 0) return;
  const clients = nodes.map((i) => engine.clients[i]!);
  void runRound(clients, LEAVE_QUEUE, { keys: resources, args: [id], timeoutMs: engine.settings.nodeTimeoutMs, parse: parseNumber }).then((outcomes) =>
    outcomes.forEach((outcome, i) => {
      if (outcome.state === "error") engine.nodeError(nodes[i]!, outcome.error, "leave-queue");
    }),
  );
}

export async function acquireLock(engine: Engine, resourcesArg: unknown, ttlArg: unknown, options: AcquireOptions = {}): Promise<Lock> {
  const resources = check.resourceList("resources", resourcesArg);
  const ttlMs = check.positiveInteger("ttlMs", ttlArg);
  if (typeof options !== "object" || options === null) check.fail("options", "an object", options);
  const settings = engine.settings;
  const signal = check.abortSignal("signal", options.signal);
  const fenced = options.fenced === undefined ? settings.fenced : check.boolean("fenced", options.fenced);
  const fair = options.fair === undefined ? settings.fair : check.boolean("fair", options.fair);
  const retries = options.retryCount === undefined ? settings.retryCount : checkRetryCount("retryCount", options.retryCount);
  const tail = options.label === undefined ? engine.identityTail : encodeIdentityTail(settings.host, check.nullableString("label", options.label));

  const { clients, quorum } = engine;
  const maxAttempts = retries === -1 ? Infinity : retries + 1;
  const id = randomId();
  const acquiredAt = Date.now();
  const value = composeLockValue(id, acquiredAt, settings.pid, null, tail);
  // Waiters join the resource's queue when refused: a release then wakes the one that came first instead
  // of all of them at once (a stampede of attempts that mostly fail). Fair mode also reserves a free
  // resource for the head of its queue. The entry must outlive the longest pause between attempts.
  const queued = fair || settings.wakeOnRelease;
  const queueEntryMs = Math.max(1000, 3 * (settings.retryDelayMs + settings.retryJitterMs + settings.nodeTimeoutMs));
  const flags = `${fenced ? "f" : ""}${queued ? (fair ? "r" : "q") : ""}`;
  const suffix = queued ? `:${queueEntryMs}` : "";
  const firstMode = flags + suffix;
  // From the second attempt on, the waiter may be queued on a node: "w" makes taking the lock there leave
  // the queue in the same script.
  const laterMode = queued ? `${flags}w${suffix}` : firstMode;
  let waiter: AcquireWaiter | null = null;
  const timeoutMs = settings.nodeTimeoutMs;
  const drift = driftMs(settings, ttlMs);
  const started = performance.now();
  // Resolve early on success only: a failed round waits for every node (or the timeout), so that in the
  // common contended case every node has answered "held" and there is nothing to clean up.
  const early = { quorum, isFor: isGranted, when: "success" as const };

  try {
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) {
        if (queued) leaveQueue(engine, resources, id, clients.map((_, i) => i));
        throw new AcquireAbortedError(resources, attempt - 1, signal.reason);
      }
      if (waiter) waiter.woken = false;
      const roundStart = performance.now();
      const telemetry = settings.telemetry ? attempt : "";
      const outcomes = await runRound(clients, ACQUIRE, {
        keys: resources,
        args: [value, ttlMs, attempt === 1 ? firstMode : laterMode, telemetry],
        timeoutMs,
        parse: parseAcquireReply,
        early,
        onLate: engine.onLateAcquire,
      });
      reportErrors(engine, outcomes, "acquire");

      let granted = 0;
      let answered = 0;
      let highestFence = -1n;
      for (const outcome of outcomes) {
        if (outcome.state !== "ok") continue;
        answered += 1;
        if (outcome.value.kind === "granted") {
          granted += 1;
          if (outcome.value.fence !== null) {
            const fence = BigInt(outcome.value.fence);
            if (fence > highestFence) highestFence = fence;
          }
        }
      }

      let failure: Failure | null = null;
      let lockValue = value;
      let fence: string | null = null;
      if (granted >= quorum) {
        if (fenced) {
          // Record the fence on a quorum before handing it out (see commit-fence.lua.ts for why).
          fence = (highestFence + 1n).toString();
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
          const validityMs = deadline - performance.now();
          if (validityMs > 0) {
            if (queued && (attempt > 1 || answered > granted)) {
              const notGranted: number[] = [];
              outcomes.forEach((o, i) => {
                if (!(o.state === "ok" && o.value.kind === "granted")) notGranted.push(i);
              });
              leaveQueue(engine, resources, id, notGranted);
            }
            const state: LockState = {
              value: lockValue,
              previousValue: fenced ? value : null,
              deadline,
              acquiredAtMono: performance.now(),
              releasing: null,
              lostReported: false,
              owner: engine.owner,
            };
            const lock = new Lock(resources, fence, attempt, state, validityMs);
            if (engine.listening("acquired")) {
              engine.emit("acquired", { resources, fence, waitMs: performance.now() - started, attempts: attempt, validityMs });
            }
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
        if (o.state !== "ok") unknownNodes.push(i);
        else if (o.value.kind === "granted") grantedNodes.push(i);
      });
      const ours = fenced ? [lockValue, value] : [value];
      if (unknownNodes.length > 0) void releaseOnNodes(engine, resources, ours, unknownNodes);
      if (grantedNodes.length > 0) await releaseOnNodes(engine, resources, ours, grantedNodes);
      if (engine.listening("attempt-failed")) engine.emit("attempt-failed", { resources, attempt, reason: failure.reason });

      if (attempt >= maxAttempts) {
        if (queued) leaveQueue(engine, resources, id, clients.map((_, i) => i));
        if (failure.reason === "conflict") throw new ResourceHeldError(resources, heldByOf(resources, outcomes), failure.votes, attempt);
        throw new NodesFailedError(resources, failure.votes, quorum, attempt, failure.reason === "validity" ? "too-slow" : "errors");
      }

      let delayMs = settings.retryDelayMs + Math.round((Math.random() * 2 - 1) * settings.retryJitterMs);
      if (failure.reason === "conflict") {
        // No point sleeping past the holder's TTL: retry as it runs out (spread a little so waiters do not
        // all arrive in the same millisecond).
        const expiresIn = shortestPttl(outcomes);
        if (expiresIn >= 0) delayMs = Math.min(delayMs, expiresIn + 1 + Math.floor(Math.random() * 5));
      }
      if (!waiter && settings.wakeOnRelease) {
        const created: AcquireWaiter = {
          id,
          woken: false,
          resolve: null,
          wake: () => {
            created.woken = true;
            created.resolve?.();
          },
        };
        waiter = created;
        engine.notifications.retain();
        engine.notifications.addWaiter(resources, waiter);
      }
      await sleepUnlessWoken(waiter, delayMs, signal);
    }
  } finally {
    if (waiter) {
      engine.notifications.removeWaiter(resources, waiter);
      engine.notifications.unretain();
    }
  }
}

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
    const resource = resources[o.value.index] ?? resources[0]!;
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
