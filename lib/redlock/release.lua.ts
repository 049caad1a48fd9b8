import { NOW_MS_LUA, PUBLISH_RELEASE_LUA, QUEUE_HEAD_LUA } from "./shared.lua";

/**
 * Compare-and-delete on every resource, then wake the head waiter from the same script (no extra round
 * trip, and a waiter hears of the release as soon as it happens instead of on its next poll). With nobody
 * queued for a resource (the common, uncontended case) it publishes nothing: the only extra work over a
 * bare compare-and-delete is one EXISTS.
 *
 * KEYS: the resources. ARGV[1]: the lock's value. ARGV[2] (optional): a second value that is also ours
 * (a fenced lock's first-round value, left on a node where the fence rewrite did not land).
 * Reply: how many resources were deleted.
 */
export const RELEASE_LUA = `
local deleted, waited = 0, nil
for _, key in ipairs(KEYS) do
  local held = redis.pcall("GET", key)
  if held == ARGV[1] or (ARGV[2] ~= nil and held == ARGV[2]) then
    redis.call("DEL", key)
    deleted = deleted + 1
    if redis.call("EXISTS", "waitq:" .. key) == 1 then
      waited = waited or {}
      waited[#waited + 1] = key
    end
  end
end
if waited then
  -- Defined here, only when someone waits: a function defined at the top is a closure made on every call.
  ${NOW_MS_LUA}
  ${QUEUE_HEAD_LUA}
  ${PUBLISH_RELEASE_LUA}
  for _, key in ipairs(waited) do publish_release(key, false) end
end
return deleted
`;
