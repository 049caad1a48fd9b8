import { FENCE_OLDER_LUA } from "./shared.lua.ts";

/**
 * KEYS[1]: the data key. KEYS[2]: its last-fence key (`fence-seen:<key>`).
 * ARGV[1]: the writer's fence. ARGV[2]: "set" | "incrby" | "del". ARGV[3]: the value or the increment.
 * ARGV[4]: for incrby, the lowest result allowed ("" for none).
 * Returns {applied 0/1, reason, last fence, value after}; an error reply, with nothing written, when the
 * last-fence key is damaged (not a decimal fence) or, for incrby, the value is not an integer (every check
 * comes before the first write: Redis does not roll back a script that fails halfway).
 */
export const FENCED_WRITE_LUA =
  FENCE_OLDER_LUA +
  `
local fence = ARGV[1]
local last = redis.pcall("GET", KEYS[2])
if last ~= false and (type(last) ~= "string" or not (last == "0" or string.match(last, "^[1-9]%d*$"))) then
  return redis.error_reply("WRONGTYPE lockscope: " .. KEYS[2] .. " does not hold a decimal fence; nothing was written")
end
local current = nil
if ARGV[2] == "incrby" then
  current = redis.pcall("GET", KEYS[1])
  if current == false then current = "0" end
  if type(current) ~= "string" or tonumber(current) == nil then return redis.error_reply("ERR value is not an integer") end
  current = tonumber(current)
end
-- A writer whose fence is older than one that already wrote here held the lock before that writer:
-- it paused past its TTL and its write would overwrite newer data.
if last and fence_older(fence, last) then
  return {0, "stale-fence", last, redis.call("GET", KEYS[1])}
end
-- Every write keeps the key's expiry (KEEPTTL): a fenced write changes a value, not how long its key lives (a SET
-- would make an expiring key, and its last fence, permanent).
if not last or fence_older(last, fence) then
  redis.call("SET", KEYS[2], fence, "KEEPTTL")
  last = fence
end
local op = ARGV[2]
if op == "set" then
  redis.call("SET", KEYS[1], ARGV[3], "KEEPTTL")
  return {1, "", last, ARGV[3]}
elseif op == "del" then
  redis.call("DEL", KEYS[1])
  return {1, "", last, false}
end
local after = current + tonumber(ARGV[3])
-- The floor keeps stock from going negative under a current fence too: the fence orders writers, the
-- floor guards the business rule.
if ARGV[4] ~= "" and after < tonumber(ARGV[4]) then
  return {0, "below-min", last, tostring(current)}
end
redis.call("SET", KEYS[1], tostring(after), "KEEPTTL")
return {1, "", last, tostring(after)}
`;
