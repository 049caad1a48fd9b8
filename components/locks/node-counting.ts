import type { Lock, WatcherStatus } from "@/lib/locks/types";

/** Each node's `counted` (see `WatcherStatus.counted`), by `deployment\0node` (an empty deployment where the console watches one). */
export type NodeCountingMap = ReadonlyMap<string, boolean>;

export function nodeCounting(statuses: readonly WatcherStatus[]): NodeCountingMap {
  const out = new Map<string, boolean>();
  // (A status without the field, from an older console behind the same address, says nothing either way.)
  for (const s of statuses) if (typeof s.counted === "boolean") out.set(`${s.deployment ?? ""}\u0000${s.nodeId}`, s.counted);
  return out;
}

/**
 * The lock's nodes as they stand now. A lock is sent again when a node it is held on stops or starts counting,
 * not when any node does: a node that does not count now is down, its value unknown; one that counts again,
 * shown down in a message from while it was away, holds nothing of this lock (had it held it, the lock would
 * have changed and been sent again).
 */
export function nodesNow(lock: Lock, counting: NodeCountingMap): Lock["nodes"] {
  if (counting.size === 0) return lock.nodes;
  let changed = false;
  const nodes = lock.nodes.map((node) => {
    const counted = counting.get(`${lock.deployment}\u0000${node.id}`) ?? counting.get(`\u0000${node.id}`);
    if (counted === false && node.up) {
      changed = true;
      return { ...node, up: false, token: null, pttlMs: null };
    }
    if (counted === true && !node.up) {
      changed = true;
      return { ...node, up: true, token: null, pttlMs: null };
    }
    return node;
  });
  return changed ? nodes : lock.nodes;
}
