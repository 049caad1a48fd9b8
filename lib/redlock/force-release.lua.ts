import { NOW_MS_LUA, PUBLISH_RELEASE_LUA, QUEUE_HEAD_LUA } from "./shared.lua";

/**
 * KEYS[1]: the resource (its lock key). ARGV[1]: the token to compare with, or "" to delete any value.
 * Returns {status, previous value or false}.
 */
export const FORCE_RELEASE_LUA =
  NOW_MS_LUA +
  QUEUE_HEAD_LUA +
  PUBLISH_RELEASE_LUA +
  `
local key = KEYS[1]
local held = redis.pcall("GET", key)
if type(held) == "table" then
  -- Not a string: not a lock this console can vouch for; only an explicit delete without token removes it.
  if ARGV[1] ~= "" then return {"mismatch", false} end
  held = false
end
if held == false and redis.call("EXISTS", key) == 0 then return {"absent", false} end
if ARGV[1] ~= "" and held ~= ARGV[1] then return {"mismatch", held} end
redis.call("DEL", key)
-- Move the fence on: the next fenced holder takes max+1 of what its quorum has seen, so it ranks above
-- the evicted holder even if that holder's fence was only recorded here. pcall: a counter beyond int64
-- is already far ahead and stays as it is.
redis.pcall("INCR", "fence:" .. key)
if held then
  -- The evicted holder's engine subscribes to this and aborts its using() signal at once, instead of
  -- finding out at its next extension.
  redis.call("PUBLISH", "lockscope:revoked", cjson.encode({v = 1, resource = key, value = held}))
end
-- Published even with nobody queued: an operator's release is rare, and tools may watch for it.
publish_release(key, queue_head(key, now_ms()))
return {"deleted", held}
`;
