import { hostname } from "node:os";
import { MAX_TIMER_MS } from "./sleep.ts";
import * as check from "./validate.ts";

/** Settings for a `Redlock` instance; each can also be given per call where noted. */
export interface RedlockSettings {
  /**
   * Fraction of the TTL assumed lost to clock drift between client and nodes; validity is
   * `ttl - elapsed - round(driftFactor * ttl) - 2` (2 ms: Redis expires with 1 ms precision).
   * @default 0.01
   */
  driftFactor?: number;
  /** Retries after the first attempt; -1 retries until the call's `signal` aborts. @default 10 */
  retryCount?: number;
  /** Base pause between attempts; waiters are also woken earlier by a release. @default 200 */
  retryDelayMs?: number;
  /** Random +- spread added to each pause, so waiters do not retry in lockstep. @default 100 */
  retryJitterMs?: number;
  /** `using()` extends the lock when this little validity is left. @default 500 */
  automaticExtensionThresholdMs?: number;
  /**
   * How long one node may take to answer one command before it counts as a failed vote, so a stopped or
   * unreachable node cannot stall an acquisition. Local and same-region nodes answer in well under a
   * millisecond; 200 ms leaves room for a GC pause on either side while staying a small part of typical
   * TTLs (seconds). A lock whose nodes answer after its TTL is refused anyway (no validity left).
   * @default 200
   */
  nodeTimeoutMs?: number;
  /** Holder label written into each lock value (the console shows it). @default null */
  label?: string | null;
  /** Host written into each lock value. @default os.hostname() */
  host?: string | null;
  /** Process id written into each lock value. @default process.pid */
  pid?: number | null;
  /** Issue a fencing token with every lock (one more round trip per acquisition). @default false */
  fenced?: boolean;
  /** Serve waiters in arrival order (a FIFO queue per resource on each node). @default false */
  fair?: boolean;
  /** Publish each failed attempt on the contention channel, from inside the acquire script. @default true */
  telemetry?: boolean;
  /**
   * Hand the lock over to waiters when the holder releases: a refused waiter joins the resource's queue on
   * each node, and the release script writes the lock in the head waiter's value (one resource) or wakes
   * it (several), then tells it on its engine's own channel (the engine subscribes with a connection of
   * its own per node, made by `duplicate()` on first wait). Off: waiters only poll.
   * @default true
   */
  wakeOnRelease?: boolean;
  /** Close the engine's subscriber connections after this long with no waiter and no `using()` lock. @default 2000 */
  subscriberIdleMs?: number;
}

export type ResolvedSettings = Readonly<Required<RedlockSettings>>;

export const DEFAULT_SETTINGS = Object.freeze({
  driftFactor: 0.01,
  retryCount: 10,
  retryDelayMs: 200,
  retryJitterMs: 100,
  automaticExtensionThresholdMs: 500,
  nodeTimeoutMs: 200,
  label: null,
  fenced: false,
  fair: false,
  telemetry: true,
  wakeOnRelease: true,
  subscriberIdleMs: 2000,
} as const);

/** Every name `RedlockSettings` takes; any other is refused (see `resolveSettings`). */
export const SETTING_NAMES: readonly (keyof RedlockSettings)[] = Object.freeze([
  "driftFactor",
  "retryCount",
  "retryDelayMs",
  "retryJitterMs",
  "automaticExtensionThresholdMs",
  "nodeTimeoutMs",
  "label",
  "host",
  "pid",
  "fenced",
  "fair",
  "telemetry",
  "wakeOnRelease",
  "subscriberIdleMs",
]);

export function retryCount(name: string, value: unknown): number {
  if (value !== -1) check.nonNegativeInteger(name, value);
  return value as number;
}

export function resolveSettings(settings: unknown): ResolvedSettings {
  if (settings === undefined) settings = {};
  if (typeof settings !== "object" || settings === null) check.fail("settings", "an object", settings);
  check.knownKeys("setting", settings, SETTING_NAMES);
  const s = settings as RedlockSettings;
  const pid = check.holderPid("pid", s.pid === undefined ? process.pid : s.pid);
  const retryDelayMs = check.timerMs("retryDelayMs", s.retryDelayMs ?? DEFAULT_SETTINGS.retryDelayMs, 0);
  const retryJitterMs = check.timerMs("retryJitterMs", s.retryJitterMs ?? DEFAULT_SETTINGS.retryJitterMs, 0);
  // A pause is at most their sum: one timer.
  if (retryDelayMs + retryJitterMs > MAX_TIMER_MS) check.timerMs("retryDelayMs + retryJitterMs", retryDelayMs + retryJitterMs, 0);
  return Object.freeze({
    driftFactor: check.numberInRange("driftFactor", s.driftFactor ?? DEFAULT_SETTINGS.driftFactor, 0, 0.5),
    retryCount: retryCount("retryCount", s.retryCount ?? DEFAULT_SETTINGS.retryCount),
    retryDelayMs,
    retryJitterMs,
    automaticExtensionThresholdMs: check.positiveInteger(
      "automaticExtensionThresholdMs",
      s.automaticExtensionThresholdMs ?? DEFAULT_SETTINGS.automaticExtensionThresholdMs,
    ),
    nodeTimeoutMs: check.timerMs("nodeTimeoutMs", s.nodeTimeoutMs ?? DEFAULT_SETTINGS.nodeTimeoutMs, 1),
    label: check.holderField("label", s.label === undefined ? DEFAULT_SETTINGS.label : s.label),
    host: check.holderField("host", s.host === undefined ? hostname() : s.host),
    pid,
    fenced: check.boolean("fenced", s.fenced ?? DEFAULT_SETTINGS.fenced),
    fair: check.boolean("fair", s.fair ?? DEFAULT_SETTINGS.fair),
    telemetry: check.boolean("telemetry", s.telemetry ?? DEFAULT_SETTINGS.telemetry),
    wakeOnRelease: check.boolean("wakeOnRelease", s.wakeOnRelease ?? DEFAULT_SETTINGS.wakeOnRelease),
    subscriberIdleMs: check.timerMs("subscriberIdleMs", s.subscriberIdleMs ?? DEFAULT_SETTINGS.subscriberIdleMs, 0),
  });
}
