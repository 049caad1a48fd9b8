/**
 * Second round of a fenced acquisition. The fence F = (highest fence over every node that answered the
 * acquire round, at least a quorum of them with their fence marker) + 1 is recorded here before the lock is
 * handed out; the client counts the nodes that recorded it with their marker present (a node that lost its
 * data since the first round has no marker and does not count). Any later read of a quorum of marked nodes
 * includes one of those, so the next holder reads at least F and takes more (the proof is in
 * docs/engine.md, "Fencing tokens"). Reading alone would not do: the highest value may sit on one node
 * only, outside the next holder's quorum.
 *
 * KEYS: the resources. ARGV[1]: the value written by the acquire round. ARGV[2]: the same value with the
 * fence in it. ARGV[3]: the fence F.
 * Reply: {1 if this node holds the lock (now with ARGV[2]) else 0, this node's fence marker or nil}: F is
 * recorded either way (a monotone maximum can only help a later reader); {-1, i} when the fence key of
 * resource i is damaged: nothing was written.
 */
export const COMMIT_FENCE_LUA = `
-- Written out rather than with helper functions (a Lua function is a closure made on every call): fences
-- are canonical decimals compared as strings (see FENCE_OLDER_LUA); anything else in a fence key is damaged.
local fence, held, current = ARGV[3], true, {}
-- Everything is read and checked before the first write.
for i, key in ipairs(KEYS) do
  local f = redis.pcall("GET", "fence:" .. key)
  if f == false then
    f = "0"
  elseif type(f) ~= "string" or #f > 40 or not (f == "0" or string.match(f, "^[1-9]%d*$")) then
    return {-1, i}
  end
  current[i] = f
  local value = redis.pcall("GET", key)
  if value ~= ARGV[1] and value ~= ARGV[2] then held = false end
end
for i, key in ipairs(KEYS) do
  local f = current[i]
  -- (KEEPTTL: the engine gives fence keys no expiry, and keeps one an application gave them.)
  if #f < #fence or (#f == #fence and f < fence) then redis.call("SET", "fence:" .. key, fence, "KEEPTTL") end
end
if held then
  for _, key in ipairs(KEYS) do
    if redis.call("GET", key) == ARGV[1] then
      -- The value carries the fence so the console can show it; the TTL from the acquire round stays.
      redis.call("SET", key, ARGV[2], "KEEPTTL")
    end
  end
end
local marker = redis.pcall("GET", "lockscope:fence-epoch")
if type(marker) ~= "string" then marker = false end
return {held and 1 or 0, marker}
`;
