import { SHARED_LUA } from "./shared.lua";

/**
 * Compare-and-delete on every resource, then wake the waiters from the same script (no extra round trip,
 * and a waiter hears of the release as soon as it happens instead of on its next poll).
 *
 * KEYS: the resources. ARGV[1]: the lock's value. ARGV[2] (optional): a second value that is also ours
 * (a fenced lock's first-round value, left on a node where the fence rewrite did not land).
 * Reply: how many resources were deleted.
 */
export const RELEASE_LUA =
  SHARED_LUA +
  `
local deleted = 0
for _, key in ipairs(KEYS) do
  local held = redis.pcall("GET", key)
  if held == ARGV[1] or (ARGV[2] ~= nil and held == ARGV[2]) then
    redis.call("DEL", key)
    deleted = deleted + 1
    publish_release(key)
  end
end
return deleted
`;
