/**
 * Key names the engine uses besides the lock key itself. The lock key is the resource name, unchanged, as
 * node-redlock does, so both engines exclude each other. Every companion key starts with a prefix that
 * the console's default lock patterns (`lock:*`, `locks:*`) do not match, so they never show up as locks.
 *
 * These prefixes are also written literally inside the Lua scripts (which derive a companion key from the
 * resource on the node); change them together.
 */

/** Per-resource fence counter: the highest fence this node has seen recorded for the resource. */
export const FENCE_KEY_PREFIX = "fence:";
/** Waiter queue: a sorted set of waiter ids scored by arrival time (epoch ms). */
export const WAIT_QUEUE_KEY_PREFIX = "waitq:";
/** Waiter liveness: a sorted set of waiter ids scored by the time (epoch ms) they stop counting. */
export const WAIT_DEADLINE_KEY_PREFIX = "waitqd:";
/**
 * Grant tickets: a hash of waiter id -> `<valid until epoch ms>|<attempt>|<ttl ms>|<lock value>`, left by a
 * refused single-resource attempt; the release that finds that waiter at the head of the queue writes the
 * lock in its value (see HAND_OVER_LUA in shared.lua.ts).
 */
export const WAIT_TICKET_KEY_PREFIX = "waitqg:";
/** Fenced writes: the highest fence that wrote to a data key. */
export const LAST_FENCE_KEY_PREFIX = "fence-seen:";

export const fenceKey = (resource: string): string => FENCE_KEY_PREFIX + resource;
export const waitQueueKey = (resource: string): string => WAIT_QUEUE_KEY_PREFIX + resource;
export const waitDeadlineKey = (resource: string): string => WAIT_DEADLINE_KEY_PREFIX + resource;
export const waitTicketKey = (resource: string): string => WAIT_TICKET_KEY_PREFIX + resource;
export const lastFenceKey = (key: string): string => LAST_FENCE_KEY_PREFIX + key;
