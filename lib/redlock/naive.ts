import { hostname } from "node:os";
import { NaiveLockLostError, NaiveLockTimeoutError } from "./errors.ts";
import { encodeLockValue } from "./identity.ts";
import { abortableSleep } from "./sleep.ts";
import * as check from "./validate.ts";

/**
 * The classic single-node SETNX lock, kept as it is on purpose so the lab can compare it with Redlock:
 * SETNX then PEXPIRE as two commands (a crash between them leaves a key without TTL, which waiters
 * repair), and release by WATCH / GET / MULTI / DEL / EXEC. It has no fencing and one node only.
 *
 * WATCH belongs to a connection: give each concurrent releaser its own connection (as redis-py's
 * pipeline checks one out of a pool); on a shared, auto-pipelined connection another caller's EXEC would
 * clear the watch.
 */
export interface NaiveLockClient {
  setnx(key: string, value: string): Promise<number>;
  pexpire(key: string, milliseconds: number): Promise<number>;
  pttl(key: string): Promise<number>;
  get(key: string): Promise<string | null>;
  watch(key: string): Promise<unknown>;
  unwatch(): Promise<unknown>;
  multi(): NaiveTransaction;
}

export interface NaiveTransaction {
  del(key: string): unknown;
  exec(): Promise<unknown>;
}

export interface NaiveAcquireOptions {
  /** Pause between SETNX attempts. @default 10 */
  retryDelayMs?: number;
  /** Give up after this long. @default 10_000 */
  timeoutMs?: number;
  /** Stops waiting when aborted. */
  signal?: AbortSignal;
  /** Written into the value so the console shows who holds it. @default null */
  label?: string | null;
  /** @default os.hostname() */
  host?: string | null;
  /** @default process.pid */
  pid?: number | null;
}

const DEFAULTS = Object.freeze({ retryDelayMs: 10, timeoutMs: 10_000, label: null });

/** Takes the lock and returns its token (the value written), or throws NaiveLockTimeoutError / the signal's reason. */
export async function acquireNaive(client: NaiveLockClient, resource: string, ttlMs: number, options: NaiveAcquireOptions = {}): Promise<string> {
  check.nonEmptyString("resource", resource);
  check.positiveInteger("ttlMs", ttlMs);
  check.optionsObject<NaiveAcquireOptions>("acquireNaive", options, ["retryDelayMs", "timeoutMs", "signal", "label", "host", "pid"]);
  const retryDelayMs = check.timerMs("retryDelayMs", options.retryDelayMs ?? DEFAULTS.retryDelayMs, 0);
  const timeoutMs = check.nonNegativeInteger("timeoutMs", options.timeoutMs ?? DEFAULTS.timeoutMs);
  const signal = check.abortSignal("signal", options.signal);
  const token = encodeLockValue({
    label: check.holderField("label", options.label ?? DEFAULTS.label),
    host: options.host === undefined ? hostname() : check.holderField("host", options.host),
    pid: check.holderPid("pid", options.pid === undefined ? process.pid : options.pid),
    fence: null,
    acquiredAt: Date.now(),
  });
  const deadline = performance.now() + timeoutMs;
  let attempts = 0;
  for (;;) {
    if (signal?.aborted) throw signal.reason;
    attempts += 1;
    if ((await client.setnx(resource, token)) === 1) {
      await client.pexpire(resource, ttlMs);
      return token;
    }
    // A holder that crashed between SETNX and EXPIRE left a key that would never expire: give it our TTL
    // so it eventually frees (the classic repair; it can also shorten a live holder that is about to set it).
    if ((await client.pttl(resource)) === -1) await client.pexpire(resource, ttlMs);
    if (performance.now() + retryDelayMs > deadline) {
      throw new NaiveLockTimeoutError(resource, attempts, await client.get(resource));
    }
    await abortableSleep(retryDelayMs, signal);
  }
}

/**
 * Deletes the lock only if it still holds `token` (WATCH makes the DEL fail if the key changes between
 * GET and EXEC). Throws NaiveLockLostError when the value is no longer ours: the lock expired while held.
 */
export async function releaseNaive(client: NaiveLockClient, resource: string, token: string): Promise<void> {
  check.nonEmptyString("resource", resource);
  check.nonEmptyString("token", token);
  for (let tries = 0; ; tries++) {
    await client.watch(resource);
    const found = await client.get(resource);
    if (found !== token) {
      await client.unwatch();
      throw new NaiveLockLostError(resource, token, found);
    }
    const transaction = client.multi();
    transaction.del(resource);
    // null: the watched key changed after our GET; read it again to see whether it is still ours.
    if ((await transaction.exec()) !== null) return;
    if (tries >= 10) throw new NaiveLockLostError(resource, token, await client.get(resource));
  }
}
