import type { ResolvedSettings } from "./settings.ts";
import { HAND_OVER_LUA, LEAVE_QUEUE_FN_LUA, NOW_MS_LUA, PUBLISH_RELEASE_LUA, QUEUE_HEAD_LUA, QUEUE_KEYS_WRONG_LUA } from "./shared.lua.ts";

/**
 * Takes every resource on this node, or none: the check and the SETs run in one script, so two
 * acquisitions of overlapping resource sets cannot interleave on a node.
 *
 * KEYS: the resources (each lock key is the resource name itself, as node-redlock's, so the two engines
 *   exclude each other on the same keys).
 * ARGV[1]: the value, an engine value `lk1:<id>:<arrival base36>:...` (unique token, holder identity).
 * ARGV[2]: TTL in ms.
 * ARGV[3]: mode: "" (a plain acquisition), or flags, then ":<queue entry ms>" when "q" or "r" is set and
 *   ":<ticket ms>" after it when "g" is: "f" fenced (report this node's fence and fence marker), "t"
 *   publish a refusal on the contention channel, "q" waiter (join the resource's waiter queue when
 *   refused, so a release hands the lock on, or wakes waiters, one at a time in arrival order), "r" fair
 *   (like "q", and a free resource is only taken by the head of its queue), "w" an earlier attempt of
 *   this acquisition was refused (it may be queued here: leave the queue on success), "g" (with "q" or
 *   "r", one resource) leave a grant ticket when refused: the release that finds this waiter at the head
 *   of the queue writes the lock in its value (see HAND_OVER_LUA), if the ticket is not older than its
 *   ticket ms. A queued refusal without "g" (the last attempt) removes an earlier attempt's ticket.
 * ARGV[4]: the attempt number (in the contention message and the grant ticket).
 * Replies: 1 taken; {0, i, holder value or nil, pttl} resource i is held; {2, i, head id} fair mode:
 * resource i is free but another waiter is ahead in its queue. Fenced ("f"), every reply is a table and
 * ends with this node's highest fence for the resources ("0" for none) and its fence marker (nil when it
 * has none): {1, fence, marker}, {0, i, value, pttl, fence, marker}, {2, i, head, fence, marker}; and
 * {3, i} when the fence key of resource i is damaged (nothing was written).
 * An error reply (WRONGTYPE) when a queue key the script would write holds another type: nothing written.
 *
 * This runs for every acquisition that is not a plain first try, so the common case (one resource, free)
 * is one SET NX and nothing else; the refusal path (telemetry, queue) only runs when refused.
 */
