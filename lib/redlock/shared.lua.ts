/**
 * Lua shared by several scripts, pasted in front of them (each script stays one self-contained source,
 * loadable by EVAL without any build step). The key prefixes and channel names written here are the
 * ones exported by `keys.ts` and `telemetry.ts`.
 *
 * The engine runs on independent standalone nodes (as Redlock does), so scripts derive companion keys
 * (`fence:<resource>`, `waitq:<resource>`) from the resource on the node instead of receiving them in
 * KEYS; this keeps the hot-path calls small and is not meant for Redis Cluster.
 */
export const SHARED_LUA = `
-- Node clock in epoch ms. Used only for fair-mode queue bookkeeping, never for lock validity (that is
-- measured on the client's monotonic clock).
local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Fence strings are canonical decimals (no leading zeros) and may exceed 2^53, so they are compared as
-- strings: a shorter one is smaller, equal lengths compare lexically.
local function fence_older(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

-- Drops fair-mode waiters whose liveness deadline passed (a crashed waiter must not block the queue
-- forever), then returns the head waiter id, or "" when nobody waits.
local function queue_head(resource, now)
  local queue = "waitq:" .. resource
  if redis.call("EXISTS", queue) == 0 then return "" end
  local deadlines = "waitqd:" .. resource
  local dead = redis.call("ZRANGEBYSCORE", deadlines, "-inf", now)
  for _, id in ipairs(dead) do
    redis.call("ZREM", queue, id)
    redis.call("ZREM", deadlines, id)
  end
  local head = redis.call("ZRANGE", queue, 0, 0)
  return head[1] or ""
end

-- Wakes the waiters of a released resource (they otherwise sleep until their retry timer). In fair mode
-- it names the head of the queue so only that waiter retries at once.
local function publish_release(resource)
  local head = ""
  if redis.call("EXISTS", "waitq:" .. resource) == 1 then head = queue_head(resource, now_ms()) end
  redis.call("PUBLISH", "lockscope:released", "r1|" .. head .. "|" .. resource)
end
`;
