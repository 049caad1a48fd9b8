import type { ScriptClient } from "@lockscope/redlock";

/**
 * The lock-format seam. Each lock library lays its locks out in Redis its own way (a string token, a hash of
 * holder fields, a sorted set of permits); a format is one file that knows one layout end to end: how its
 * keys are recognised, what the watcher's batched read script reads for it, how a node's reading decodes
 * into holders, its scope, its contention signal, its warnings, the keyspace-notification flags its
 * commands need, and how to force-release one holder safely. The rest of the console speaks only to
 * `LockFormat` (house style: unjs/unstorage `defineDriver`); adding a layout is adding a file.
 */

export const FORMAT_NAMES = ["lockscope", "token", "redisson", "redisson-rw", "redis-semaphore", "shedlock", "unknown"] as const;
export type FormatName = (typeof FORMAT_NAMES)[number];

/** `quorum`: a Redlock over the node set; `single`: a lock on one instance by design; `inferred`: decided from where the value is. */
export type FormatScope = "quorum" | "single" | "inferred";
export type LockScope = "quorum" | "single";

/**
 * `no-ttl`: the key never expires by itself (a crash between SETNX and EXPIRE leaves a lock nobody frees).
 * `stale-entries`: entries the library itself already counts as gone (redis-semaphore permits older than its
 * lock timeout) are still in the key. `truncated`: the key is larger than the read bound; only part was read.
 */
export type LockWarning = "no-ttl" | "stale-entries" | "truncated";

/** `$` strings, `h` hashes, `z` sorted sets: the per-type keyspace-notification classes a format's writes fall in. */
export type NotifyClass = "$" | "h" | "z";

/** Where a contention figure comes from: this engine's telemetry, or a queue the library keeps in Redis. */
export type ContentionSource = "engine" | "queue";

/** One holder of a lock as the format decodes it. `id` is what force release compares. */
export interface FormatHolder {
  id: string;
  label?: string;
  host?: string;
  pid?: number;
  /** Redisson: the JVM thread id in the holder field. */
  thread?: number;
  /** A reentrant lock's hold count. */
  count?: number;
  /** Read-write locks: which side this holder is on. */
  mode?: "read" | "write";
  /** Epoch ms when this holder took the lock, where the layout records it. */
  since?: number;
  /** Epoch ms when this holder's claim ends, where it differs from the key's TTL (per-permit or in-value expiry). */
  expiresAt?: number;
}

/** Key types the batched read script reads in full (bounded); any other type is reported with its type only. */
export type ReadType = "string" | "hash" | "zset";

/** What the read script saw for one key on one node, before any format looked at it. */
export type RawReading =
  | { type: "none" }
  /** `digest`: the whole value's SHA-1 (hex) when it is longer than the read bound or not all ASCII (see `buildReadPlan`). */
  | { type: "string"; pttlMs: number; size: number; value: string; digest?: string; extras: Extras }
  | { type: "hash"; pttlMs: number; size: number; fields: Array<[string, string]>; extras: Extras }
  | { type: "zset"; pttlMs: number; size: number; members: Array<[string, number]>; extras: Extras }
  | { type: "other"; redisType: string; pttlMs: number; extras: Extras };

/** Companion reads some formats add to the script (Redisson's fair-lock queue), keyed by format name. */
export type Extras = Partial<Record<FormatName, unknown>>;

/** One key read on one node. `at`: epoch ms (console clock) when PTTL was taken (the node's clock, carried over: see `NodeClock`). */
export interface KeyReading {
  key: string;
  at: number;
  raw: RawReading;
}

