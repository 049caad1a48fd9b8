import { FENCE_OLDER_LUA } from "./shared.lua.ts";

/** `fence_marker()`: this node's fence marker (see FENCE_MARKER_KEY), or false when it has none. */
const FENCE_MARKER_LUA = `
local function fence_marker()
  local marker = redis.pcall("GET", "lockscope:fence-epoch")
  if type(marker) ~= "string" then return false end
  return marker
end
`;

/**
 * Scripts that re-seed a node's fences (see reseed.ts). The marker and re-seed keys are FENCE_MARKER_KEY and
 * FENCE_RESEED_KEY (keys.ts), written literally here as everywhere else in the scripts.
 */

/**
 * Starts re-seeding this node. ARGV[1]: the re-seed's token; ARGV[2]: how long it may take (ms).
 * Reply: {1, marker} when the node has its marker (nothing to do, or a trusted node taking part in a full
 * re-seed); {0} after recording the token: the node's own fences are exported and imported under it, and
 * only if the token is still there at the end (the node did not restart meanwhile) does it get its marker.
 */
export const RESEED_BEGIN_LUA =
  FENCE_MARKER_LUA +
  `
local marker = fence_marker()
if marker then return {1, marker} end
redis.call("SET", "lockscope:fence-reseed", ARGV[1], "PX", ARGV[2])
return {0}
`;

/**
 * One page of this node's fences. ARGV[1]: the SCAN cursor; ARGV[2]: the page size.
 * Reply: {next cursor, marker or nil, resource 1, fence 1, ...}. SCAN, never KEYS: a node may hold many
 * fence keys and KEYS would block it. A damaged fence key is left out (the other nodes have it).
 */
export const FENCE_EXPORT_LUA =
  FENCE_MARKER_LUA +
  `
local page = redis.call("SCAN", ARGV[1], "MATCH", "fence:*", "COUNT", ARGV[2])
local reply = {page[1], fence_marker()}
for _, key in ipairs(page[2]) do
  local fence = redis.pcall("GET", key)
  if type(fence) == "string" and #fence <= 40 and string.match(fence, "^[1-9]%d*$") then
    reply[#reply + 1] = string.sub(key, 7)
    reply[#reply + 1] = fence
  end
end
return reply
`;

/**
 * Merges fences into this node, each only where it is higher (or the key is missing or damaged), so a
 * re-seed can never lower a fence. ARGV[1]: the guard key; ARGV[2]: the value it must hold (the re-seed's
 * token for a node without marker, the marker for one that has it), else nothing is written and the reply
 * is 0: the node restarted, or another re-seed took over. ARGV[3..]: resource, fence pairs. Reply: 1.
 */
export const FENCE_IMPORT_LUA =
  FENCE_OLDER_LUA +
  `
if redis.pcall("GET", ARGV[1]) ~= ARGV[2] then return 0 end
for i = 3, #ARGV - 1, 2 do
  local key, fence = "fence:" .. ARGV[i], ARGV[i + 1]
  local current = redis.pcall("GET", key)
  -- (A damaged value is replaced: it is no fence at all.)
  if type(current) ~= "string" or not (current == "0" or string.match(current, "^[1-9]%d*$")) or fence_older(current, fence) then
    redis.call("SET", key, fence, "KEEPTTL")
  end
end
return 1
`;

/**
 * Ends a re-seed: the node gets its marker only if the token is still there. ARGV[1]: the token; ARGV[2]:
 * the new marker. Reply: 1 marked, 0 not (the node restarted during the re-seed, or another took over).
 */
export const RESEED_MARK_LUA = `
if redis.pcall("GET", "lockscope:fence-reseed") ~= ARGV[1] then return 0 end
redis.call("SET", "lockscope:fence-epoch", ARGV[2])
redis.call("DEL", "lockscope:fence-reseed")
return 1
`;
