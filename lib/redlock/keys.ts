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
/**
 * One per node, no TTL: present while the node's `fence:*` keys can be trusted. A node that came back
 * empty (or never took part in fencing) lacks it, and its fences do not count until it has been re-seeded
 * from the others (see reseed.ts). Its value is a random id, so a reader can tell that a node was
 * re-seeded (lost its data and got a new marker) between two of its reads.
 */
export const FENCE_MARKER_KEY = "lockscope:fence-epoch";
/** One per node while a re-seed of that node is under way: the re-seed's token (it expires on its own). */
export const FENCE_RESEED_KEY = "lockscope:fence-reseed";
/** Fenced writes: the highest fence that wrote to a data key. */
export const LAST_FENCE_KEY_PREFIX = "fence-seen:";

export const fenceKey = (resource: string): string => FENCE_KEY_PREFIX + resource;
export const waitQueueKey = (resource: string): string => WAIT_QUEUE_KEY_PREFIX + resource;
export const waitDeadlineKey = (resource: string): string => WAIT_DEADLINE_KEY_PREFIX + resource;
export const waitTicketKey = (resource: string): string => WAIT_TICKET_KEY_PREFIX + resource;
export const lastFenceKey = (key: string): string => LAST_FENCE_KEY_PREFIX + key;
