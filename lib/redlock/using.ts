import { acquireChecked, checkAcquire, type AcquireOptions, type AttemptObserver } from "./acquire.ts";
import { driftMs, type Engine } from "./engine.ts";
import { AcquireAbortedError, LockExpiredError, LockLostError, LockRevokedError, NodesFailedError, toError } from "./errors.ts";
import { extendLock } from "./extend.ts";
import { lockState, type RedlockLock, type ReleaseResult } from "./lock.ts";
import { releaseLock } from "./release.ts";
import { MAX_TIMER_MS } from "./sleep.ts";
import * as check from "./validate.ts";

export type UsingRoutine<T> = (signal: AbortSignal, lock: RedlockLock) => Promise<T> | T;

// Timers are capped at MAX_TIMER_MS (a longer one fires at once): one due later is set for that long and
// set again when it fires.

/**
 * Holds the lock while `routine` runs: extends it when `automaticExtensionThresholdMs` of validity is
 * left, and aborts `signal` (with the error as its reason) as soon as the lock is known to be gone: a
 * quorum says it is not ours any more, an operator force-released it, or the extensions kept failing
 * until the validity ran out. Releases it afterwards. Resolves or rejects with the routine's outcome;
 * nothing the engine does in the background can reject.
 */
export async function usingLock<T>(
  engine: Engine,
  resources: unknown,
  ttlArg: unknown,
  options: AcquireOptions,
  routine: unknown,
  onAttempt?: AttemptObserver,
  /** @internal Told how the release after the routine went (the node-redlock-compatible entry reports a failed one). */
  onReleased?: (result: ReleaseResult) => void,
): Promise<T> {
  const ttlMs = check.positiveInteger("ttlMs", ttlArg);
  if (typeof routine !== "function") check.fail("routine", "a function", routine);
  const threshold = engine.settings.automaticExtensionThresholdMs;
  // The validity a lock starts with is at most its TTL less the drift allowance: at or below the threshold, every
  // extension would be due the moment the last one landed.
  const drift = driftMs(engine.settings, ttlMs);
  if (ttlMs - drift <= threshold) {
    check.fail(
      "ttlMs",
      `greater than \`automaticExtensionThresholdMs\` (${threshold}) plus its clock drift allowance (round(driftFactor × ttlMs) + 2 = ${drift} ms), or the lock would be extended back-to-back`,
      ttlMs,
    );
  }
  // Checked before any connection is opened below: a bad argument fails at once and opens none.
  const request = checkAcquire(engine, resources, ttlMs, options);
  if (request.signal?.aborted) throw new AcquireAbortedError(request.resources, 0, request.signal.reason);
  // Listen for revocations before the lock exists: a force release that lands right after the acquisition
  // must abort the signal, not go unheard because the subscriber connections were still being made.
  engine.notifications.retain();
  let lock: RedlockLock;
  try {
    // (An abort meanwhile stops the wait; the acquisition then rejects before it sends anything.)
    await engine.notifications.whenListening(5 * engine.settings.nodeTimeoutMs, request.signal);
    lock = await acquireChecked(engine, request, onAttempt);
  } catch (error) {
    engine.notifications.unretain();
    throw error;
  }
  const state = lockState(lock);
  const controller = new AbortController();
  let stopped = false;
  let extendTimer: ReturnType<typeof setTimeout> | undefined;
  let expiryTimer: ReturnType<typeof setTimeout> | undefined;
  // An object, not a `let`: the extension is started from a timer callback.
  const pending: { extension: Promise<void> | null } = { extension: null };
  // Why the extensions since the last one that landed failed (too few nodes agreed): when the validity runs
  // out meanwhile, the routine is told which nodes kept the lock from being extended, and why.
  let lastFailure: NodesFailedError | null = null;
  const expiredBeforeExtended = () =>
    new LockLostError(
      lock.resources,
      state.value,
      lastFailure?.votes ?? [],
      `Lock on ${JSON.stringify(lock.resources)} expired before it could be extended${lastFailure ? `: ${lastFailure.message}` : ""}`,
    );

  const lose = (reason: Error) => {
    // Released by its holder (the routine, or whoever has the lock object) while the routine runs: not lost.
    if (stopped || controller.signal.aborted || state.releasing) return;
    controller.abort(reason);
    state.lostReported = true;
    // Told the routine the lock is gone: no more extensions (one would keep a force-released lock alive on
    // the nodes the operator did not reach, and write it back on those it did).
    clearTimeout(extendTimer);
    extendTimer = undefined;
    clearTimeout(expiryTimer);
    if (engine.listening("lost")) engine.emit("lost", { resources: lock.resources, reason });
  };
  // Whatever happens to the extensions, the routine must hear about it when the validity runs out.
  const armExpiry = () => {
    clearTimeout(expiryTimer);
    expiryTimer = setTimeout(() => {
      if (performance.now() >= state.deadline) {
        lose(expiredBeforeExtended());
      } else if (!stopped) armExpiry(); // a long TTL: the timer was capped, or it fired a little early
    }, Math.min(MAX_TIMER_MS, Math.max(0, state.deadline - performance.now()) + 1));
  };
  const schedule = (delayMs: number) => {
    if (stopped || controller.signal.aborted) return;
    const due = performance.now() + Math.max(0, delayMs);
    const arm = () => {
      extendTimer = setTimeout(() => {
        extendTimer = undefined;
        if (stopped || controller.signal.aborted) return;
        // Capped (a TTL of weeks): not due yet, wait on.
        if (performance.now() < due) return arm();
        pending.extension = extendOnce()
          .catch((error: unknown) => lose(toError(error)))
          .finally(() => (pending.extension = null));
      }, Math.min(MAX_TIMER_MS, Math.max(0, due - performance.now())));
    };
    arm();
  };
  const extendOnce = async () => {
    if (stopped || controller.signal.aborted) return;
    try {
      await extendLock(engine, lock, ttlMs);
      lastFailure = null;
      // The routine may have ended while the extension was out: no timer may be set again for a lock being
      // released (a timer left set would keep the process alive for the lock's whole validity).
      if (stopped || controller.signal.aborted) return;
      armExpiry();
      schedule(state.deadline - performance.now() - threshold);
    } catch (error) {
      if (stopped) return;
      const remaining = state.deadline - performance.now();
      if (error instanceof NodesFailedError) lastFailure = error;
      if (error instanceof LockLostError || error instanceof LockExpiredError || remaining <= 0) {
        lose(error instanceof LockLostError ? error : lastFailure ? expiredBeforeExtended() : new LockLostError(lock.resources, state.value, [], toError(error).message));
        return;
      }
      // Too few nodes answered: the lock may well still be ours; try again while validity is left.
      schedule(Math.min(engine.settings.retryDelayMs, remaining / 2));
    }
  };

  const stopWatching = engine.notifications.watchRevocation(state.value, (resource) =>
    lose(new LockRevokedError(lock.resources, state.value, resource)),
  );
  engine.notifications.unretain(); // watchRevocation keeps the subscription now
  armExpiry();
  schedule(state.deadline - performance.now() - threshold);
  try {
    return await (routine as UsingRoutine<T>)(controller.signal, lock);
  } finally {
    stopped = true;
    clearTimeout(extendTimer);
    clearTimeout(expiryTimer);
    stopWatching();
    if (pending.extension) await pending.extension;
    const released = await releaseLock(engine, lock);
    onReleased?.(released);
  }
}
