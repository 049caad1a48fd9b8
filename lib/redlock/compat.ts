/**
 * node-redlock's API on this engine: the 5.x API (`acquire`, `release`, `extend`, `using`, `ExecutionError`
 * with per-attempt stats, `ResourceLockedError`, the "error" event) and the 4.x API (`lock`, `unlock`,
 * `extend`, `disposer`, callbacks, `LockError`, the "clientError" event) on one class, so an application
 * switches by changing its import. Locks are taken by the engine: they carry its holder identity, are handed
 * over on release and show in its telemetry, and exclude node-redlock's own locks (same keys).
 */
import { EventEmitter } from "node:events";
import { createRequire } from "node:module";
import { acquireChecked, checkAcquire, type AcquireRequest, type AttemptObserver } from "./acquire.ts";
import type { RedlockClient } from "./client.ts";
import { doubtAcrossDrops } from "./drops.ts";
import { votesOf, type Engine } from "./engine.ts";
import { LockLostError, NodesFailedError, ResourceHeldError, toError, type NodeVote } from "./errors.ts";
import { RedlockLock, type HoldState, type ReleaseResult } from "./lock.ts";
import { engineOf, Redlock as NativeRedlock } from "./redlock.ts";
import { releaseOnNodes } from "./release.ts";
import type { ReleaseReply } from "./replies.ts";
import { quorumOf } from "./round.ts";
import { retryCount as retryCountOf, type RedlockSettings } from "./settings.ts";
import { abortableSleep, MAX_TIMER_MS } from "./sleep.ts";
import * as check from "./validate.ts";
import { usingLock } from "./using.ts";

/** node-redlock's settings (5.x names; 4.x takes the same). */
export interface Settings {
  readonly driftFactor: number;
  readonly retryCount: number;
  readonly retryDelay: number;
  readonly retryJitter: number;
  readonly automaticExtensionThreshold: number;
}

const defaultSettings: Readonly<Settings> = Object.freeze({
  driftFactor: 0.01,
  retryCount: 10,
  retryDelay: 200,
  retryJitter: 100,
  automaticExtensionThreshold: 500,
});

/**
 * Refuses, with a TypeError in node-redlock's names, a setting the engine cannot use (NaN, an endless or
 * too long delay, a fractional retry count, a drift factor out of range); what node-redlock takes and uses
 * (a negative delay: no pause; a fractional one: rounded) is taken.
 */
function checkSettings(settings: Settings): Settings {
  check.numberInRange("driftFactor", settings.driftFactor, 0, 0.5);
  retryCountOf("retryCount", settings.retryCount);
  const finite = (name: keyof Settings) => {
    if (!Number.isFinite(settings[name])) check.fail(name, "a finite number", settings[name]);
  };
  finite("retryDelay");
  finite("retryJitter");
  finite("automaticExtensionThreshold");
  const pause = Math.max(0, Math.round(settings.retryDelay)) + Math.max(0, Math.round(settings.retryJitter));
  if (pause > MAX_TIMER_MS) check.timerMs("retryDelay + retryJitter", pause, 0);
  return settings;
}

/** A client as node-redlock takes it (an ioredis `Redis`); the engine's interface is what it needs. */
export type Client = RedlockClient & { quit?(): Promise<unknown> };

/** One client's answer to one attempt, as node-redlock 5.x's declarations name it. */
export type ClientExecutionResult = { client: Client; vote: "for"; value: number } | { client: Client; vote: "against"; error: Error };

/** One attempt's votes, as node-redlock reports them. */
export interface ExecutionStats {
  readonly membershipSize: number;
  readonly quorumSize: number;
  readonly votesFor: Set<Client>;
  readonly votesAgainst: Map<Client, Error>;
}

export interface ExecutionResult {
  attempts: ReadonlyArray<Promise<ExecutionStats>>;
}

/** Another lock holds one or more of the resources (a node's vote against). */
export class ResourceLockedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ResourceLockedError";
  }
}

/** An operation did not reach a quorum within its retries; `attempts` has each attempt's stats. */
export class ExecutionError extends Error {
  constructor(message: string, readonly attempts: ReadonlyArray<Promise<ExecutionStats>>, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ExecutionError";
  }
}

/**
 * 4.x: a lock could not be taken, released or extended; `attempts` counts the attempts made. Messages are 4.x's
 * word for word (the retry count, the resources joined by commas): applications match on them.
 */
