import { EventEmitter } from "node:events";
import { acquireLock, type AcquireOptions } from "./acquire.ts";
import { acquireModes } from "./acquire.lua.ts";
import { lateAcquireHandler } from "./leave-queue.ts";
import { heldAndMarked, isGranted, isGrantedAndMarked } from "./replies.ts";
import type { RedlockClient } from "./client.ts";
import { dropClock } from "./drops.ts";
import type { Engine } from "./engine.ts";
import type { RedlockEvents } from "./events.ts";
import { extendLock } from "./extend.ts";
import { encodeIdentityTail, INSTANCE_TAG_LENGTH, randomId } from "./identity.ts";
import { wakeChannel } from "./telemetry.ts";
import { lockState, RedlockLock, type LockOwner, type ReleaseResult } from "./lock.ts";
import { Notifications } from "./notifications.ts";
import { deletedOne, releaseLock } from "./release.ts";
import { FenceRepairs, seedAll, type ReseedResult } from "./reseed.ts";
import { quorumOf } from "./round.ts";
import { isClusterClient } from "./script.ts";
import { resolveSettings, type RedlockSettings } from "./settings.ts";
import { usingLock, type UsingRoutine } from "./using.ts";
import * as check from "./validate.ts";

let readEngine: (redlock: Redlock) => Engine;

/**
 * The instance that acquired `lock` (its nodes are the ones that hold it), or undefined for something that is not a
 * lock (the operation then rejects with its TypeError).
 */
function ownerOf(lock: unknown): LockOwner | undefined {
  return lock instanceof RedlockLock ? lockState(lock).owner : undefined;
}

/** @internal For the package's other entry points (compat.ts), which run the same operations. */
export const engineOf = (redlock: Redlock): Engine => readEngine(redlock);

/**
 * Redlock over N independent Redis nodes, with fencing tokens, holder identity in every lock value and
 * contention telemetry published from the acquire script. The API follows node-redlock's, and the lock
 * keys are the same (the resource names), so the two engines exclude each other.
 *
 * The clients are the caller's: the engine never closes them. It opens its own subscriber connections
 * (with `duplicate()`) only while something waits or a `using()` lock is held; `quit()` closes them.
 */
export class Redlock extends EventEmitter<RedlockEvents> {
  static {
    readEngine = (redlock) => redlock.#engine;
  }

  readonly settings: Readonly<Required<RedlockSettings>>;
  readonly #engine: Engine;

