/**
 * Lua shared by several scripts, pasted in front of them (each script stays one self-contained source,
 * loadable by EVAL without any build step). The key prefixes and channel names written here are the
 * ones exported by `keys.ts` and `telemetry.ts`.
 *
 * The engine runs on independent standalone nodes (as Redlock does), so scripts derive companion keys
 * (`fence:<resource>`, `waitq:<resource>`) from the resource on the node instead of receiving them in
 * KEYS; this keeps the hot-path calls small and is not meant for Redis Cluster.
 *
 * Every `local function` is a closure made each time the script reaches its definition, which costs the
 * hot-path scripts (acquire, release) about as much as their Redis commands: the snippets are split so a
 * script pastes only the ones it uses, and the hot-path scripts paste them inside the branch that needs
 * them, not at the top.
 */

/** `now_ms()`: the node clock in epoch ms. */
export const NOW_MS_LUA = `
-- Node clock in epoch ms. Used only for queue bookkeeping, never for lock validity (that is measured on
-- the client's monotonic clock).
local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

/** `fence_older(a, b)`: compares two decimal fence strings of any length. */
export const FENCE_OLDER_LUA = `
-- Fence strings are canonical decimals (no leading zeros) and may exceed 2^53, so they are compared as
-- strings: a shorter one is smaller, equal lengths compare lexically.
local function fence_older(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
`;

/**
 * `leave_queue(resource, id)`: takes waiter `id` out of the resource's queue, its lapse time and its grant
 * ticket; true when it was queued. The one place that knows the waiter-queue key layout (see keys.ts).
 */
export const LEAVE_QUEUE_FN_LUA = `
local function leave_queue(resource, id)
  local queued = redis.call("ZREM", "waitq:" .. resource, id) == 1
  redis.call("ZREM", "waitqd:" .. resource, id)
  redis.call("HDEL", "waitqg:" .. resource, id)
  return queued
end
`;

/**
 * `queue_head(resource, now)`: the head waiter id of a resource's queue (needs NOW_MS_LUA before it);
 * defines `leave_queue` too.
 */
export const QUEUE_HEAD_LUA = `${LEAVE_QUEUE_FN_LUA}
-- Drops waiters whose liveness deadline passed (a crashed waiter must not block the queue forever), then
-- returns the head waiter id, or "" when nobody waits.
local function queue_head(resource, now)
  local queue = "waitq:" .. resource
  if redis.call("EXISTS", queue) == 0 then return "" end
  local deadlines = "waitqd:" .. resource
  local dead = redis.call("ZRANGEBYSCORE", deadlines, "-inf", now)
  for _, id in ipairs(dead) do leave_queue(resource, id) end
  local head = redis.call("ZRANGE", queue, 0, 0)
  return head[1] or ""
end
`;

/** `publish_release(resource, head)`: announces a release naming `head` ("" for nobody); returns how many heard the wake. */
export const PUBLISH_RELEASE_LUA = `
-- Wakes the head waiter of a released resource (waiters otherwise sleep until their retry timer): the
-- message goes to the public release channel and to the wake channel of the head's engine instance (named
-- by the first 6 characters of its id), the only subscriber that needs it. Returns the subscribers of that
-- wake channel that received it (0 with nobody queued).
local function publish_release(resource, head)
  local message = "r1|" .. head .. "|" .. resource
  redis.call("PUBLISH", "lockscope:released", message)
  if head == "" then return 0 end
  return redis.call("PUBLISH", "lockscope:wake:" .. string.sub(head, 1, 6), message)
end
`;

/**
 * `hand_over(resource, now)`: after the lock key was deleted, passes the resource on to the head of its
 * waiter queue (needs NOW_MS_LUA, QUEUE_HEAD_LUA and PUBLISH_RELEASE_LUA before it). A head with a fresh
 * grant ticket (see the acquire script) gets the lock written in its own value for its own TTL, in this
 * same script, and is told so on its engine instance's wake channel:
 *
 *   g1|<head id>|<attempt>|<this node's fence for the resource, or empty>|<resource>
 *
 * so it holds the lock as soon as it hears a quorum of grants, without another round trip; it returns
 * \`head, attempt, fence\` then (the release script passes them on in its reply), nil otherwise. Nobody can
 * take the lock between the release and the grant, the releasing holder asking again at once included.
 * A head without a ticket (it waits for several resources, or its ticket went stale: its engine stopped
 * asking) is only woken (PUBLISH_RELEASE_LUA) and tries again itself.
 */
export const HAND_OVER_LUA = `
local function hand_over(resource, now)
  -- Only a free resource is handed over (never overwrite a holder, the head itself included).
  if redis.call("EXISTS", resource) == 1 then return nil end
  local head = queue_head(resource, now)
  if head == "" then return end
  local tickets = "waitqg:" .. resource
  local ticket = redis.call("HGET", tickets, head)
  if ticket then
    redis.call("HDEL", tickets, head)
    local fresh, attempt, ttl, value = string.match(ticket, "^(%d+)|(%d+)|(%d+)|(.+)$")
    if value and tonumber(fresh) >= now then
      redis.call("SET", resource, value, "PX", ttl)
      leave_queue(resource, head)
      local fence = redis.call("GET", "fence:" .. resource) or ""
      redis.call("PUBLISH", "lockscope:released", "r1|" .. head .. "|" .. resource)
      redis.call("PUBLISH", "lockscope:wake:" .. string.sub(head, 1, 6), "g1|" .. head .. "|" .. attempt .. "|" .. fence .. "|" .. resource)
      return head, attempt, fence
    end
  end
  publish_release(resource, head)
  return nil
end
`;

/**
 * `queue_keys_wrong(resource)`: the first of a resource's queue keys that holds a type the engine never
 * writes there, with the type found and the type expected; nil when they are absent or right. Scripts call
 * it before their first write: Redis does not roll back what a script wrote before a command failed, so a
 * WRONGTYPE halfway through would leave a half-done release or acquisition behind.
 */
export const QUEUE_KEYS_WRONG_LUA = `
local function queue_keys_wrong(resource)
  local t = redis.call("TYPE", "waitq:" .. resource).ok
  if t ~= "none" and t ~= "zset" then return "waitq:" .. resource, t, "zset" end
  t = redis.call("TYPE", "waitqd:" .. resource).ok
  if t ~= "none" and t ~= "zset" then return "waitqd:" .. resource, t, "zset" end
  t = redis.call("TYPE", "waitqg:" .. resource).ok
  if t ~= "none" and t ~= "hash" then return "waitqg:" .. resource, t, "hash" end
  return nil
end
-- For a list of resources: nil when all is well, else the reply for the first wrong key, an error the
-- client reports as this node's failed vote (nothing was written).
local function queue_keys_refusal(resources)
  for _, resource in ipairs(resources) do
    local wrong, found, expected = queue_keys_wrong(resource)
    if wrong then
      return redis.error_reply("WRONGTYPE lockscope: " .. wrong .. " holds a " .. found .. ", not a " .. expected .. "; nothing was written on this node")
    end
  end
  return nil
end
`;