export class LockError extends Error {
  constructor(message: string, readonly attempts: number = 0) {
    super(message);
    this.name = "LockError";
  }
}

type NodeCallback<T> = (error: Error | null, value?: T) => void;

/** Settles `callback` (4.x style) from `promise`, and returns the promise for callers that await it. */
function nodeify<T>(promise: Promise<T>, callback?: NodeCallback<T>): Promise<T> {
  if (typeof callback === "function") {
    promise.then(
      (value) => callback(null, value),
      (error: unknown) => callback(toError(error)),
    );
    // The callback has the error: the returned promise must not also become an unhandled rejection.
    promise.catch(() => {});
  }
  return promise;
}

const natives = new WeakMap<object, { native: RedlockLock; released: boolean }>();

/** A held lock. 5.x: `extend()` returns a new Lock. 4.x locks (from `lock()`) are extended in place. */
export class Lock {
  constructor(
    readonly redlock: Redlock,
    readonly resources: string[],
    readonly value: string,
    public attempts: ReadonlyArray<Promise<ExecutionStats>>,
    /** Epoch ms at which the lock's validity runs out; 0 once released or replaced by an extension. */
    public expiration: number,
  ) {}

  release(): Promise<ExecutionResult> {
    return this.redlock.release(this);
  }

  extend(duration: number): Promise<Lock> {
    return this.redlock.extend(this, duration);
  }
}

/** A 4.x lock: `resource` as given to `lock()`, attempts as a count, callbacks. */
export class LegacyLock {
  constructor(
    readonly redlock: Redlock,
    readonly resource: string | string[],
    readonly value: string,
    public expiration: number,
    public attempts: number,
    public attemptsRemaining: number,
  ) {}

  unlock(callback?: NodeCallback<void>): Promise<void> {
    return this.redlock.unlock(this, callback);
  }

  extend(ttl: number, callback?: NodeCallback<LegacyLock>): Promise<LegacyLock> {
    return this.redlock.extend(this, ttl, callback);
  }
}

/**
 * node-redlock's `using()` signal: aborted when the lock could not be extended, with the reason in `error`, an
 * `ExecutionError` (its `cause` is the engine's `LockLostError` or `LockRevokedError`, also the signal's `reason`).
 */
export type RedlockAbortSignal = AbortSignal & { error?: Error };

/** How many distinct settings keep an engine each (see `Redlock.#engine`). */
const MAX_ENGINES = 8;

const durationError = () => new Error("Duration must be an integer value in milliseconds.");
const QUORUM_MESSAGE = "The operation was unable to achieve a quorum during its retry window.";

/**
 * A `ResourceLockedError`'s message, node-redlock's when the count is known ("applied to: 1 of the 2"); where it is
 * not, what is known: a vote against means the operation did not go through on every resource there.
 */
function lockedMessage(applied: number | null, resources: number): string {
  if (applied === null) return `The operation was not applied to all of the ${resources} requested resources (how many it was applied to is not known).`;
  return `The operation was applied to: ${applied} of the ${resources} requested resources.`;
}

/**
 * A release by the engine's own lock: its result has each node's vote only (for: every resource deleted). With
 * one resource a vote against is 0 deleted; with several, how many is not in the result.
 */
const releasedUnknown = (resources: number) => (): number | null => (resources === 1 ? 0 : null);

class Redlock extends EventEmitter {
  /** 4.x: `Redlock.Lock` and `Redlock.LockError`, for `instanceof`. */
  static readonly Lock = LegacyLock;
  static readonly LockError = LockError;

  readonly clients: Set<Client>;
  /** 4.x name of the clients. */
  readonly servers: Client[];
  readonly settings: Settings;
  /** The engines of the settings used last, most recent last (see `#engine`). */
  readonly #engines = new Map<string, NativeRedlock>();
  /** Engines dropped from `#engines` while still in use: closed once idle, or by `quit()`. */
  readonly #retired = new Set<NativeRedlock>();