  constructor(clients: readonly RedlockClient[], settings?: RedlockSettings) {
    super();
    const nodes = check.clientList<RedlockClient>("clients", clients, ["evalsha", "eval", "set", "duplicate"]);
    if (new Set(nodes).size !== nodes.length) check.fail("clients", "an array of distinct clients (one per node)", clients);
    this.settings = resolveSettings(settings);
    const owner: LockOwner = {
      release: (lock) => this.release(lock),
      extend: (lock, ttlMs) => this.extend(lock, ttlMs),
    };
    // Listeners run synchronously, often from the engine's detached work (late answers, background
    // releases, timers): an exception thrown by one is dropped here, so it can neither become an unhandled
    // rejection nor break the operation that emitted the event.
    const emitSafely = (event: keyof RedlockEvents, payload: unknown) => {
      try {
        (this.emit as (name: string, ...args: unknown[]) => boolean)(event, payload);
      } catch {
        // (see above)
      }
    };
    const nodeError = (index: number, error: Error, operation: RedlockEvents["node-error"][0]["operation"]) => {
      if (this.listenerCount("node-error") > 0) emitSafely("node-error", { index, error, operation });
    };
    const quorum = quorumOf(nodes.length);
    // Starts every waiter id this instance makes, so a release can wake this instance alone.
    const instanceTag = randomId().slice(0, INSTANCE_TAG_LENGTH);
    this.#engine = {
      clients: nodes,
      drops: nodes.map(dropClock),
      settings: this.settings,
      quorum,
      clustered: nodes.some(isClusterClient),
      identityTail: encodeIdentityTail(this.settings.host, this.settings.label),
      instanceTag,
      notifications: new Notifications(nodes, wakeChannel(instanceTag), this.settings.subscriberIdleMs, (index, error) => nodeError(index, error, "subscribe")),
      owner,
      listening: (event) => this.listenerCount(event) > 0,
      emit: (event, ...payload) => emitSafely(event, payload[0]),
      nodeError,
      onLateAcquire: lateAcquireHandler(() => this.#engine),
      onLateRelease: (index, outcome) => {
        if (outcome.state === "error") nodeError(index, outcome.error, "release");
      },
      acquireEarly: Object.freeze({ quorum, isFor: isGranted, when: "success" as const }),
      fencedAcquireEarly: Object.freeze({ quorum, isFor: isGrantedAndMarked, when: "success" as const }),
      commitEarly: Object.freeze({ quorum, isFor: heldAndMarked, when: "success" as const }),
      fenceRepairs: new FenceRepairs(() => this.#engine),
      releaseEarly: Object.freeze({ quorum, isFor: deletedOne, when: "either" as const }),
      acquireModes: acquireModes(this.settings),
    };
  }

  /** How many nodes must agree: floor(N/2) + 1. */
  get quorum(): number {
    return this.#engine.quorum;
  }

  /**
   * Locks every resource on a quorum of nodes (all of them atomically on each node) for `ttlMs`.
   * Rejects with `ResourceHeldError` ("taken": other holders, with who they are), `NodesFailedError`
   * ("broken": too few nodes answered, or too slowly), or `AcquireAbortedError` (the signal aborted).
   */
  acquire(resources: string[], ttlMs: number, options?: AcquireOptions): Promise<RedlockLock> {
    return acquireLock(this.#engine, resources, ttlMs, options);
  }

  /**
   * See `releaseLock`: resolves `{released, votes}`, never rejects for node failures. A lock another instance
   * acquired is released by that instance (its nodes, its events), as `lock.release()` does.
   */
  release(lock: RedlockLock): Promise<ReleaseResult> {
    const owner = ownerOf(lock);
    if (owner && owner !== this.#engine.owner) return owner.release(lock);
    return releaseLock(this.#engine, lock);
  }

  /**
   * Extends the same `RedlockLock` by `ttlMs` from now; refuses an expired lock. A lock another instance
   * acquired is extended by that instance (its nodes, its events), as `lock.extend()` does.
   */
  extend(lock: RedlockLock, ttlMs: number): Promise<RedlockLock> {
    const owner = ownerOf(lock);
    if (owner && owner !== this.#engine.owner) return owner.extend(lock, ttlMs);
    return extendLock(this.#engine, lock, ttlMs);
  }

  /** Runs `routine` under the lock, extending it automatically; `signal` aborts when the lock is lost. */
  using<T>(resources: string[], ttlMs: number, routine: UsingRoutine<T>): Promise<T>;
  using<T>(resources: string[], ttlMs: number, options: AcquireOptions, routine: UsingRoutine<T>): Promise<T>;
  using<T>(resources: string[], ttlMs: number, optionsOrRoutine: AcquireOptions | UsingRoutine<T>, maybeRoutine?: UsingRoutine<T>): Promise<T> {
    const options = typeof optionsOrRoutine === "function" ? {} : optionsOrRoutine;
    const routine = typeof optionsOrRoutine === "function" ? optionsOrRoutine : maybeRoutine;
    return usingLock<T>(this.#engine, resources, ttlMs, options, routine);
  }

  /**
   * Seeds every node's fences from the highest fence over ALL nodes (every node must answer) and gives the
   * nodes without fence marker theirs, so fenced acquisitions work again after fewer than a quorum of nodes
   * kept their fences (`FenceUnavailableError` with reason `untrusted`). This accepts a risk the engine
   * does not take on its own: a fence recorded only on nodes that lost it is gone, and may be handed out
   * again (see docs/engine.md, "Fencing tokens"). Rejects with `FenceUnavailableError` when a node fails.
   */
  async reseedFences(): Promise<ReseedResult> {
    return (await seedAll(this.#engine, [], false))!;
  }

  /** Closes the subscriber connections the engine opened (never the clients it was given). */
  quit(): Promise<void> {
    this.#engine.fenceRepairs.stop();
    this.#engine.notifications.close();
    return Promise.resolve();
  }

  /** Same as `quit()`. */
  close(): Promise<void> {
    return this.quit();
  }
}