/** A node's reading decoded by the format that recognised it: what the merge, the store and the UI need. */
export interface FormatReading {
  format: FormatName;
  /** The key's Redis type on this node (`string`, `hash`, `zset`, or another type for `unknown`). */
  redisType: string;
  /**
   * What this node holds as one comparable string: nodes hold "the same lock" when their fingerprints are
   * equal (the Redlock quorum vote). The token for string formats; the sorted holder ids for the others.
   */
  fingerprint: string;
  holders: FormatHolder[];
  /** When the lock stops being held in its library's eyes (epoch ms, console clock); Infinity: never by itself. */
  expiresAt: number;
  /** The key's own TTL end (epoch ms); Infinity without one. */
  keyExpiresAt: number;
  warnings: readonly LockWarning[];
  /** Waiters the layout shows (Redisson's fair-lock queue); null where they cannot be seen. */
  waiters: number | null;
  /**
   * When the reading changes by itself, with no key written: `waiters` drops (a fair-lock waiter timing out: its
   * client may have died), or a holder leaves (a redis-semaphore permit whose holder stopped refreshing is dead
   * in the library's eyes from then on, though it stays in the key until the next acquire or refresh prunes
   * it). Epoch ms, console clock. The lock is read again then.
   */
  changesAt?: number;
  /** This engine's values only: the fencing token and acquisition time carried in the value. */
  fence?: string | null;
  acquiredAt?: number | null;
  /**
   * A string value's SHA-1 (hex), where the text shown cannot stand for it (longer than the read bound, or not
   * all ASCII): its fingerprint carries it, and force release compares by it.
   */
  valueDigest?: string;
}

/**
 * The part of a reading a lock keeps once merged: its holders and details, without the node's times (the
 * lock's record has those), so that nothing kept per lock is a boxed number.
 */
export interface KeptReading extends Omit<FormatReading, "expiresAt" | "keyExpiresAt" | "holders" | "valueDigest"> {
  /**
   * null: one holder whose id is the fingerprint and nothing more (a plain token, the most common lock),
   * kept without an array and an object of its own; `keptHolders` gives the list.
   */
  holders: FormatHolder[] | null;
}

/** A kept reading's holders (see `KeptReading.holders`). */
export function keptHolders(reading: KeptReading): FormatHolder[] {
  return reading.holders ?? [{ id: reading.fingerprint }];
}

/** The part of a new reading a lock keeps (a new object: see `KeptReading`). */
export function keepReading(reading: FormatReading): KeptReading {
  const only = reading.holders.length === 1 ? reading.holders[0] : undefined;
  const kept: KeptReading = {
    format: reading.format,
    redisType: reading.redisType,
    fingerprint: reading.fingerprint,
    holders: only !== undefined && only.id === reading.fingerprint && onlyAnId(only) ? null : reading.holders,
    warnings: reading.warnings,
    waiters: reading.waiters,
  };
  if (reading.changesAt !== undefined) kept.changesAt = reading.changesAt;
  if (reading.fence !== undefined) kept.fence = reading.fence;
  if (reading.acquiredAt !== undefined) kept.acquiredAt = reading.acquiredAt;
  return kept;
}

/**
 * What a lock keeps of its reading: a plain token (format `token`, a string key whose one holder is its value,
 * with no warning, waiters, fence or acquisition time: the most common lock) as its fingerprint alone, the same
 * string as the lock's value, with no object of its own (a million locks held are a million objects fewer for
 * the collector to mark); any other reading as a `KeptReading`.
 */
export type Kept = KeptReading | string;

/** The part of a new reading a lock keeps (see `Kept`). */
export function keep(reading: FormatReading): Kept {
  const only = reading.holders.length === 1 ? reading.holders[0] : undefined;
  const plain =
    reading.format === "token" &&
    reading.redisType === "string" &&
    only !== undefined &&
    only.id === reading.fingerprint &&
    onlyAnId(only) &&
    reading.warnings.length === 0 &&
    reading.waiters === null &&
    reading.fence === undefined &&
    reading.acquiredAt === undefined;
  return plain ? reading.fingerprint : keepReading(reading);
}

/** Most readings have no warning: they share one empty list (100,000 locks, not 100,000 arrays). */
export const NO_WARNINGS: readonly LockWarning[] = Object.freeze([]);

/** What a plain token's kept reading has besides its fingerprint (see `Kept`). */
const PLAIN_TOKEN = Object.freeze({ format: "token", redisType: "string", holders: null, warnings: NO_WARNINGS, waiters: null } as const);

/** A kept reading in full (a plain token's is made when asked for). */
export function keptReading(kept: Kept): KeptReading {
  return typeof kept === "string" ? { ...PLAIN_TOKEN, fingerprint: kept } : kept;
}