  constructor(clients: Iterable<Client>, settings: Partial<Settings> = {}, scripts: Record<string, unknown> = {}) {
    super();
    // node-redlock emits "error" for every vote against; without a listener that would throw.
    this.on("error", () => {});
    this.clients = new Set(clients);
    this.servers = [...this.clients];
    if (this.clients.size === 0) throw new Error("Redlock must be instantiated with at least one redis client.");
    const custom = ["lockScript", "unlockScript", "extendScript", "acquireScript", "releaseScript"].filter(
      (name) => typeof (settings as Record<string, unknown>)[name] === "function" || typeof scripts[name] === "function",
    );
    // The engine's scripts are what make hand-over, identity and fences work: a custom script would be
    // ignored, so it is refused rather than dropped without a word.
    if (custom.length > 0) throw new TypeError(`Custom scripts (${custom.join(", ")}) are not supported: the engine runs its own scripts`);
    this.settings = checkSettings(this.#merge(settings));
  }

  #merge(settings: Partial<Settings> | undefined): Settings {
    const pick = (name: keyof Settings) => (typeof settings?.[name] === "number" ? settings[name] : (this.settings ?? defaultSettings)[name]);
    return {
      driftFactor: pick("driftFactor"),
      retryCount: pick("retryCount"),
      retryDelay: pick("retryDelay"),
      retryJitter: pick("retryJitter"),
      automaticExtensionThreshold: pick("automaticExtensionThreshold"),
    };
  }

