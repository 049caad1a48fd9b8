import { INSTANCE_TAG_LENGTH } from "./identity.ts";
import { NOW_MS_LUA, PUBLISH_RELEASE_LUA, QUEUE_HEAD_LUA, QUEUE_KEYS_WRONG_LUA } from "./shared.lua.ts";

/**
 * KEYS[1]: the resource (its lock key). ARGV[1]: the token to compare with, or "" to delete any value.
 * Returns {status, previous value or false, detail}: "deleted", "absent", "mismatch"; "deleted" adds how many
 * subscribers heard the head waiter's wake-up (its engine instance, connected to this node: 0 with nobody
 * queued), 1 when a waiter was queued (0 otherwise), and how many heard the revocation on the holder's own
 * engine instance's channel (0 for a value this engine did not make, or a holder not listening). "not-string" when the
 * key is a hash, a set or any other non-string (not a lock this engine can vouch for: left untouched, a
 * format-aware release decides about those); "wrong-type" when a companion key the script writes (the
 * resource's queue keys or its fence) holds another type: the detail names it, and nothing was written.
 * Everything is checked before the first write, since Redis does not roll back a script that fails halfway.
 */
export const FORCE_RELEASE_LUA =
  NOW_MS_LUA +
  QUEUE_HEAD_LUA +
  PUBLISH_RELEASE_LUA +
  QUEUE_KEYS_WRONG_LUA +
  `
local key = KEYS[1]
local kind = redis.call("TYPE", key).ok
if kind == "none" then return {"absent", false} end
if kind ~= "string" then return {"not-string", false, kind} end
local held = redis.call("GET", key)
if ARGV[1] ~= "" and held ~= ARGV[1] then return {"mismatch", held} end
local wrong, found = queue_keys_wrong(key)
if wrong then return {"wrong-type", held, wrong .. " holds a " .. found} end
local fence_kind = redis.call("TYPE", "fence:" .. key).ok
if fence_kind ~= "none" and fence_kind ~= "string" then return {"wrong-type", held, "fence:" .. key .. " holds a " .. fence_kind} end
redis.call("DEL", key)
-- Move the fence on: the next fenced holder takes max+1 of what the nodes have seen, so it ranks above
-- the evicted holder even if that holder's fence was only recorded here. pcall: a counter beyond int64 (or
-- a damaged one, which fenced acquisitions report) stays as it is.
redis.pcall("INCR", "fence:" .. key)
-- The evicted holder's engine subscribes to this and aborts its using() signal at once, instead of
-- finding out at its next extension.
redis.call("PUBLISH", "lockscope:revoked", cjson.encode({v = 1, resource = key, value = held}))
-- And on the holder's own instance channel (the first ${INSTANCE_TAG_LENGTH} characters of its id): whoever hears it
-- there is the holder's engine instance, so the count says whether the holder's process was listening (it is
-- while a using() routine or a waiter of that instance runs, and a moment after).
local told = 0
if string.sub(held, 1, 4) == "lk1:" and string.sub(held, 21, 21) == ":" and string.find(string.sub(held, 5, 20), "^[%w_%-]+$") then
  told = redis.call("PUBLISH", "lockscope:wake:" .. string.sub(held, 5, ${4 + INSTANCE_TAG_LENGTH}), "v1|" .. held .. "|" .. key)
end
-- Published even with nobody queued: an operator's release is rare, and tools may watch for it.
local head = queue_head(key, now_ms())
local woken = publish_release(key, head)
return {"deleted", held, false, woken, head ~= "" and 1 or 0, told}
`;