/** A kept reading's details (holders, waiters, warnings), without making a plain token's reading. */
export const keptDetails = (kept: Kept): Pick<KeptReading, "holders" | "waiters" | "warnings"> => (typeof kept === "string" ? PLAIN_TOKEN : kept);

export const keptFingerprint = (kept: Kept): string => (typeof kept === "string" ? kept : kept.fingerprint);
export const keptFormat = (kept: Kept): FormatName => (typeof kept === "string" ? "token" : kept.format);
export const keptWaiters = (kept: Kept): number | null => (typeof kept === "string" ? null : kept.waiters);
/** See `FormatReading.changesAt`; NaN when the reading changes only with a write. */
export const keptChangesAt = (kept: Kept | null): number => (kept === null || typeof kept === "string" ? Number.NaN : (kept.changesAt ?? Number.NaN));

function onlyAnId(holder: FormatHolder): boolean {
  for (const field in holder) if (field !== "id" && holder[field as keyof FormatHolder] !== undefined) return false;
  return true;
}

/** What a decoder may use besides the reading. */
export interface DecodeContext {
  /** Epoch ms, console clock. */
  now: number;
}

/** One node's answer to a force release. */
export type NodeReleaseResult =
  /** `woken`: subscribers connected to this node that received the wake message it published (0: nobody); null when it published none. */
  | { index: number; result: "deleted" | "absent" | "mismatch" | "wrongtype"; redisType: string | null; woken: number | null }
  | { index: number; result: "error"; error: string };

export interface FormatReleaseResult {
  nodes: NodeReleaseResult[];
  /**
   * Who was told. `holder`: the holder hears it at once (only this engine's holders subscribe to revocations;
   * a foreign holder keeps working until its next extend or release). `waiters`: a wake message went out on
   * the channel the library's waiters listen on.
   */
  notified: { holder: boolean; waiters: boolean };
}

export interface ReleaseOptions {
  /** Per-node budget; a node that does not answer in time reports "error". */
  nodeTimeoutMs: number;
  /** The string value's digest (`FormatReading.valueDigest`): a string lock is then deleted only while its value has it. */
  valueDigest?: string;
}

export interface LockFormat {
  readonly name: FormatName;
  /** One line for people: which libraries write this layout. */
  readonly description: string;
  /** Redis types this format's keys have. */
  readonly redisTypes: readonly string[];
  /** Key-name conventions of the libraries behind it (globs); empty where names are the user's choice. */
  readonly keyPatterns: readonly string[];
  readonly scope: FormatScope;
  /** Where its contention figure comes from; null where a failed attempt leaves no trace. */
  readonly contention: ContentionSource | null;
  /** Keyspace-notification classes its writes need (besides K, g, x, e, which every format needs). */
  readonly notify: readonly NotifyClass[];
  /**
   * A Lua block pasted into the batched read script's branch for `type` (see read.ts): it may read companion
   * keys of `key` and must leave its result in the local `extra`, which arrives as `raw.extras[name]`.
   */
  readonly readLua?: { type: ReadType; lua: string };
  /** True when the reading has this format's layout. `key` lets name conventions decide between string formats. */
  readonly recognise: (key: string, raw: RawReading) => boolean;
  /**
   * For discovery outside the patterns: true only when the key is lock-shaped beyond doubt (a string is only a
   * lock by its name or a value format this console knows). Defaults to `recognise`.
   */
  readonly discoverable?: (key: string, raw: RawReading) => boolean;
  /** Decodes a reading this format recognised. */
  readonly decode: (key: string, reading: KeyReading, ctx: DecodeContext) => FormatReading;
  /**
   * Takes one holder away on every node, format-aware, comparing by `holderId`; checks the key's type before
   * any write. null where the console cannot release this format safely.
   */
  release:
    | ((clients: readonly ScriptClient[], resource: string, holderId: string, options: ReleaseOptions) => Promise<FormatReleaseResult>)
    | null;
}

/** Declares a format (typed helper, as unstorage's `defineDriver`). */
export function defineFormat(format: LockFormat): LockFormat {
  return Object.freeze(format);
}
