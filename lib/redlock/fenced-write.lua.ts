import { FENCE_OLDER_LUA } from "./shared.lua.ts";

/**
 * KEYS[1]: the data key. KEYS[2]: its last-fence key (`fence-seen:<key>`).
 * ARGV[1]: the writer's fence. ARGV[2]: "set" | "incrby" | "del". ARGV[3]: the value or the increment.
 * ARGV[4]: for incrby, the lowest result allowed ("" for none).
 * Returns {applied 0/1, reason, last fence, value after}; an error reply, with nothing written, when the
 * last-fence key is damaged (not a decimal fence) or, for incrby, the value is not an integer or the sum leaves
 * 64 bits (every check, and the one write that can fail, come before any other write: Redis does not roll back
 * a script that fails halfway).
 *
 * incrby adds with Redis's own INCRBY, never in Lua: Lua numbers are doubles, and Lua writes one of 10^14 or more
 * as "1.2345678901235e+14", which would turn a large counter into text that no INCRBY reads again.
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
  -- What INCRBY takes: a decimal integer (no fraction, exponent or hex, which tonumber would read).
  if type(current) ~= "string" or not string.match(current, "^-?%d+$") then return redis.error_reply("ERR value is not an integer") end
end
-- A writer whose fence is older than one that already wrote here held the lock before that writer:
-- it paused past its TTL and its write would overwrite newer data.
if last and fence_older(fence, last) then
  return {0, "stale-fence", last, redis.call("GET", KEYS[1])}
end
-- Every write keeps the key's expiry (KEEPTTL): a fenced write changes a value, not how long its key lives (a SET
-- would make an expiring key, and its last fence, permanent).
local op = ARGV[2]
local after = nil
-- The floor keeps stock from going negative under a current fence too: the fence orders writers, the
-- floor guards the business rule. (Compared as doubles: exact below 2^53.)
local below = op == "incrby" and ARGV[4] ~= "" and tonumber(current) + tonumber(ARGV[3]) < tonumber(ARGV[4])
if op == "incrby" and not below then
  -- INCRBY keeps the key's expiry, and fails (nothing written yet) past 64 bits. Its reply is a Lua number:
  -- the value is read back as Redis wrote it.
  redis.call("INCRBY", KEYS[1], ARGV[3])
  after = redis.call("GET", KEYS[1])
end
if not last or fence_older(last, fence) then
  redis.call("SET", KEYS[2], fence, "KEEPTTL")
  last = fence
end
if op == "incrby" then
  if below then return {0, "below-min", last, current} end
  return {1, "", last, after}
elseif op == "set" then
  redis.call("SET", KEYS[1], ARGV[3], "KEEPTTL")
  return {1, "", last, ARGV[3]}
elseif op == "del" then
  redis.call("DEL", KEYS[1])
  return {1, "", last, false}
end
`;
