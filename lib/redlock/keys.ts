/**
 * Key names the engine uses besides the lock key itself. The lock key is the resource name, unchanged, as
 * node-redlock does, so both engines exclude each other. Every companion key starts with a prefix that
 * the console's default lock patterns (`lock:*`, `locks:*`) do not match, so they never show up as locks.
 *
 * These prefixes are also written literally inside the Lua scripts (which derive a companion key from the
 * resource on the node); change them together, and with `clusterScriptSource` below.
 *
 * On a Redis Cluster client (one node of the engine, single-instance locks sharded by key) every key a
 * script touches must be in the resource's hash slot: there the companion keys take the resource as their
 * hash tag (`fence:{lock:orders/42}`), or keep the resource's own tag (`fence:lock:{orders}/42`); see
 * `keyInSlotOf`. Elsewhere the layout is the plain one above, byte for byte.
 */
import { keyInSlotOf } from "./slot.ts";

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

/**
 * A companion key as the engine writes it on `layout`: the plain layout on independent nodes, in the
 * resource's slot on a cluster. Throws a TypeError for a resource no hash tag can follow on a cluster.
 */
export function companionKey(prefix: string, resource: string, layout: "plain" | "cluster" = "plain"): string {
  if (layout === "plain") return prefix + resource;
  const key = keyInSlotOf(prefix, resource);
  if (key === null) throw new TypeError(`Expected \`resource\` to have no \`}\` outside a hash tag on a cluster, got \`${resource}\` (string)`);
  return key;
}

/** The companion-key prefixes the scripts derive from a resource (see `clusterScriptSource`). */
const COMPANION_IN_LUA = /"(fence|waitq|waitqd|waitqg):" \.\. ([A-Za-z_]\w*(?:\[\w+\])?)/g;
const MARKER_IN_LUA = /redis\.pcall\("GET", "lockscope:fence-epoch"\)/g;

/**
 * @internal A script's source for a cluster client: every companion key the script derives from a
 * resource goes to the resource's slot (the Lua twin of `keyInSlotOf`: the resource's own hash tag when it
 * has one, else the resource as the tag), and the fence marker reads as present. A cluster keeps a
 * primary's data through its replicas rather than losing it on restart, and the marker is one key per
 * node, which no slot-bound script could read; so fences on a cluster are never re-seeded.
 */
export function clusterScriptSource(source: string): string {
  return source
    .replace(COMPANION_IN_LUA, (_all, prefix: string, resource: string) => `("${prefix}:" .. (string.find(${resource}, "^[^{]*{[^}]+}") and ${resource} or "{" .. ${resource} .. "}"))`)
    .replace(MARKER_IN_LUA, '"cluster"');
}
