/**
 * Renews the TTL of every resource, only if all still hold our value on this node (a lock that expired
 * and was taken by someone else must not be extended for them).
 *
 * KEYS: the resources. ARGV[1]: the lock's value. ARGV[2]: the new TTL in ms. ARGV[3]: "" or a second value
 * that is also ours (a fenced lock's first-round value, left on a node where the fence rewrite did not
 * land: it is rewritten to ARGV[1]). ARGV[4]: "restore" to write the lock back where it is missing.
 *
 * Reply: 1 extended; 0 another value (or another type) holds a resource here, or nothing is ours here;
 * 2 every resource is ours or missing and at least one is missing (the node came back empty, or its key
 * expired early): without "restore" nothing was written, so the client can first check that a quorum still
 * holds the lock, and only then write it back here (a lock deleted on every node, by an operator for
 * instance, must not be brought back).
 */
export const EXTEND_LUA = `
local value, ttl, previous, restore = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == "restore"
local missing = false
-- Everything is read before the first write.
for _, key in ipairs(KEYS) do
  local held = redis.pcall("GET", key)
  if held == false then
    missing = true
  elseif held ~= value and (previous == "" or held ~= previous) then
    return 0
  end
end
if missing and not restore then return 2 end
for _, key in ipairs(KEYS) do
  local held = redis.call("GET", key)
  if held == value then
    redis.call("PEXPIRE", key, ttl)
  else
    -- The first-round value of a fenced lock, or a key that is missing: write the current value.
    redis.call("SET", key, value, "PX", ttl)
  end
end
return 1
`;