export const ACQUIRE_LUA = `
local value, ttl, mode, attempt = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local fair = mode ~= "" and string.find(mode, "r", 1, true) ~= nil
-- "lk1:<id>:": every value this acquisition writes starts with it (a fenced one is rewritten with its fence).
local mine = string.sub(value, 1, 21)
-- Set when refused: the resource that refused and the reply.
local refused, reply = nil, nil
-- Fenced: this node's fence knowledge is read before anything is written (every reply carries it, a
-- refusal too: the client needs the fences of every node that answers, not only of those that grant).
-- Written out rather than with helper functions: a Lua function is a closure made on every call, and
-- this runs on every fenced attempt. Fences are canonical decimals compared as strings (see
-- FENCE_OLDER_LUA); a fence key that holds anything else is damaged, and this node can vouch for nothing.
local fence, marker = nil, false
if mode ~= "" and string.find(mode, "f", 1, true) then
  fence = "0"
  for i, key in ipairs(KEYS) do
    local f = redis.pcall("GET", "fence:" .. key)
    if f ~= false then
      if type(f) ~= "string" or #f > 40 or not (f == "0" or string.match(f, "^[1-9]%d*$")) then return {3, i} end
      if #f > #fence or (#f == #fence and f > fence) then fence = f end
    end
  end
  marker = redis.pcall("GET", "lockscope:fence-epoch")
  if type(marker) ~= "string" then marker = false end
end
-- Queue keys are checked before the first write of any path that writes them (fair mode hands over and
-- prunes, a later attempt leaves the queue when it wins, a refusal joins it).
local queued = mode ~= "" and (fair or string.find(mode, "q", 1, true) ~= nil)
local checked = false
if fair or (queued and string.find(mode, "w", 1, true)) then
  ${QUEUE_KEYS_WRONG_LUA}
  local refusal = queue_keys_refusal(KEYS)
  if refusal then return refusal end
  checked = true
end

if #KEYS == 1 and not fair then
  local key = KEYS[1]
  if not redis.call("SET", key, value, "NX", "PX", ttl) then
    local held = redis.pcall("GET", key)
    -- Our own value counts as free: a release granted it to us (HAND_OVER_LUA, maybe since rewritten with
    -- a fence), or an earlier attempt of this acquisition timed out on the client but was applied here;
    -- taking it again just renews it.
    if held == value or (type(held) == "string" and string.sub(held, 1, 21) == mine) then
      redis.call("SET", key, value, "PX", ttl)
    else
      if type(held) == "table" then held = false end -- not a string: held by something, value unreadable
      refused, reply = key, {0, 1, held, redis.call("PTTL", key)}
    end
  end
else
  local own = {}
  for i, key in ipairs(KEYS) do
    local held = redis.pcall("GET", key)
    own[i] = held == value or (type(held) == "string" and string.sub(held, 1, 21) == mine)
    if held ~= false and not own[i] then
      if type(held) == "table" then held = false end
      refused, reply = key, {0, i, held, redis.call("PTTL", key)}
      break
    end
  end
  if fair and not refused then
    ${NOW_MS_LUA}
    ${QUEUE_HEAD_LUA}
    ${PUBLISH_RELEASE_LUA}
    ${HAND_OVER_LUA}
    local now, id = now_ms(), string.sub(value, 5, 20)
    for i, key in ipairs(KEYS) do
      -- (Already ours, granted by a release: the queue no longer lists us there, and it stays ours.)
      local head = own[i] and "" or queue_head(key, now)
      if head ~= "" and head ~= id then
        -- Free, but reserved for the head, which has not taken it (it was woken and has not come yet, or
        -- the holder's key expired instead of being released): hand it over now rather than leave it idle
        -- until the head's next attempt.
        hand_over(key, now)
        refused, reply = key, {2, i, head}
        break
      end
    end
  end
  if not refused then
    for _, key in ipairs(KEYS) do
      redis.call("SET", key, value, "PX", ttl)
    end
  end
end

if refused then
  -- The helper functions are defined here, on the refusal path only: a Lua function defined at the top
  -- is a closure made on every call, which measurably slows the common case.
  if queued and not checked then
    ${QUEUE_KEYS_WRONG_LUA}
    local refusal = queue_keys_refusal(KEYS)
    if refusal then return refusal end
  end
  ${NOW_MS_LUA}
  local now = now_ms()
  -- A refused attempt is announced from here, not by the client, so contention costs no extra round
  -- trip and shows up for every process that uses the engine.
  if string.find(mode, "t", 1, true) then
    redis.call("PUBLISH", "lockscope:contention",
      "c1|" .. attempt .. "|" .. string.format("%.0f", now) .. "|" .. value .. "|" .. refused)
  end
  -- A waiter joins the queues of all its resources at its first refusal. Entries are scored by the
  -- waiter's own arrival time (read from its value: the same number on every node), so all nodes order
  -- the queue alike and agree on whose turn it is.
  if queued then
    local id = string.sub(value, 5, 20)
    local arrival = tonumber(string.match(value, "^lk1:[^:]*:([0-9a-z]+)"), 36)
    local entry, ticket = string.match(mode, ":(%d+):?(%d*)$")
    entry = tonumber(entry)
    -- The queue keys live as long as their longest-lived entry (engines may be configured differently, so
    -- a lifetime only ever grows): when every waiter stopped asking (crashed, or gave up without reaching
    -- this node), they go away on their own rather than stay for good.
    local function keep(queue_key)
      if redis.call("PTTL", queue_key) < entry then redis.call("PEXPIRE", queue_key, entry) end
    end
    for _, key in ipairs(KEYS) do
      redis.call("ZADD", "waitq:" .. key, "NX", arrival, id)
      keep("waitq:" .. key)
      redis.call("ZADD", "waitqd:" .. key, now + entry, id)
      keep("waitqd:" .. key)
    end
    -- The grant ticket: until when this waiter counts as alive enough to be handed the lock, the attempt
    -- the grant answers (the waiter measures validity from that attempt's start), its TTL and its value.
    if ticket ~= "" then
      redis.call("HSET", "waitqg:" .. KEYS[1], id, string.format("%.0f", now + tonumber(ticket)) .. "|" .. attempt .. "|" .. ttl .. "|" .. value)
      keep("waitqg:" .. KEYS[1])
    else
      -- The last attempt leaves no ticket, and takes back the one its previous attempt left: nobody will
      -- wait for a grant to it, and a release must not write the lock in a value nobody holds.
      for _, key in ipairs(KEYS) do redis.call("HDEL", "waitqg:" .. key, id) end
    end
  end
  if fence then
    reply[#reply + 1] = fence
    reply[#reply + 1] = marker
  end
  return reply
end

if mode == "" then return 1 end
if string.find(mode, "w", 1, true) then
  local id = string.sub(value, 5, 20)
  ${LEAVE_QUEUE_FN_LUA}
  for _, key in ipairs(KEYS) do leave_queue(key, id) end
end
-- Fenced: the client takes the highest fence over every node that answered (a quorum of them with
-- their marker) and adds one; it then records that fence on a quorum (commit-fence) before handing the
-- lock out.
if fence then return {1, fence, marker} end
return 1
`;

