import { NOW_MS_LUA, PUBLISH_RELEASE_LUA, QUEUE_HEAD_LUA } from "./shared.lua";

/**
 * Compare-and-delete on every resource, then wake the head waiter from the same script (no extra round
 * trip, and a waiter hears of the release as soon as it happens instead of on its next poll). With nobody
 * queued for a resource (the common, uncontended case) it publishes nothing: the only extra work over a
 * bare compare-and-delete is one EXISTS. With someone queued, it names the head waiter (and may hand the
 * lock over to it, see below).
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
  local now = now_ms()
  for _, key in ipairs(waited) do
    local head = queue_head(key, now)
    if head ~= "" then
      -- Starvation hand-off: a head that has waited too long (it recorded itself in waitqs:, see the
      -- acquire script) gets the lock written in its own value, for a short grace, so a releasing holder
      -- that asks again at once cannot win it back. The head takes it with its next attempt (its own
      -- value counts as free); if it never comes, the grace runs out and anyone can take the lock.
      local starving = redis.call("GET", "waitqs:" .. key)
      if starving then
        redis.call("DEL", "waitqs:" .. key)
        local grace, value = string.match(starving, "^(%d+)|(.+)$")
        if value and string.sub(value, 5, 20) == head then redis.call("SET", key, value, "PX", grace) end
      end
      publish_release(key, head)
    end
  end
end
return deleted
`;
