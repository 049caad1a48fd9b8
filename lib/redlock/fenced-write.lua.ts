import { FENCE_OLDER_LUA } from "./shared.lua";

/**
 * KEYS[1]: the data key. KEYS[2]: its last-fence key (`fence-seen:<key>`).
 * ARGV[1]: the writer's fence. ARGV[2]: "set" | "incrby" | "del". ARGV[3]: the value or the increment.
 * ARGV[4]: for incrby, the lowest result allowed ("" for none).
 * Returns {applied 0/1, reason, last fence, value after}.
 */
export const FENCED_WRITE_LUA =
  FENCE_OLDER_LUA +
  `
local fence = ARGV[1]
local last = redis.call("GET", KEYS[2])
-- A writer whose fence is older than one that already wrote here held the lock before that writer:
-- it paused past its TTL and its write would overwrite newer data.
if last and fence_older(fence, last) then
  return {0, "stale-fence", last, redis.call("GET", KEYS[1])}
end
if not last or fence_older(last, fence) then
  redis.call("SET", KEYS[2], fence)
  last = fence
end
local op = ARGV[2]
if op == "set" then
  redis.call("SET", KEYS[1], ARGV[3])
  return {1, "", last, ARGV[3]}
elseif op == "del" then
  redis.call("DEL", KEYS[1])
  return {1, "", last, false}
end
local current = tonumber(redis.call("GET", KEYS[1]) or "0")
if current == nil then return redis.error_reply("ERR value is not an integer") end
local after = current + tonumber(ARGV[3])
-- The floor keeps stock from going negative under a current fence too: the fence orders writers, the
-- floor guards the business rule.
if ARGV[4] ~= "" and after < tonumber(ARGV[4]) then
  return {0, "below-min", last, tostring(current)}
end
redis.call("SET", KEYS[1], tostring(after))
return {1, "", last, tostring(after)}
`;