/**
 * @internal The acquire script's mode argument for each combination of (fenced, fair, later attempt, one
 * resource and more attempts to come), built once per engine: index `(fenced ? 1 : 0) | (fair ? 2 : 0) |
 * (later ? 4 : 0) | (ticket ? 8 : 0)`.
 */
export function acquireModes(settings: ResolvedSettings): readonly string[] {
  // The longest a live waiter goes between two attempts (each refreshes its queue entry and its ticket):
  // its retry delay, plus a round that waits for a slow node, the release of a partial lock after it,
  // and the extra wait for grants still on their way (see sleepUnlessWoken).
  const betweenAttemptsMs = settings.retryDelayMs + settings.retryJitterMs + 3 * settings.nodeTimeoutMs;
  // The entry must outlive the longest pause between attempts.
  const queueEntryMs = Math.max(1000, 3 * betweenAttemptsMs);
  const modes: string[] = [];
  for (let index = 0; index < 16; index++) {
    const fenced = (index & 1) !== 0;
    const fair = (index & 2) !== 0;
    const later = (index & 4) !== 0;
    // Waiters join the resource's queue when refused: a release then hands the lock over to the one that
    // came first (or wakes it) instead of waking all of them at once (a stampede of attempts that mostly
    // fail). Fair mode also reserves a free resource for the head of its queue. From the second attempt
    // on, the waiter may be queued on a node: "w" makes taking the lock there leave the queue in the same
    // script.
    const queued = fair || settings.wakeOnRelease;
    // A grant ticket (one resource, not the last attempt): the release writes the lock in this waiter's
    // value, so the hand-over costs no round trip. It is honoured only while the waiter is known to be
    // alive (it asked within the longest pause between attempts), so a crashed waiter is not handed a lock
    // it would sit on; a last attempt leaves none, since nobody would be waiting for the grant.
    const ticket = queued && settings.wakeOnRelease && (index & 8) !== 0;
    const flags = `${fenced ? "f" : ""}${settings.telemetry ? "t" : ""}${queued ? (fair ? "r" : "q") : ""}${queued && later ? "w" : ""}${ticket ? "g" : ""}`;
    modes.push(queued ? `${flags}:${queueEntryMs}${ticket ? `:${betweenAttemptsMs}` : ""}` : flags);
  }
  return Object.freeze(modes);
}

