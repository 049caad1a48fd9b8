import type { LockNodeView } from "./types";

/** The value held by the most nodes (first seen wins a tie), or null when no node holds one. */
export function prevailingValue(values: ReadonlyArray<string | null>): string | null {
  const counts = new Map<string, number>();
  for (const value of values) if (value !== null) counts.set(value, (counts.get(value) ?? 0) + 1);
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

/**
 * The value most of the nodes that answer hold where no value has a quorum, the first node's on a tie (the live
 * view names none on a tie the lock was not held with before: a split vote, see `Lock.leading`); across every node
 * where none that answers holds one. Null when no node holds a value.
 */
export function leadingValue(nodes: readonly LockNodeView[]): string | null {
  return prevailingValue(nodes.filter((n) => n.up).map((n) => n.token)) ?? prevailingValue(nodes.map((n) => n.token));
}
