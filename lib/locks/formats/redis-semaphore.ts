import { defineScript } from "@lockscope/redlock";
import { formatReading, holderFingerprint, isEpochMs, lockishName, NO_STRING, stringValue, type ReadingParts } from "./common";
import { scriptRelease, STRING_MISMATCH_LUA } from "./release";
import { defineFormat, type FormatHolder, type KeyReading, type RawReading } from "./types";

/**
 * redis-semaphore (npm, swarthy/redis-semaphore), its single-node and Redlock variants alike:
 * - `Mutex` / `RedlockMutex`: a string `mutex:<key>` holding the instance's identifier (`crypto.randomUUID()`,
 *   optionally `-<suffix>`), `SET NX PX lockTimeout`, released by compare-and-delete.
 * - `Semaphore` / `RedlockSemaphore`: a sorted set `semaphore:<key>`, member = the holder's identifier, score =
 *   the holder's `Date.now()` when it acquired or last refreshed; every acquire and refresh also `PEXPIRE`s the
 *   whole key to `lockTimeout`; release is `ZREM` of that member.
 * - `MultiSemaphore` / `RedlockMultiSemaphore`: one holder taking several permits adds one member per permit,
 *   `<identifier>_0` to `<identifier>_<n-1>`, all with the same score (one ZADD). Its refresh looks at `_0` only
 *   and then writes back every `_<i>`: the permits live and die together. They are shown as one holder, id
 *   `<identifier>`, `count` its permits (at least those read, when the read's bound cuts them), and released
 *   together (see `permitGroups`).
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

/** What `permitGroups` gives where no member is a permit (shared: it is only read). */
const NO_PERMIT_GROUPS: ReadonlyMap<string, number> = new Map();

/** A MultiSemaphore permit's member: `<identifier>_<i>`. */
const PERMIT = /^(.+)_(0|[1-9]\d{0,5})$/;

/**
 * A MultiSemaphore holder's permits among `members`: ids `<identifier>_0` to `<identifier>_<n-1>`, n of at least
 * two, every one with the same score (the library adds and refreshes them in one ZADD). Returns each such
 * identifier with its permit count; the members of a group are not holders of their own. A plain
 * `Semaphore`'s identifiers (a UUID, or a UUID and `-<suffix>`) hold no `_`.
 *
 * `truncated`: the members are the newest of a larger set (the read's bound). Redis orders equal scores by member,
 * highest first, and `_0` is the lowest of a holder's permits: a holder cut by the bound is the one with the oldest
 * score read, and its `_0` is among those left out. Its permits read (two or more) are still one holder, of at least
 * as many permits as were read, and at least one more than the highest permit number read.
 */
export function permitGroups(members: ReadonlyArray<readonly [string, number]>, truncated = false): ReadonlyMap<string, number> {
  // Made only when a member looks like a permit: a plain Semaphore's holders (every change of one is decoded) need no map.
  let byPrefix: Map<string, { indices: Set<number>; score: number; same: boolean }> | null = null;
  for (const [member, score] of members) {
    const match = PERMIT.exec(member);
    if (!match) continue;
    byPrefix ??= new Map();
    const prefix = match[1] as string;
    const group = byPrefix.get(prefix) ?? { indices: new Set<number>(), score, same: true };
    group.indices.add(Number(match[2]));
    if (group.score !== score) group.same = false;
    byPrefix.set(prefix, group);
  }
  if (byPrefix === null) return NO_PERMIT_GROUPS;
  let oldest = Infinity;
  if (truncated) for (const [, score] of members) oldest = Math.min(oldest, score);
  const groups = new Map<string, number>();
  for (const [prefix, { indices, score, same }] of byPrefix) {
    const n = indices.size;
    if (n < 2 || !same) continue;
    let contiguous = true;
    for (let i = 0; i < n && contiguous; i++) contiguous = indices.has(i);
    if (contiguous) groups.set(prefix, n);
    else if (truncated && score === oldest && !indices.has(0)) groups.set(prefix, Math.max(n, Math.max(...indices) + 1));
  }
  return groups;
}

const RELEASE = defineScript(`
-- A semaphore loses only that holder (as the library's own release, ZREM); an emptied sorted set is removed by
-- Redis itself. A mutex is compared and deleted.
local key = KEYS[1]
local t = redis.call('TYPE', key)['ok']
if t == 'none' then return {'absent', t, -1} end
if t == 'zset' then
  local id = ARGV[1]
  -- One permit of a MultiSemaphore holder, named on its own (<id>_<i>, with <id>_0 beside it scored the same:
  -- a token may name any of them): its holder goes whole, as below.
  local prefix = string.match(id, '^(.+)_%d+$')
  if prefix then
    local score = redis.call('ZSCORE', key, id)
    if score and score == redis.call('ZSCORE', key, prefix .. '_0') then id = prefix end
  end
  if id == ARGV[1] and redis.call('ZREM', key, id) == 1 then return {'deleted', t, -1} end
  -- A MultiSemaphore holder: every one of its permits, <id>_0, <id>_1, ... (as the library's own release).
  -- Taking out some of them would not free those permits: the holder's next refresh, which checks <id>_0
  -- only, writes every one back, past the semaphore's limit if another holder took them meanwhile.
  local removed = 0
  for i = 0, redis.call('ZCARD', key) - 1 do
    if redis.call('ZREM', key, id .. '_' .. i) == 0 then break end
    removed = removed + 1
  end
  if removed > 0 then return {'deleted', t, -1} end
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
    const truncated = raw.size > raw.members.length;
    const groups = permitGroups(raw.members, truncated);
    // The holders of several permits already named (by the first of their permits read).
    const named = groups.size > 0 ? new Set<string>() : null;
    const holders: FormatHolder[] = [];
    let stale = 0;
    let end = -Infinity;
    for (const [member, score] of raw.members) {
      const expiresAt = score + lockTimeout;
      end = Math.max(end, expiresAt);
      // A MultiSemaphore holder's permits are one holder, named once.
      const group = named ? PERMIT.exec(member) : null;
      const permits = group ? groups.get(group[1] as string) : undefined;
      if (group && permits !== undefined) {
        if (named!.has(group[1] as string)) continue;
        named!.add(group[1] as string);
      }
      if (expiresAt <= reading.at) {
        stale += 1;
        continue;
      }
      holders.push(permits !== undefined && group ? { id: group[1] as string, count: permits, since: score, expiresAt } : { id: member, since: score, expiresAt });
    }
    // The first holder whose permit goes stale before the semaphore ends leaves with no key written (a holder
    // that stopped refreshing, its process dead): the lock is read again then.
    let changesAt = Infinity;
    for (const h of holders) if (h.expiresAt !== undefined && h.expiresAt < end) changesAt = Math.min(changesAt, h.expiresAt);
    const parts: ReadingParts = { holders, fingerprint: holderFingerprint(holders), truncated, extraWarnings: stale > 0 ? ["stale-entries"] : [] };
    if (Number.isFinite(changesAt)) parts.changesAt = changesAt;
    // The semaphore is held while any permit is alive in the library's eyes.
    if (Number.isFinite(end)) parts.valueExpiresAt = end;
    return formatReading("redis-semaphore", "zset", reading, parts);
  },
  release: scriptRelease(RELEASE, { holder: false, waiters: false }),
});
