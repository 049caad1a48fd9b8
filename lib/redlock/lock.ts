import type { NodeVote } from "./errors.ts";

/** What `release()` found: `released` when a quorum of nodes still held the lock and deleted it. */
export interface ReleaseResult {
  released: boolean;
  votes: NodeVote[];
}

/** @internal The engine's side of a lock: what it needs to release or extend it. */
export interface HoldState {
  value: string;
  /** Fenced locks: the first-round value, still on nodes where the rewrite with the fence did not land. */
  previousValue: string | null;
  /** performance.now() time at which validity runs out. */
  deadline: number;
  acquiredAtMono: number;
  releasing: Promise<ReleaseResult> | null;
  /** A `lost` event was already emitted for this lock (by using()); release must not report it twice. */
  lostReported: boolean;
  owner: LockOwner;
}

/** @internal */
export interface LockOwner {
  release(lock: RedlockLock): Promise<ReleaseResult>;
  extend(lock: RedlockLock, ttlMs: number): Promise<RedlockLock>;
}

let readState: (lock: RedlockLock) => HoldState;
let renew: (lock: RedlockLock, validityMs: number) => void;

/** @internal */
export function lockState(lock: unknown): HoldState {
  if (!(lock instanceof RedlockLock)) {
    throw new TypeError(`Expected \`lock\` to be a Lock returned by acquire(), got ${Object.prototype.toString.call(lock)}`);
  }
  return readState(lock);
}

/** @internal An extension landed: the lock's validity starts again from now. */
export function renewLock(lock: RedlockLock, validityMs: number): void {
  renew(lock, validityMs);
}

/** A held lock. `extend()` updates this same object. */
export class RedlockLock {
  // A private field rather than a WeakMap: locks are made at the engine's full rate.
  readonly #state: HoldState;
  #validityMs: number;

  static {
    readState = (lock) => lock.#state;
    renew = (lock, validityMs) => {
      lock.#validityMs = validityMs;
      lock.#expiresAt = Date.now() + validityMs;
    };
  }

  #expiresAt: number;

  /** @internal Made by the engine only (the public entry exports the type, not the constructor). */
  constructor(
    /** The locked resources (each is its own lock key). */
    readonly resources: readonly string[],
    /** The fencing token (a decimal string) when taken fenced; null otherwise. */
    readonly fence: string | null,
    /** How many attempts the acquisition took. */
    readonly attempts: number,
    state: HoldState,
    validityMs: number,
    expiresAt: number,
  ) {
    this.#state = state;
    this.#validityMs = validityMs;
    this.#expiresAt = expiresAt;
  }

  /** The value held in each lock key: a unique token carrying the holder's identity. */
  get value(): string {
    return this.#state.value;
  }

  /** Validity at acquisition (or the last extension), ms. */
  get validityMs(): number {
    return this.#validityMs;
  }

  /** When the validity runs out, epoch ms (client clock). */
  get expiresAt(): number {
    return this.#expiresAt;
  }

  release(): Promise<ReleaseResult> {
    return this.#state.owner.release(this);
  }

  extend(ttlMs: number): Promise<RedlockLock> {
    return this.#state.owner.extend(this, ttlMs);
  }

  /**
   * `await using lock = await redlock.acquire(…)`: releases the lock when the block ends, as `release()` does
   * (once: after an explicit release it sends nothing more). Never rejects for node failures, so it cannot
   * replace the block's own error; a lock no quorum still held is reported as `release()` reports it
   * (the `lost` event).
   */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}
