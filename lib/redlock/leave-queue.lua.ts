import { HAND_OVER_LUA, LEAVE_QUEUE_FN_LUA, NOW_MS_LUA, PUBLISH_RELEASE_LUA, QUEUE_HEAD_LUA, QUEUE_KEYS_WRONG_LUA } from "./shared.lua.ts";

/**
 * A waiter that gives up (or that got the lock on a quorum while still queued on other nodes) leaves the
 * queues, so it does not block the waiters behind it until its entry lapses.
 * KEYS: the resources. ARGV[1]: the waiter id. ARGV[2] (optional, when giving up): its lock value: a
 * release may have granted it the lock meanwhile (HAND_OVER_LUA); that lock (the value, or the same
 * acquisition's value rewritten with a fence) is deleted and handed on. ARGV[3] (optional): "1" to publish
 * the give-up on the contention channel, once per resource (see GAVE_UP_PREFIX in telemetry.ts).
 */
export const LEAVE_QUEUE_LUA = `
${QUEUE_KEYS_WRONG_LUA}
local id, value, announce, granted = ARGV[1], ARGV[2], ARGV[3] == "1", nil
-- Checked before anything is written (see QUEUE_KEYS_WRONG_LUA).
local refusal = queue_keys_refusal(KEYS)
if refusal then return refusal end
${LEAVE_QUEUE_FN_LUA}
for _, key in ipairs(KEYS) do
  leave_queue(key, id)
  if announce then redis.call("PUBLISH", "lockscope:contention", "l1|" .. value .. "|" .. key) end
  local held = value and redis.pcall("GET", key)
  -- Ours: the value, or the same acquisition's value rewritten with a fence ("lk1:<id>:" in front).
  if type(held) == "string" and string.sub(held, 1, 21) == string.sub(value, 1, 21) then
    redis.call("DEL", key)
    granted = granted or {}
    granted[#granted + 1] = key
  end
end
if granted then
  ${NOW_MS_LUA}
  ${QUEUE_HEAD_LUA}
  ${PUBLISH_RELEASE_LUA}
  ${HAND_OVER_LUA}
  local now = now_ms()
  for _, key in ipairs(granted) do hand_over(key, now) end
end
return 1
`;
