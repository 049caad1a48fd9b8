import { HAND_OVER_LUA, LEAVE_QUEUE_FN_LUA, NOW_MS_LUA, PUBLISH_RELEASE_LUA, QUEUE_HEAD_LUA, QUEUE_KEYS_WRONG_LUA } from "./shared.lua.ts";

/**
 * Compare-and-delete on every resource, then hand each one over to its head waiter from the same script
 * (see HAND_OVER_LUA: the lock is written in the waiter's value, or the waiter is woken). With nobody
 * queued for a resource (the common, uncontended case) it publishes nothing: the only extra work over a
 * bare compare-and-delete is one EXISTS.
 *
 * KEYS: the resources. ARGV[1]: the lock's value. ARGV[2] (optional): a second value that is also ours
 * (a fenced lock's first-round value, left on a node where the fence rewrite did not land).
 * Reply: how many resources were deleted; as an array when someone was waiting for one of them:
 * `{deleted, then <waiter id>, <attempt>, <fence or "">` for each resource it handed over (the same facts
 * as the grant message, so a waiter in the releasing process can be told at once, see `deliverLocalGrant`).
 * An error reply (WRONGTYPE), with nothing deleted, when a queue key of a resource holds another type.
 */
export const RELEASE_LUA = `
local deleted, waited, id = 0, nil, nil
-- Where someone waits, the queue keys are checked before anything is deleted: Redis does not roll back
-- a script that fails halfway, and a release must not delete the lock and then fail to hand it over.
local waiting = false
for _, key in ipairs(KEYS) do
  if redis.call("EXISTS", "waitq:" .. key) == 1 then waiting = true end
end
if waiting then
  ${QUEUE_KEYS_WRONG_LUA}
  local refusal = queue_keys_refusal(KEYS)
  if refusal then return refusal end
end
for _, key in ipairs(KEYS) do
  local held = redis.pcall("GET", key)
  if held == ARGV[1] or (ARGV[2] ~= nil and held == ARGV[2]) then
    redis.call("DEL", key)
    deleted = deleted + 1
    if waiting and redis.call("EXISTS", "waitq:" .. key) == 1 then
      waited = waited or {}
      waited[#waited + 1] = key
    end
  elseif waiting and redis.call("EXISTS", "waitq:" .. key) == 1 then
    -- Not held here, but the holder may still be queued here: it took the lock on a quorum of other
    -- nodes before this node's turn came. It leaves now, or a later release would hand it this node.
    id = id or string.sub(ARGV[1], 5, 20)
    ${LEAVE_QUEUE_FN_LUA}
    leave_queue(key, id)
  end
end
if waited then
  -- Defined here, only when someone waits: a function defined at the top is a closure made on every call.
  ${NOW_MS_LUA}
  ${QUEUE_HEAD_LUA}
  ${PUBLISH_RELEASE_LUA}
  ${HAND_OVER_LUA}
  local now = now_ms()
  local reply = {deleted}
  for _, key in ipairs(waited) do
    local head, attempt, fence = hand_over(key, now)
    if head then
      reply[#reply + 1] = head
      reply[#reply + 1] = attempt
      reply[#reply + 1] = fence
    end
  end
  return reply
end
return deleted
`;
