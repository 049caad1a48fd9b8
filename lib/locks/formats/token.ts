import { baseReading, isEpochMs, isTruncated, lockishName, stringFingerprint } from "./common";
import { STRING_COMPARE_DELETE, scriptRelease } from "./release";
import { defineFormat, type FormatHolder, type KeyReading } from "./types";

/**
 * A plain string token, the layout most clients share: node-redlock 4 and 5 (16 random bytes as hex, `SET NX PX`
 * on every node), redlock-universal (the same, or `<nodeId>:<epoch ms>:<16 hex>` with metadata), redlock-py,
 * redis-py's `Lock` (a uuid token), redsync (Go), and hand-written `SET NX` / `SETNX` + `EXPIRE` scripts. The value
 * is the holder's id; force release compares and deletes it.
 *
 * Two value shapes carry more. redis-lock (npm) stores the lock's expiry time as the value,
 * `Date.now() + timeout + 1` in ms under `lock.<name>` with `PX timeout`; the SETNX pattern of the Redis docs (the
 * one redis-lock follows) stores `<unix seconds> + timeout + 1` and often no TTL at all, its holders treating
 * the lock as free once that time has passed. Both are decoded into the holder's `expiresAt`, and the lock's end
 * is the earlier of that and the key's TTL, so such a lock is not a no-TTL hazard. A value that is a time already
 * come on a key with a TTL is when the lock was taken, not its end (see `inValueExpiry`).
 */

const SECONDS = /^\d{10}$/;
const MILLIS = /^\d{13}$/;
// redlock-universal's `createLockValueWithMetadata`: `${nodeId}:${Date.now()}:${8 random bytes as hex}`.
const WITH_METADATA = /^([^:\s]{1,200}):(\d{13}):([0-9a-f]{16})$/;

/** An expiry timestamp carried in the value itself, in epoch ms, or null. */
export function valueExpiry(value: string): number | null {
  if (value.length === 13 && MILLIS.test(value) && isEpochMs(Number(value))) return Number(value);
  if (value.length === 10 && SECONDS.test(value) && isEpochMs(Number(value) * 1000)) return Number(value) * 1000;
  return null;
}

/**
 * A value's time taken as the lock's end: where the key has no TTL (the SETNX pattern), or where it lies ahead
 * of the read by more than `TAKEN_AT_SLACK_MS` (redis-lock's `now + timeout + 1`). A key with a TTL whose value is
 * a time already come holds when it was taken (`SET lock <Date.now()> NX PX 30000`): its TTL alone ends it.
 */
function inValueExpiry(value: string, reading: KeyReading): number | null {
  const expiry = valueExpiry(value);
  if (expiry === null) return null;
  const pttl = reading.raw.type === "string" ? reading.raw.pttlMs : -2;
  return pttl === -1 || expiry > reading.at + TAKEN_AT_SLACK_MS ? expiry : null;
}

/** How far ahead of the read a holder's clock may put "now" written as the value (clocks differ between hosts). */
const TAKEN_AT_SLACK_MS = 1_000;

export const token = defineFormat({
  name: "token",
  description: "A plain string token: node-redlock, redlock-universal, redlock-py, redis-py, redsync, redis-lock, SET NX scripts",
  redisTypes: ["string"],
  // redis-lock's `lock.<name>`; node-redlock and the others take the key name as given.
  keyPatterns: ["lock.*"],
  // node-redlock and redsync write the same token on several nodes; redis-py and SET NX scripts on one.
  scope: "inferred",
  // A foreign client's failed SET NX leaves no trace in Redis.
  contention: null,
  notify: ["$"],
  recognise: (_key, raw) => raw.type === "string",
  // Any string could be a cache entry: only a lock-like name makes it a candidate.
  discoverable: (key, raw) => raw.type === "string" && lockishName(key),
  decode(_key, reading) {
    const raw = reading.raw;
    // (Spelt out rather than through `stringValue` and a `ReadingParts`: the start-up reconcile decodes a plain
    // token three times per lock, and those two objects were a third of what a decode allocated.)
    const value = raw.type === "string" ? raw.value : "";
    const truncated = raw.type === "string" && isTruncated(raw);
    const holder: FormatHolder = { id: value };
    const expiry = inValueExpiry(value, reading);
    if (expiry !== null) holder.expiresAt = expiry;
    // (Checked on every token read: the pattern's shortest match has 32 characters.)
    const meta = value.length >= 32 ? WITH_METADATA.exec(value) : null;
    if (meta && isEpochMs(Number(meta[2]))) {
      holder.label = meta[1];
      holder.since = Number(meta[2]);
    }
    const fingerprint = raw.type === "string" ? stringFingerprint(raw, truncated) : "";
    const out = baseReading("token", "string", reading, [holder], fingerprint, expiry ?? undefined, truncated);
    if (raw.type === "string" && raw.digest !== undefined) out.valueDigest = raw.digest;
    return out;
  },
  release: scriptRelease(STRING_COMPARE_DELETE, { holder: false, waiters: false }),
});
