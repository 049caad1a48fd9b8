import { defineScript } from "@lockscope/redlock";
import { formatReading, holderFingerprint, isEpochMs, lockishName, NO_STRING, stringValue } from "./common";
import { scriptRelease, STRING_MISMATCH_LUA } from "./release";
import { defineFormat, type FormatHolder, type KeyReading, type RawReading } from "./types";

/**
 * redis-semaphore (npm, swarthy/redis-semaphore), its single-node and Redlock variants alike:
 * - `Mutex` / `RedlockMutex`: a string `mutex:<key>` holding the instance's identifier (`crypto.randomUUID()`,
 *   optionally `-<suffix>`), `SET NX PX lockTimeout`, released by compare-and-delete.
 * - `Semaphore` / `RedlockSemaphore`: a sorted set `semaphore:<key>`, member = the holder's identifier, score =
 *   the holder's `Date.now()` when it acquired or last refreshed; every acquire and refresh also `PEXPIRE`s the
 *   whole key to `lockTimeout`; release is `ZREM` of that member. `MultiSemaphore` adds one member per permit,
 *   `<identifier>_<i>`, each listed here as its own holder.
 * The library prunes entries older than `now - lockTimeout` (ZREMRANGEBYSCORE) at the next acquire or refresh,
 * not Redis: until then a dead entry stays in the key, but counts for nothing. `lockTimeout` is not stored; the
 * last write set the key's TTL to it at the time of the newest score, so `key expiry - newest score` is it (or
 * more, when the newest holder has released since: then fewer entries are called dead, never more). Without a
 * TTL the library's default, 10 s, is assumed. Waiters poll (`retryInterval`): nothing to wake, none visible.
 */

export const DEFAULT_LOCK_TIMEOUT_MS = 10_000;
const isSemaphoreKey = (key: string) => key.startsWith("semaphore:");
const isMutexKey = (key: string) => key.startsWith("mutex:");
const scoresLookLikeTimes = (raw: Extract<RawReading, { type: "zset" }>) => raw.members.length > 0 && raw.members.every(([, s]) => isEpochMs(s));

/** The lock timeout the holders run with, inferred from the key's TTL and the newest score. */
export function inferLockTimeout(reading: KeyReading): number {
  const raw = reading.raw;
  if (raw.type !== "zset" || raw.pttlMs < 0 || raw.members.length === 0) return DEFAULT_LOCK_TIMEOUT_MS;
  const newest = Math.max(...raw.members.map(([, s]) => s));
  const inferred = reading.at + raw.pttlMs - newest;
  return Number.isFinite(inferred) && inferred > 0 ? Math.round(inferred) : DEFAULT_LOCK_TIMEOUT_MS;
}

const RELEASE = defineScript(`
-- A semaphore loses only that permit holder (as the library's own release, ZREM); an emptied sorted set is
-- removed by Redis itself. A mutex is compared and deleted.
local key = KEYS[1]
local t = redis.call('TYPE', key)['ok']
if t == 'none' then return {'absent', t, -1} end
if t == 'zset' then
  if redis.call('ZREM', key, ARGV[1]) == 1 then return {'deleted', t, -1} end
  return {'mismatch', t, -1}
end
if t == 'string' then
  ${STRING_MISMATCH_LUA}
  redis.call('DEL', key)
  return {'deleted', t, -1}
end
return {'wrongtype', t, -1}
`);

export const redisSemaphore = defineFormat({
  name: "redis-semaphore",
  description: "redis-semaphore (npm): its mutex (a string under mutex:) and its semaphore (a sorted set of permit holders under semaphore:)",
  redisTypes: ["string", "zset"],
  keyPatterns: ["mutex:*", "semaphore:*"],
  // RedlockMutex and RedlockSemaphore write the same keys on several nodes; Mutex and Semaphore on one.
  scope: "inferred",
  contention: null,
  notify: ["$", "z"],
  recognise: (key, raw) => (raw.type === "string" && isMutexKey(key)) || (raw.type === "zset" && (isSemaphoreKey(key) || scoresLookLikeTimes(raw))),
  discoverable: (key, raw) =>
    (raw.type === "string" && isMutexKey(key)) || (raw.type === "zset" && scoresLookLikeTimes(raw) && (isSemaphoreKey(key) || lockishName(key))),
  decode(_key, reading) {
    const raw = reading.raw;
    if (raw.type !== "zset") {
      const { value, truncated, fingerprint, valueDigest } = stringValue(reading) ?? NO_STRING;
      return formatReading("redis-semaphore", "string", reading, { holders: [{ id: value }], fingerprint, truncated, valueDigest });
    }
    const lockTimeout = inferLockTimeout(reading);
    const holders: FormatHolder[] = [];
    let stale = 0;
    let end = -Infinity;
    for (const [member, score] of raw.members) {
      const expiresAt = score + lockTimeout;
      end = Math.max(end, expiresAt);
      if (expiresAt <= reading.at) {
        stale += 1;
        continue;
      }
      holders.push({ id: member, since: score, expiresAt });
    }
    return formatReading("redis-semaphore", "zset", reading, {
      holders,
      fingerprint: holderFingerprint(holders),
      // The semaphore is held while any permit is alive in the library's eyes.
      ...(Number.isFinite(end) ? { valueExpiresAt: end } : {}),
      truncated: raw.size > raw.members.length,
      extraWarnings: stale > 0 ? ["stale-entries"] : [],
    });
  },
  release: scriptRelease(RELEASE, { holder: false, waiters: false }),
});
