import { defineScript, isClusterClient, type ScriptClient } from "@lockscope/redlock";
import { UUID_SOURCE, formatReading, holderFingerprint } from "./common";
import { scriptRelease } from "./release";
import { defineFormat, type FormatHolder, type RawReading } from "./types";

/**
 * Redisson's `RLock` (RedissonLock) and fair lock (RedissonFairLock), as its Lua scripts lay them out:
 * - The lock is a hash named as the user named the lock, with one field `<client id>:<thread id>` (the client
 *   id is the Redisson instance's UUID, `ServiceManager.getId()`; the thread id is the JVM thread's) whose value
 *   is the hold count: acquiring checks the key exists (`exists`, `hexists`), then `hincrby` (older versions
 *   `hset ... 1` for the first hold) and `pexpire`s the key to the lease (the watchdog's 30 s, renewed every
 *   10 s, or the caller's `leaseTime`). Unlocking `hincrby`s -1 and, at zero, deletes the key and publishes
 *   `0` (`LockPubSub.UNLOCK_MESSAGE`) on the lock's channel.
 * - Names of companion objects come from `prefixName(prefix, name)`: `prefix:name` when the name holds a `{`,
 *   else `prefix:{name}` (so they share the lock's cluster slot). The channel is
 *   `redisson_lock__channel:{name}`; waiters of a plain RLock subscribe to it (SSUBSCRIBE on a Redis Cluster of
 *   Redis 7 or later, where unlock SPUBLISHes: see `REDISSON_WAKE_LUA`).
 * - The fair lock adds a list `redisson_lock_queue:{name}` of waiting `<client id>:<thread id>`s and a sorted
 *   set `redisson_lock_timeout:{name}` scoring each by the epoch ms when it stops waiting; a queue entry whose
 *   time has passed is stale (dropped by the next acquirer). Each fair waiter subscribes to its own channel,
 *   `redisson_lock__channel:{name}:<client id>:<thread id>`, and unlock publishes `0` only to the first waiter
 *   that has not timed out. That queue is a real waiter count: `contention.waiters`, source `queue`.
 * Redisson holds a lock on one Redis (its RedLock/MultiLock, made of several such locks with different client
 * ids, is deprecated): scope `single`.
 */

/**
 * A Java long as Redisson writes it in a holder field: a thread id, or whatever `lock(threadId)` was given (reactive
 * and coroutine code passes `ThreadLocalRandom.current().nextLong()`, negative half the time).
 */
export const JAVA_LONG_SOURCE = "-?\\d{1,19}";

export const REDISSON_FIELD = new RegExp(`^(${UUID_SOURCE}):(${JAVA_LONG_SOURCE})$`);

/**
 * A holder field's thread id as a number, only where the number is that id: past 2^53 (most random ids) a
 * JavaScript number is a neighbour of it, so the thread is left out and the holder's id (the field) names it.
 */
export function threadNumber(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : undefined;
}

/** Redisson's `prefixName`: the name of a companion object of `name`. */
export function redissonPrefixName(prefix: string, name: string): string {
  return name.includes("{") ? `${prefix}:${name}` : `${prefix}:{${name}}`;
}

/**
 * The keys of fair-lock waiting times (`redisson_lock_timeout:{name}`), as a glob. A waiter joining, leaving or
 * timing out changes this sorted set and leaves the lock's hash as it was: the live view watches these keys
 * too, to read the lock again (`fairLockNames`).
 */
export const FAIR_TIMEOUTS_GLOB = "redisson_lock_timeout:*";
const FAIR_TIMEOUTS_PREFIX = FAIR_TIMEOUTS_GLOB.slice(0, -1);

/**
 * The lock names whose fair-lock waiting times `key` may hold (the inverse of `redissonPrefixName`): for
 * `redisson_lock_timeout:{orders}`, the lock `orders`, or `{orders}` itself (a name with a brace keeps it).
 * None for any other key.
 */
