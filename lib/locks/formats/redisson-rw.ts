import { defineScript } from "@lockscope/redlock";
import { UUID_SOURCE, formatReading, holderFingerprint } from "./common";
import { JAVA_LONG_SOURCE, REDISSON_BRACED_LUA, REDISSON_WAKE_LUA, redissonNodeArgs, threadNumber } from "./redisson";
import { scriptRelease } from "./release";
import { defineFormat, type FormatHolder, type RawReading } from "./types";

/**
 * Redisson's read-write lock (RedissonReadWriteLock: RedissonReadLock and RedissonWriteLock), as their scripts
 * lay it out. One hash per lock:
 * - field `mode`: `read` or `write`, set by the first holder;
 * - a writer: field `<client id>:<thread id>:write` = its hold count (one writer at a time; its own thread may
 *   also take read holds, which keeps `mode` at `write`);
 * - every reader: field `<client id>:<thread id>` = its hold count, and one string per hold,
 *   `{name}:<client id>:<thread id>:rwlock_timeout:<n>` (Redisson's `suffixName`), each with the lease as TTL;
 *   the hash's own TTL is kept at the longest of them.
 * Unlock publishes on `redisson_rwlock:{name}`: `0` (UNLOCK_MESSAGE, wakes one waiter) when the last reader
 * leaves, `1` (READ_UNLOCK_MESSAGE, wakes every waiter) when the writer leaves. A writer that leaves while its
 * thread still reads turns the lock to `read` without publishing.
 */

const HOLDER_FIELD = new RegExp(`^(${UUID_SOURCE}):(${JAVA_LONG_SOURCE})(:write)?$`);
const isCount = (value: string) => /^[1-9]\d{0,9}$/.test(value);

function isReadWriteLock(raw: RawReading): raw is Extract<RawReading, { type: "hash" }> {
  if (raw.type !== "hash") return false;
  const mode = raw.fields.find(([field]) => field === "mode")?.[1];
  if (mode !== "read" && mode !== "write") return false;
  return raw.fields.every(([field, value]) => field === "mode" || (HOLDER_FIELD.test(field) && isCount(value)));
}

const RELEASE = defineScript(`
${REDISSON_WAKE_LUA}
local key = KEYS[1]
local id = ARGV[1]
local t = redis.call('TYPE', key)['ok']
if t == 'none' then return {'absent', t, -1} end
if t ~= 'hash' then return {'wrongtype', t, -1} end
if redis.call('HGET', key, 'mode') == false then return {'wrongtype', t, -1} end
-- Only that holder is taken out, and only while it still holds the lock.
if id == 'mode' or redis.call('HEXISTS', key, id) == 0 then return {'mismatch', t, -1} end
local count = tonumber(redis.call('HGET', key, id)) or 0
redis.call('HDEL', key, id)
local writer = string.sub(id, -6) == ':write'
-- Lease keys are named after the lock as Redisson's suffixName has it: {name}:<holder>:rwlock_timeout:<n>.
local lease_prefix
if string.find(key, '{', 1, true) then lease_prefix = key .. ':' else lease_prefix = '{' .. key .. '}:' end
-- At most 1,024 holds of a holder are looked at (a hold count is any number up to ten digits: a loop over it
-- would hold the node for seconds); the lease keys of the others end with their leases.
if not writer then
  -- A reader's per-hold lease keys go with it, or they would keep the hash alive in Redisson's eyes.
  for i = 1, math.min(count, 1024) do redis.call('DEL', lease_prefix .. id .. ':rwlock_timeout:' .. i) end
end
local woken = -1
local others = redis.call('HLEN', key) > 1
if others and not writer then
  -- As Redisson's read unlock: the lock lives as long as the longest lease left (the reader taken out may have
  -- had the longest one); with none left, a read lock is over, and a write lock keeps its writer.
  local longest = -3
  for _, field in ipairs(redis.call('HKEYS', key)) do
    local holds = tonumber(redis.call('HGET', key, field))
    if holds then
      -- (Its newest 1,024 holds: their leases were taken last.)
      for i = holds, math.max(1, holds - 1023), -1 do
        longest = math.max(longest, redis.call('PTTL', lease_prefix .. field .. ':rwlock_timeout:' .. i))
      end
    end
  end
  if longest > 0 then
    redis.call('PEXPIRE', key, longest)
    return {'deleted', t, woken}
  end
  if redis.call('HGET', key, 'mode') == 'write' then return {'deleted', t, woken} end
  others = false
end
if not others then
  -- Nobody holds it any more: delete it and wake the waiters with the message Redisson's own unlock sends.
  redis.call('DEL', key)
  ${REDISSON_BRACED_LUA}
  local message = '0'
  if writer then message = '1' end
  woken = wake('redisson_rwlock:' .. braced, message)
elseif writer then
  redis.call('HSET', key, 'mode', 'read')
end
return {'deleted', t, woken}
`);

export const redissonReadWrite = defineFormat({
  name: "redisson-rw",
  description: "Redisson's read-write lock (JVM): its mode, the writer and every reader, with thread ids and hold counts",
  redisTypes: ["hash"],
  keyPatterns: [],
  scope: "single",
  contention: null,
  notify: ["h"],
  recognise: (_key, raw) => isReadWriteLock(raw),
  decode(_key, reading) {
    const raw = reading.raw;
    const fields = raw.type === "hash" ? raw.fields : [];
    const holders: FormatHolder[] = [];
    for (const [field, value] of fields) {
      const match = HOLDER_FIELD.exec(field);
      if (!match) continue;
      const holder: FormatHolder = { id: field, label: match[1] };
      const thread = threadNumber(match[2]);
      if (thread !== undefined) holder.thread = thread;
      holder.count = Number(value);
      holder.mode = match[3] ? "write" : "read";
      holders.push(holder);
    }
    // The writer first: it is the one that excludes everybody else.
    holders.sort((a, b) => (a.mode === b.mode ? 0 : a.mode === "write" ? -1 : 1));
    return formatReading("redisson-rw", "hash", reading, {
      holders,
      fingerprint: holderFingerprint(holders),
      truncated: raw.type === "hash" && raw.size > raw.fields.length,
    });
  },
  release: scriptRelease(RELEASE, { holder: false, waiters: true }, redissonNodeArgs),
});