  /**
   * One engine per distinct settings (most applications use one), sharing the clients. Only the last
   * `MAX_ENGINES` settings keep theirs: an application that computes its settings per call would otherwise
   * make an engine (and keep it, with its subscriber connections) for every call. A dropped engine that is
   * idle is closed at once; one still in use (a waiter, a `using()` routine) finishes that work, closes its
   * connections after its idle time as any engine does, and is let go at a later drop or by `quit()`.
   */
  #engine(settings: Settings): NativeRedlock {
    if (settings !== this.settings) checkSettings(settings);
    const key = `${settings.driftFactor}/${settings.retryCount}/${settings.retryDelay}/${settings.retryJitter}/${settings.automaticExtensionThreshold}`;
    let engine = this.#engines.get(key);
    if (engine) {
      // Most recently used last.
      this.#engines.delete(key);
    } else {
      const native: RedlockSettings = {
        driftFactor: settings.driftFactor,
        retryCount: settings.retryCount,
        retryDelayMs: Math.max(0, Math.round(settings.retryDelay)),
        retryJitterMs: Math.max(0, Math.round(settings.retryJitter)),
        automaticExtensionThresholdMs: Math.max(1, Math.round(settings.automaticExtensionThreshold)),
      };
      engine = new NativeRedlock(this.servers, native);
      for (const retired of this.#retired) {
        if (!engineOf(retired).notifications.idle) continue;
        this.#retired.delete(retired);
        void retired.quit();
      }
      if (this.#engines.size >= MAX_ENGINES) {
        const [oldestKey, oldest] = this.#engines.entries().next().value!;
        this.#engines.delete(oldestKey);
        if (engineOf(oldest).notifications.idle) void oldest.quit();
        else this.#retired.add(oldest);
      }
    }
    this.#engines.set(key, engine);
    return engine;
  }

  /**
   * Emits a vote's error. These run inside the engine's operations (an attempt a quorum granted, a release): a
   * listener that throws must not turn a lock that was taken into a rejection that leaves it held, so what it
   * throws is dropped, as the engine's own events do.
   */
  #tell(event: "error" | "clientError", error: Error): void {
    try {
      this.emit(event, error);
    } catch {
      // (see above)
    }
  }

  /**
   * node-redlock's stats of one attempt. `applied` tells, for a node that voted against, on how many of the
   * resources the operation still went through there, null when the engine's result cannot tell. The default, 0,
   * holds for acquisitions and extensions: their scripts act on every resource of a node or on none.
   */
  #stats(votes: readonly NodeVote[], resources: number, applied: (index: number) => number | null = () => 0): Promise<ExecutionStats> {
    const stats: ExecutionStats = { membershipSize: this.servers.length, quorumSize: Math.floor(this.servers.length / 2) + 1, votesFor: new Set(), votesAgainst: new Map() };
    for (const vote of votes) {
      const client = this.servers[vote.index]!;
      if (vote.vote === "for") stats.votesFor.add(client);
      else if (vote.vote === "against" || vote.vote === "error") {
        const error = vote.vote === "error" ? (vote.error ?? new Error("failed")) : new ResourceLockedError(lockedMessage(applied(vote.index), resources));
        stats.votesAgainst.set(client, error);
        this.#tell("error", error);
        if (vote.vote === "error") this.#tell("clientError", error);
      }
    }
    return Promise.resolve(stats);
  }

  /**
   * Closes the engine's own connections and runs `quit()` on every client (as node-redlock does); 4.x: calls
   * `callback` back when done, as 4.x's `quit(callback)` does.
   */
  quit(callback?: NodeCallback<void>): Promise<void> {
    const quitting = async () => {
      await Promise.all([...this.#engines.values(), ...this.#retired].map((e) => e.quit()));
      this.#retired.clear();
      await Promise.all(this.servers.map((c) => Promise.resolve(c.quit?.())));
    };
    return nodeify(quitting(), callback);
  }

  /**
   * Runs `operation` with an observer that keeps each acquisition attempt's stats; a refusal becomes ExecutionError.
   * `acquiring` says whether a failure is the acquisition's (false once a `using()` routine runs: its errors are its own).
   */
  async #attempted<T>(
    resources: readonly string[],
    operation: (onAttempt: AttemptObserver) => Promise<T>,
    acquiring: () => boolean = () => true,
  ): Promise<{ value: T; attempts: Array<Promise<ExecutionStats>> }> {
    const attempts: Array<Promise<ExecutionStats>> = [];
    try {
      const value = await operation((votes) => attempts.push(this.#stats(votes, resources.length)));
      return { value, attempts };
    } catch (error) {
      if (acquiring() && (error instanceof ResourceHeldError || error instanceof NodesFailedError)) throw new ExecutionError(QUORUM_MESSAGE, attempts);
      throw error;
    }
  }

  #take(resources: string[], duration: number, settings: Settings): Promise<{ value: RedlockLock; attempts: Array<Promise<ExecutionStats>> }> {
    if (Math.floor(duration) !== duration) return Promise.reject(durationError());
    let engine: Engine;
    let request: AcquireRequest;
    try {
      engine = engineOf(this.#engine(settings));
      request = checkAcquire(engine, resources, duration);
    } catch (error) {
      return Promise.reject(toError(error));
    }
    // An uncontended lock opens no connection, as node-redlock's: the engine opens its subscriber connections
    // at the first refusal, and its waiter does not retry at once when they come up, which would spend one of
    // node-redlock's counted retries on catching up rather than on the lock. (The arguments were checked first.)
    request.pollsUntilListening = true;
    return this.#attempted(resources, (onAttempt) => acquireChecked(engine, request, onAttempt));
  }

  /** 5.x: locks `resources` for `duration` ms; rejects with `ExecutionError` when no quorum was reached. */
  async acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock> {
    const { value: native, attempts } = await this.#take(resources, duration, this.#merge(settings));
    const lock = new Lock(this, resources, native.value, attempts, native.expiresAt);
    natives.set(lock, { native, released: false });
    return lock;
  }

  /** 5.x: releases the lock; rejects with `ExecutionError` when a quorum did not hold it any more. */
  async release(lock: Lock, _settings?: Partial<Settings>): Promise<ExecutionResult> {
    lock.expiration = 0;
    const held = natives.get(lock);
    const attempts: Array<Promise<ExecutionStats>> = [];
    if (!held) {
      const { votes, deleted } = await this.#releaseValue(lock.resources, lock.value);
      attempts.push(this.#stats(votes, lock.resources.length, (index) => deleted[index] ?? null));
      if (votes.filter((v) => v.vote === "for").length >= quorumOf(this.servers.length)) return { attempts };
    } else if (!held.released) {
      held.released = true;
      const result = await held.native.release();
      attempts.push(this.#stats(result.votes, lock.resources.length, releasedUnknown(lock.resources.length)));
      if (result.released) return { attempts };
    }
    throw new ExecutionError(QUORUM_MESSAGE, attempts);
  }

  /**
   * A Lock the application made itself (`new Lock(redlock, resources, value, …)` from a stored value, as node-redlock
   * advises for releasing a lock elsewhere): compare-and-delete of that value on every node, by the engine's release
   * script (so a waiter is still handed the lock). A vote for is a node where every resource held the value;
   * `deleted` has how many resources each node deleted (null for a node without an answer to count).
   */
  async #releaseValue(resources: unknown, value: unknown): Promise<{ votes: NodeVote[]; deleted: Array<number | null> }> {
    const engine = engineOf(this.#engine(this.settings));
    const names = check.resourceList("resources", resources);
    const token = check.nonEmptyString("value", value);
    const deletedAll = (reply: ReleaseReply) => reply.deleted === names.length;
    const sentAt = performance.now();
    const outcomes = await releaseOnNodes(engine, names, [token], this.servers.map((_, index) => index));
    // As the engine's own release: "nothing deleted" from a node whose connection dropped meanwhile may answer the
    // release sent again, which cannot see what the first did (AnswerLostError, never a vote that it was not held).
    doubtAcrossDrops(outcomes, engine.drops, sentAt, (reply) => !deletedAll(reply));
    return { votes: votesOf(outcomes, deletedAll), deleted: outcomes.map((outcome) => (outcome.state === "ok" ? outcome.value.deleted : null)) };
  }

  /** 5.x: a new Lock for `duration` ms more (the old one is spent); 4.x: extends the lock in place. */
  extend(existing: Lock, duration: number, settings?: Partial<Settings>): Promise<Lock>;
  extend(existing: LegacyLock, ttl: number, callback?: NodeCallback<LegacyLock>): Promise<LegacyLock>;
  extend(existing: Lock | LegacyLock, duration: number, third?: Partial<Settings> | NodeCallback<LegacyLock>): Promise<Lock | LegacyLock> {
    if (existing instanceof LegacyLock) return nodeify(this.#extendLegacy(existing, duration), typeof third === "function" ? third : undefined);
    return this.#extend(existing, duration, this.#merge(typeof third === "function" ? undefined : third));
  }

  /**
   * Extends the engine's lock, trying again after the retry delay while too few nodes answered in time, as
   * node-redlock's extension retries (its retryCount); a lock a quorum no longer holds, or whose validity ran
   * out, will not come back, so that is reported at once. `failed` is told each failed attempt's stats (the
   * votes of the nodes that had answered), as node-redlock's `ExecutionError.attempts` has them; `tried`
   * counts the attempts.
   */
  async #extendNative(native: RedlockLock, duration: number, settings: Settings, failed: Array<Promise<ExecutionStats>>, tried = { attempts: 0 }): Promise<void> {
    const maxAttempts = settings.retryCount === -1 ? Infinity : settings.retryCount + 1;
    for (let attempt = 1; ; attempt++) {
      tried.attempts = attempt;
      try {
        await native.extend(duration);
        return;
      } catch (error) {
        // (A lock whose validity ran out is refused before anything is sent: no votes.)
        if (error instanceof NodesFailedError || error instanceof LockLostError) failed.push(this.#stats(error.votes, native.resources.length));
        if (!(error instanceof NodesFailedError) || attempt >= maxAttempts) throw error;
      }
      await abortableSleep(Math.max(0, settings.retryDelay + Math.floor((Math.random() * 2 - 1) * settings.retryJitter)));
    }
  }

  /**
   * The engine's lock behind a Lock the application made from a stored value (see `#releaseValue`), made when it is
   * first extended: its value on its resources, valid until its `expiration`. None for an expired one.
   */
  #adopt(lock: Lock | LegacyLock, resources: unknown): { native: RedlockLock; released: boolean } | undefined {
    const validityMs = lock.expiration - Date.now();
    if (!(validityMs > 0)) return undefined;
    const engine = engineOf(this.#engine(this.settings));
    const names = check.resourceList("resources", resources);
    const value = check.nonEmptyString("value", lock.value);
    const now = performance.now();
    const state: HoldState = { value, previousValue: null, deadline: now + validityMs, acquiredAtMono: now, releasing: null, lostReported: false, owner: engine.owner };
    const held = { native: new RedlockLock(names, null, 0, state, validityMs, lock.expiration), released: false };
    natives.set(lock, held);
    return held;
  }

  async #extend(existing: Lock, duration: number, settings: Settings): Promise<Lock> {
    if (Math.floor(duration) !== duration) throw durationError();
    if (settings !== this.settings) checkSettings(settings);
    const held = natives.get(existing) ?? this.#adopt(existing, existing.resources);
    if (!held || held.released || existing.expiration < Date.now()) throw new ExecutionError("Cannot extend an already-expired lock.", []);
    const failed: Array<Promise<ExecutionStats>> = [];
    try {
      await this.#extendNative(held.native, duration, settings, failed);
    } catch (error) {
      // A bad duration is the caller's mistake, refused before anything was sent: a TypeError, as the README says.
      if (error instanceof TypeError) throw error;
      // The lock stays as it was, as node-redlock's does: an extension that failed for want of a quorum in
      // time may be tried again while the lock's validity lasts.
      throw new ExecutionError(`${QUORUM_MESSAGE} (${toError(error).message})`, failed);
    }
    existing.expiration = 0;
    natives.delete(existing);
    const replacement = new Lock(this, existing.resources, existing.value, [], held.native.expiresAt);
    natives.set(replacement, held);
    return replacement;
  }

  /**
   * 5.x: runs `routine` under the lock, extending it while `automaticExtensionThreshold` of validity is
   * left; `signal.aborted` (with `signal.error`) tells the routine the lock could not be extended.
   */
  using<T>(resources: string[], duration: number, settings: Partial<Settings>, routine: (signal: RedlockAbortSignal) => Promise<T>): Promise<T>;
  using<T>(resources: string[], duration: number, routine: (signal: RedlockAbortSignal) => Promise<T>): Promise<T>;
  async using<T>(
    resources: string[],
    duration: number,
    settingsOrRoutine: Partial<Settings> | ((signal: RedlockAbortSignal) => Promise<T>),
    maybeRoutine?: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T> {
    if (Math.floor(duration) !== duration) throw durationError();
    const settings = this.#merge(typeof settingsOrRoutine === "function" ? undefined : settingsOrRoutine);
    const routine = maybeRoutine ?? settingsOrRoutine;
    if (typeof routine !== "function") throw new Error("INVARIANT: routine is not a function.");
    if (settings.automaticExtensionThreshold > duration - 100) {
      throw new Error("A lock `duration` must be at least 100ms greater than the `automaticExtensionThreshold` setting.");
    }
    const engine = engineOf(this.#engine(settings));
    let routineStarted = false;
    const withSignal = (signal: AbortSignal) => {
      routineStarted = true;
      const compat = signal as RedlockAbortSignal;
      // node-redlock's signal.error is the ExecutionError of the extension that failed: code switching over tests
      // `signal.error instanceof ExecutionError`. The engine's own error stays its cause (and the signal's reason).
      signal.addEventListener(
        "abort",
        () => {
          const reason = toError(signal.reason);
          const votes = reason instanceof LockLostError ? reason.votes : [];
          compat.error = new ExecutionError(QUORUM_MESSAGE, votes.length > 0 ? [this.#stats(votes, resources.length)] : [], { cause: reason });
        },
        { once: true },
      );
      return routine(compat);
    };
    let released: ReleaseResult | undefined;
    let value: T;
    try {
      ({ value } = await this.#attempted(
        resources,
        (onAttempt) => usingLock<T>(engine, resources, duration, {}, withSignal, onAttempt, (result) => (released = result)),
        () => !routineStarted,
      ));
    } catch (error) {
      if (released === undefined || released.released) throw error;
    }
    // node-redlock releases in a `finally` that throws when a quorum no longer held the lock: its
    // ExecutionError replaces the routine's outcome, so a caller never takes work done under a lost lock for
    // done under the lock.
    if (released !== undefined && !released.released) throw new ExecutionError(QUORUM_MESSAGE, [this.#stats(released.votes, resources.length, releasedUnknown(resources.length))]);
    return value!;
  }

  // ---- 4.x ----

  /** 4.x: locks `resource` (a name or an array) for `ttl` ms; rejects (or calls back) with `LockError`. */
  lock(resource: string | string[], ttl: number, callback?: NodeCallback<LegacyLock>): Promise<LegacyLock> {
    return nodeify(this.#lockLegacy(resource, ttl, this.settings), callback);
  }

  /** 4.x: `lock()` with per-call settings. */
  lockWithOptions(resource: string | string[], ttl: number, options: Partial<Settings>, callback?: NodeCallback<LegacyLock>): Promise<LegacyLock> {
    return nodeify(this.#lockLegacy(resource, ttl, this.#merge(options)), callback);
  }

  async #lockLegacy(resource: string | string[], ttl: number, settings: Settings): Promise<LegacyLock> {
    const resources = Array.isArray(resource) ? resource : [resource];
    try {
      const { value: native, attempts } = await this.#take(resources, ttl, settings);
      const lock = new LegacyLock(this, resource, native.value, native.expiresAt, attempts.length, settings.retryCount - attempts.length);
      natives.set(lock, { native, released: false });
      return lock;
    } catch (error) {
      if (error instanceof ExecutionError) {
        throw new LockError(`Exceeded ${settings.retryCount} attempts to lock the resource "${String(resource)}".`, error.attempts.length);
      }
      throw error;
    }
  }

  /** 4.x: releases the lock; rejects (or calls back) with `LockError` when a quorum did not hold it. */
  unlock(lock: LegacyLock, callback?: NodeCallback<void>): Promise<void> {
    const run = async () => {
      lock.expiration = 0;
      const held = natives.get(lock);
      if (!held) {
        // Made by the application from a stored value (4.x: `new Redlock.Lock(redlock, resource, value, …)`).
        const { votes } = await this.#releaseValue(Array.isArray(lock.resource) ? lock.resource : [lock.resource], lock.value);
        for (const vote of votes) if (vote.vote === "error" && vote.error) this.#tell("clientError", vote.error);
        if (votes.filter((v) => v.vote === "for").length >= quorumOf(this.servers.length)) return;
      } else if (!held.released) {
        held.released = true;
        const result = await held.native.release();
        for (const vote of result.votes) if (vote.vote === "error" && vote.error) this.#tell("clientError", vote.error);
        if (result.released) return;
      }
      throw new LockError(`Unable to fully release the lock on resource "${String(lock.resource)}".`);
    };
    return nodeify(run(), callback);
  }

  async #extendLegacy(lock: LegacyLock, ttl: number): Promise<LegacyLock> {
    const held = natives.get(lock) ?? this.#adopt(lock, Array.isArray(lock.resource) ? lock.resource : [lock.resource]);
    if (!held || held.released || lock.expiration < Date.now()) {
      throw new LockError(`Cannot extend lock on resource "${String(lock.resource)}" because the lock has already expired.`, 0);
    }
    const tried = { attempts: 0 };
    try {
      await this.#extendNative(held.native, ttl, this.settings, [], tried);
    } catch (error) {
      // A bad TTL is refused before anything is sent (see #extend).
      if (error instanceof TypeError) throw error;
      // 4.x extended through its lock routine, and failed with its message (the retry count, as 4.x words it).
      throw new LockError(`Exceeded ${this.settings.retryCount} attempts to lock the resource "${String(lock.resource)}".`, tried.attempts);
    }
    // (4.x updates the expiration only: `attempts` stays the acquisition's.)
    lock.expiration = held.native.expiresAt;
    return lock;
  }

  /**
   * 4.x: a bluebird disposer for `Promise.using()` that unlocks when the block ends (errors of the unlock
   * go to `unlockErrorHandler`). bluebird is the application's, as with 4.x: it is loaded when this is called.
   */
  disposer(resource: string | string[], ttl: number, unlockErrorHandler?: (error: Error) => void): unknown {
    const require = createRequire(import.meta.url);
    const Bluebird = require("bluebird") as { resolve<T>(value: Promise<T>): { disposer(dispose: (value: T) => unknown): unknown } };
    return Bluebird.resolve(this.#lockLegacy(resource, ttl, this.settings)).disposer((lock) =>
      lock.unlock().catch((error: unknown) => unlockErrorHandler?.(toError(error))),
    );
  }
}

// The 4.x names as types, as node-redlock 4.x's type declarations (@types/redlock) had them on the class's own
// namespace: `let lock: Redlock.Lock`, `const options: Redlock.Options`. Types only: the values are the class's
// static members.
type LegacyLockError = LockError;
type LegacyOptions = Partial<Settings>;
// eslint-disable-next-line @typescript-eslint/no-namespace -- merges with the class, as 4.x's declarations did
declare namespace Redlock {
  /** 4.x: what `lock()` resolves. */
  type Lock = LegacyLock;
  /** 4.x: what `lock()`, `unlock()` and `extend()` reject with. */
  type LockError = LegacyLockError;
  /** 4.x: the settings `new Redlock(clients, options)` and `lockWithOptions` take. */
  type Options = LegacyOptions;
  /** 4.x: a node-style callback. */
  type Callback<T> = NodeCallback<T>;
}

export default Redlock;
export { Redlock };