export function fairLockNames(key: string): string[] {
  if (!key.startsWith(FAIR_TIMEOUTS_PREFIX)) return [];
  const rest = key.slice(FAIR_TIMEOUTS_PREFIX.length);
  const names: string[] = [];
  if (rest.startsWith("{") && rest.endsWith("}") && !rest.slice(1).includes("{")) names.push(rest.slice(1, -1));
  if (rest.includes("{")) names.push(rest);
  return names;
}

/** Lua: the `{name}` part of Redisson's companion names (`prefixName` without the prefix), for `key`. */
export const REDISSON_BRACED_LUA = `local braced = key
if not string.find(key, '{', 1, true) then braced = '{' .. key .. '}' end`;

/**
 * Lua: `wake(channel, message)` sends a Redisson message the way Redisson's own unlock does, and answers how
 * many subscribers received it. Redisson sends it with PUBLISH, or on a Redis Cluster of Redis 7 or later with
 * SPUBLISH (sharded pub/sub: `shardedSubscriptionMode` AUTO, the default of its cluster configuration; its
 * waiters SSUBSCRIBE on the node serving the lock's slot, where a PUBLISH does not reach them). Which one a
 * client uses is not in Redis: on a cluster (ARGV[3] is `1`, see `redissonNodeArgs`) both go out, and a node
 * without sharded pub/sub (before Redis 7) answers the SPUBLISH with an error that is ignored. Every channel here
 * carries the lock's hash tag: it is in the lock's slot.
 */
export const REDISSON_WAKE_LUA = `local function wake(channel, message)
  local heard = redis.call('PUBLISH', channel, message)
  if ARGV[3] == '1' then
    local sharded = redis.pcall('SPUBLISH', channel, message)
    if type(sharded) == 'number' then heard = heard + sharded end
  end
  return heard
end`;

/** The release scripts' ARGV[3]: `1` on a Redis Cluster, where Redisson's waiters may listen on sharded pub/sub. */
export const redissonNodeArgs = (client: ScriptClient): readonly string[] => [isClusterClient(client) ? "1" : "0"];

const isCount = (value: string) => /^[1-9]\d{0,9}$/.test(value);

function isRedissonLock(raw: RawReading): raw is Extract<RawReading, { type: "hash" }> {
  if (raw.type !== "hash" || raw.fields.length === 0) return false;
  return raw.fields.every(([field, value]) => REDISSON_FIELD.test(field) && isCount(value));
}

// Queue entries are appended with ever later timeouts, so the stale ones are at the head: counting the stale
// head is enough, and the rest of the queue (beyond the read bound too) is alive.
const QUEUE_LUA = `
${REDISSON_BRACED_LUA}
local queue = 'redisson_lock_queue:' .. braced
-- pcall: a companion key of another type (not Redisson's) must not fail the whole batch on this node.
local queued = redis.pcall('LLEN', queue)
if type(queued) == 'number' and queued > 0 then
  local now = node_now()
  local timeouts = 'redisson_lock_timeout:' .. braced
  local stale, next_stale = 0, -1
  for _, id in ipairs(redis.call('LRANGE', queue, 0, max_items - 1)) do
    local score = redis.pcall('ZSCORE', timeouts, id)
    if type(score) == 'string' and tonumber(score) > now then
      -- The first live waiter stops waiting this many ms from now, unless it is served or renews first.
      next_stale = math.floor(tonumber(score) - now)
      break
    end
    stale = stale + 1
  end
  extra = {queued, queued - stale, next_stale}
end
`;

/** Waiting fair-lock threads that have not timed out, from the read's companion block; null without a queue. */
function queueWaiters(extra: unknown): number | null {
  if (!Array.isArray(extra) || typeof extra[1] !== "number") return null;
  return extra[1];
}

/**
 * When the first waiting thread times out (epoch ms, console clock: the read's time plus what the node
 * said was left), so the count is read again then: a waiter that crashed changes no key when it times out.
 */
