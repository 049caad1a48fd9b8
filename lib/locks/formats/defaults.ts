import { globMatcher, globPinsPrefix, globSamples, lockKeyMatcher } from "../glob";

/**
 * The default `LOCK_PATTERNS`: the key names the common lock libraries use out of the box, so a console
 * started with no configuration shows their locks. Each entry says whose convention it is. Patterns are
 * Redis globs; a bare name matches that one key.
 *
 * Not here, on purpose: Redisson (RLock, fair lock, read-write lock) and node-redlock/redsync/redis-py take
 * the key name the application gives them, so they have no convention to list; the discovery scan finds
 * their keys wherever they are (by layout: a Redisson lock is a hash of `<uuid>:<thread id>` fields) and
 * suggests a pattern. Keys the console and the libraries keep beside their locks (the engine's `fence:*`,
 * `fence-seen:*`, `waitq*:*`, Redisson's `redisson_lock_queue:{…}`, `redisson_lock_timeout:{…}`, `redisson_unlock_latch:…`, the
 * fenced lock's counter `redisson_lock_token:{…}`, `{…}:…:rwlock_timeout:…`) are not locks and must never match.
 */
export const DEFAULT_LOCK_PATTERN_LIST = Object.freeze([
  // Lockscope's engine and most hand-written SET NX locks: `lock:<resource>`, and the plural some teams use.
  { glob: "lock:*", why: "Lockscope's engine, SET NX scripts, redis-py and redlock-py as usually named" },
  { glob: "locks:*", why: "the plural form, as in node-redlock's examples (`locks:account:322456`)" },
  // redis-lock (npm) prefixes every name with `lock.`; so does the SETNX pattern of the Redis docs (`lock.foo`).
  { glob: "lock.*", why: "redis-lock (npm) and the SETNX pattern of the Redis documentation" },
  // redis-semaphore (npm): `mutex:<key>` strings and `semaphore:<key>` sorted sets.
  { glob: "mutex:*", why: "redis-semaphore's Mutex and RedlockMutex" },
  { glob: "semaphore:*", why: "redis-semaphore's Semaphore, MultiSemaphore and RedlockSemaphore" },
  // ShedLock's Redis providers: `<keyPrefix>:<environment>:<task>`, keyPrefix `job-lock` by default.
  { glob: "job-lock:*", why: "ShedLock's Redis providers (default key prefix `job-lock`)" },
  // The bare keys of the best-known tutorials: `SETNX lock ...` and redlock-py's README (`my_resource_name`).
  { glob: "lock", why: "the single `lock` key of SETNX tutorials" },
  { glob: "my_resource_name", why: "redlock-py's README example, copied into many services" },
] as const);

export const DEFAULT_LOCK_PATTERNS: readonly string[] = Object.freeze(DEFAULT_LOCK_PATTERN_LIST.map((p) => p.glob));

/** The same list in `LOCK_PATTERNS` syntax, for the configuration's default. */
export const DEFAULT_LOCK_PATTERNS_ENV = DEFAULT_LOCK_PATTERNS.join(",");

/**
 * Keys that are never locks whatever the patterns say: this console's own (the audit stream) and the
 * companions the engine and the libraries keep next to a lock. Discovery skips them, and a pattern set that
 * would match the console's own keys is refused.
 */
export const NEVER_LOCKS = Object.freeze([
  "lockscope:*",
  "fence:*",
  // The engine's fenced writes: the highest fence that wrote to a data key. Deleted, an evicted holder's late
  // write would land (a broad pattern such as `*orders*` matches `fence-seen:orders:42`).
  "fence-seen:*",
  "waitq:*",
  "waitqd:*",
  "waitqg:*",
  "redisson_lock_queue:*",
  "redisson_lock_timeout:*",
  "redisson_unlock_latch:*",
  // RFencedLock's fencing counter (a string without TTL, INCRed on every acquisition): deleted, the tokens would
  // start again below those already handed out.
  "redisson_lock_token:*",
  "*:rwlock_timeout:*",
]);

/** Whether a key is one of `NEVER_LOCKS`. */
export const isNeverLock = lockKeyMatcher(NEVER_LOCKS);

/**
 * Which keys are locks under `patterns`: those they match, less `NEVER_LOCKS` (a broad pattern such as `lock:*`
 * also matches a Redisson read-write lock's lease keys, `lock:{orders}:<id>:57:rwlock_timeout:1`, and one such
 * as `*orders*` the engine's `waitq:lock:orders`). The live view watches these, and only these can be released.
 */
export function lockKeyFilter(patterns: readonly string[]): (key: string) => boolean {
  const matches = lockKeyMatcher(patterns);
  return (key) => matches(key) && !isNeverLock(key);
}

/**
 * Keys of this console that a pattern must never match (written on the lock nodes: the audit stream, the lab's
 * runs, and one of each kind of its shared state).
 */
export const CONSOLE_KEYS = Object.freeze([
  "lockscope:audit",
  "lockscope:lab:runs",
  "lockscope:lab:run:0",
  "lockscope:patterns",
  "lockscope:consoles",
  "lockscope:first-seen:0",
  "lockscope:revoked-session:0",
  "lockscope:wrong-token:seen:0",
  "lockscope:lease:lab-run",
  "lockscope:probe:0",
]);

/**
 * Why `glob` cannot be a lock pattern though it is a well-formed glob, for the operator; null when it can. It
 * must not match any of the console's own keys, and must not match only keys kept beside locks (it would show
 * nothing). Checked for `LOCK_PATTERNS` at start and for every change made in a console.
 */
export function patternKeysProblem(glob: string): string | null {
  // One of the keys it writes, or (however the glob is spelt: `[l]ockscope:*`, `?ockscope:lease:*`) a glob whose
  // every key starts where theirs do.
  const own = CONSOLE_KEYS.find(globMatcher(glob)) ?? (globPinsPrefix(glob, "lockscope:") ? "lockscope:*" : undefined);
  if (own) {
    const what = own.endsWith("*") ? `keys under \`${own}\`, the console's own keys` : `\`${own}\`, one of the console's own keys`;
    return `\`${glob}\` matches ${what} (its audit log, its lab runs, its shared state), which must never be shown or released as a lock.`;
  }
  // Every key it matches in practice (its wildcards filled several ways) is one kept beside locks.
  const samples = globSamples(glob);
  const beside = samples.length > 0 && samples.every(isNeverLock) ? NEVER_LOCKS.find((never) => globMatcher(never)(samples[0]!)) : undefined;
  if (beside) return `\`${glob}\` matches only keys under \`${beside}\`, which the console or a lock library keeps beside its locks and which are never locks: it would show nothing.`;
  return null;
}
