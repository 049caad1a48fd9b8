import { keyExpiry } from "./read";
import { NO_WARNINGS, type FormatHolder, type FormatName, type FormatReading, type KeyReading, type LockWarning, type RawReading } from "./types";

/** Canonical UUID text (Java's `UUID.toString()`, Node's `randomUUID()`), lower case. */
export const UUID_SOURCE = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

/** Epoch milliseconds that a lock library could have written: 2001 to 2286. */
export const isEpochMs = (n: number): boolean => Number.isFinite(n) && n >= 1e12 && n < 1e13;

/** Key name words that mark a string key as a lock for discovery (a string alone could be anything). */
const LOCKISH = /(^|[^a-z])(lock|locks|locked|mutex|lease|leases|semaphore|leader|election|singleton)([^a-z]|$)/i;
export const lockishName = (key: string): boolean => LOCKISH.test(key) || key === "my_resource_name";

export interface ReadingParts {
  holders: FormatHolder[];
  fingerprint: string;
  /** An end the library keeps in the value itself (redis-lock's expiry timestamp), when earlier than the key's TTL. */
  valueExpiresAt?: number;
  truncated?: boolean;
  /** See `FormatReading.valueDigest`. */
  valueDigest?: string;
  extraWarnings?: LockWarning[];
  waiters?: number | null;
  /** See `FormatReading.changesAt`. */
  changesAt?: number;
  fence?: string | null;
  acquiredAt?: number | null;
}

/**
 * The parts every format shares: the key's TTL end, the lock's end (the earlier of the TTL and an in-value
 * expiry), and the warnings that follow from them. A lock ends by itself only if one of the two is finite:
 * otherwise it is the `no-ttl` hazard.
 */
export function formatReading(format: FormatName, redisType: string, reading: KeyReading, parts: ReadingParts): FormatReading {
  const out = baseReading(format, redisType, reading, parts.holders, parts.fingerprint, parts.valueExpiresAt, parts.truncated ?? false, parts.extraWarnings, parts.waiters ?? null);
  if (parts.changesAt !== undefined) out.changesAt = parts.changesAt;
  if (parts.fence !== undefined) out.fence = parts.fence;
  if (parts.acquiredAt !== undefined) out.acquiredAt = parts.acquiredAt;
  if (parts.valueDigest !== undefined) out.valueDigest = parts.valueDigest;
  return out;
}

/**
 * `formatReading` with the parts it always reads given one by one (no `ReadingParts` object): a plain token is
 * decoded three times per lock by the start-up reconcile, a million locks in a row.
 */
export function baseReading(
  format: FormatName,
  redisType: string,
  reading: KeyReading,
  holders: FormatHolder[],
  fingerprint: string,
  valueExpiresAt: number | undefined,
  truncated: boolean,
  extraWarnings: readonly LockWarning[] | undefined = undefined,
  waiters: number | null = null,
): FormatReading {
  const pttl = reading.raw.type === "none" ? -2 : reading.raw.pttlMs;
  const keyExpiresAt = keyExpiry(reading.at, pttl);
  const expiresAt = valueExpiresAt !== undefined ? Math.min(keyExpiresAt, valueExpiresAt) : keyExpiresAt;
  let warnings: readonly LockWarning[] = NO_WARNINGS;
  if (expiresAt === Infinity || truncated || (extraWarnings?.length ?? 0) > 0) {
    const list: LockWarning[] = [];
    if (expiresAt === Infinity) list.push("no-ttl");
    for (const w of extraWarnings ?? []) if (!list.includes(w)) list.push(w);
    if (truncated) list.push("truncated");
    warnings = list;
  }
  return { format, redisType, fingerprint, holders, expiresAt, keyExpiresAt, warnings, waiters };
}

/** The fingerprint of a multi-holder layout: its holder ids, sorted, one per line (ids never hold a newline in these layouts). */
export const holderFingerprint = (holders: readonly FormatHolder[]): string => holders.map((h) => h.id).sort().join("\n");

/**
 * The string value of a reading as text, whether the read bound cut it, and what nodes compare to tell values
 * apart (`fingerprint`): the text, or where the text cannot stand for the value (cut by the bound, or bytes
 * that are not valid UTF-8 shown as U+FFFD) the text with the value's digest, or beyond the digest's bound
 * with its size.
 */
export function stringValue(reading: KeyReading): StringValue | null {
  const raw = reading.raw;
  if (raw.type !== "string") return null;
  const truncated = isTruncated(raw);
  const fingerprint = stringFingerprint(raw, truncated);
  return raw.digest !== undefined ? { value: raw.value, truncated, fingerprint, valueDigest: raw.digest } : { value: raw.value, truncated, fingerprint };
}

type StringRaw = Extract<RawReading, { type: "string" }>;

/** Whether the read bound cut a string value (its text is shorter than its size). */
export function isTruncated(raw: StringRaw): boolean {
  // (A string's UTF-8 bytes are never fewer than its UTF-16 code units: a size within those needs no count.)
  return raw.size > raw.value.length && raw.size > Buffer.byteLength(raw.value);
}

/** What nodes compare of a string value (see `stringValue`). */
export function stringFingerprint(raw: StringRaw, truncated: boolean): string {
  if (raw.digest !== undefined) return `${raw.value} (sha1 ${raw.digest})`;
  return truncated ? `${raw.value} (${raw.size} bytes)` : raw.value;
}

export interface StringValue {
  value: string;
  truncated: boolean;
  fingerprint: string;
  valueDigest?: string;
}

/** A string lock's value when the key is not a string (a reading of another type): nothing. */
export const NO_STRING: Readonly<StringValue> = Object.freeze({ value: "", truncated: false, fingerprint: "" });
