import type { LockNodeView } from "./types";

/**
 * The value a lock's page shows as leading where no value has a quorum: the one most of the nodes that answer
 * hold, the first node's on a tie, as the console merges the nodes' readings (`mergeSamples`); across every node
 * where none that answers holds one. Null when no node holds a value.
 */
export function leadingValue(nodes: readonly LockNodeView[]): string | null {
  return mostHeld(nodes.filter((n) => n.up)) ?? mostHeld(nodes);
}

function mostHeld(nodes: readonly LockNodeView[]): string | null {
  const counts = new Map<string, number>();
  for (const n of nodes) if (n.token !== null) counts.set(n.token, (counts.get(n.token) ?? 0) + 1);
  let best: string | null = null;
  let bestCount = 0;
  for (const [value, count] of counts) {
    if (count > bestCount) {
      best = value;
      bestCount = count;
    }
  }
  return best;
}
