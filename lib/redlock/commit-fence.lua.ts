import { FENCE_OLDER_LUA } from "./shared.lua";

/**
 * Second round of a fenced acquisition. The fence F = (highest fence over the granting quorum) + 1 is
 * recorded here before the lock is handed out: any later quorum intersects the quorum that ran this
 * script, so the next holder reads at least F and takes more. Reading alone would not do: the highest
 * value may sit on one node only, outside the next holder's quorum.
 *
 * KEYS: the resources. ARGV[1]: the value written by the acquire round. ARGV[2]: the same value with the
 * fence in it. ARGV[3]: the fence F.
 * Reply: 1 if this node holds the lock (now with ARGV[2]) and recorded F, else 0.
 */
export const COMMIT_FENCE_LUA =
  FENCE_OLDER_LUA +
  `
local held = true
for _, key in ipairs(KEYS) do
  local value = redis.pcall("GET", key)
  if value ~= ARGV[1] and value ~= ARGV[2] then held = false end
end
-- Recorded even where we do not hold: it is a monotone maximum, so it can only help a later quorum.
for _, key in ipairs(KEYS) do
  local current = redis.call("GET", "fence:" .. key)
  if not current or fence_older(current, ARGV[3]) then
    redis.call("SET", "fence:" .. key, ARGV[3])
  end
end
if not held then return 0 end
for _, key in ipairs(KEYS) do
  if redis.call("GET", key) == ARGV[1] then
    -- The value carries the fence so the console can show it; the TTL from the acquire round stays.
    redis.call("SET", key, ARGV[2], "KEEPTTL")
  end
end
return 1
`;