function queueChangesAt(extra: unknown, at: number): number | undefined {
  if (!Array.isArray(extra) || typeof extra[2] !== "number" || extra[2] < 0) return undefined;
  return at + extra[2];
}

const RELEASE = defineScript(`
${REDISSON_WAKE_LUA}
local function node_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local key = KEYS[1]
local t = redis.call('TYPE', key)['ok']
if t == 'none' then return {'absent', t, -1} end
if t ~= 'hash' then return {'wrongtype', t, -1} end
-- A read-write lock has a 'mode' field: another layout, released by the redisson-rw format.
if redis.call('HEXISTS', key, 'mode') == 1 then return {'wrongtype', t, -1} end
-- Deleted only while that holder still holds it: a lock that changed hands is spared.
if redis.call('HEXISTS', key, ARGV[1]) == 0 then return {'mismatch', t, -1} end
-- Only the named holder goes: a hash with other holder fields (not Redisson's own layout, one field, but a
-- hand-made or damaged lock can have more) keeps them and its lease, and is still held: nobody is woken.
if redis.call('HLEN', key) > 1 then
  redis.call('HDEL', key, ARGV[1])
  return {'deleted', t, -1}
end
redis.call('DEL', key)
${REDISSON_BRACED_LUA}
local channel = 'redisson_lock__channel:' .. braced
-- -1: no wake message was sent (a fair queue whose waiters all timed out).
local woken = -1
local queue = 'redisson_lock_queue:' .. braced
-- pcall, as the read does: the lock is deleted by now, and a companion key of another type (not Redisson's) must
-- not turn that into an error. A queue that is not a list is no fair lock's: the lock's own channel is woken.
local queued = redis.pcall('LRANGE', queue, 0, 99)
if type(queued) == 'table' and queued.err == nil and #queued > 0 then
  -- Fair lock: as Redisson's own unlock, wake only the first queued thread that has not timed out, on its
  -- own channel. The queue is left to Redisson (the woken thread takes itself off it when it acquires).
  local now = node_now()
  local timeouts = 'redisson_lock_timeout:' .. braced
  for _, id in ipairs(queued) do
    -- (Waiting times of another type: nobody counts as waiting, as the read says.)
    local score = redis.pcall('ZSCORE', timeouts, id)
    if type(score) == 'string' and tonumber(score) > now then
      woken = wake(channel .. ':' .. id, '0')
      break
    end
  end
else
  woken = wake(channel, '0')
end
return {'deleted', t, woken}
`);

export const redisson = defineFormat({
  name: "redisson",
  description: "Redisson's RLock and fair lock (JVM): holder client id, thread id and hold count; the fair lock's queue gives real waiters",
  redisTypes: ["hash"],
  // Redisson locks are named by the application (`getLock("anything")`): no convention; discovery finds them.
  keyPatterns: [],
  scope: "single",
  contention: "queue",
  notify: ["h"],
  readLua: { type: "hash", lua: QUEUE_LUA },
  recognise: (_key, raw) => isRedissonLock(raw),
  decode(_key, reading, _ctx) {
    const raw = reading.raw;
    const fields = raw.type === "hash" ? raw.fields : [];
    const holders = fields.map(([field, value]): FormatHolder => {
      const match = REDISSON_FIELD.exec(field);
      const holder: FormatHolder = { id: field, label: match?.[1] ?? field };
      const thread = threadNumber(match?.[2]);
      if (thread !== undefined) holder.thread = thread;
      holder.count = Number(value);
      return holder;
    });
    return formatReading("redisson", "hash", reading, {
      holders,
      fingerprint: holderFingerprint(holders),
      truncated: raw.type === "hash" && raw.size > raw.fields.length,
      waiters: raw.type === "hash" ? queueWaiters(raw.extras.redisson) : null,
      changesAt: raw.type === "hash" ? queueChangesAt(raw.extras.redisson, reading.at) : undefined,
    });
  },
  release: scriptRelease(RELEASE, { holder: false, waiters: true }, redissonNodeArgs),
});
