import { byFence, byText, type LockSort } from "./groups";
import { holderText } from "./holder-text";
import { isLive, STATE_ORDER, type Lock } from "./types";

/**
 * Two locks in the order of column `key` (`dir` 1 ascending, -1 descending), as the locks table of a small fleet
 * sorts them in the browser. A figure that is unknown (no fence, no TTL, contention not visible, no acquisition
 * time; an ended lock's TTL and held for, which its row shows as —) comes after every known one in either order,
 * as a group's table sorts on the server (docs/api.md); texts (resource, holder) in code-unit order, as there: the
 * same locks sort alike in both tables.
 */
export function compareLocks(key: LockSort, a: Lock, b: Lock, dir: 1 | -1): number {
  const known = <T>(x: T | null, y: T | null, by: (x: T, y: T) => number) => (x === null ? (y === null ? 0 : 1) : y === null ? -1 : by(x, y) * dir);
  switch (key) {
    case "resource":
      return byText(a.resource, b.resource) * dir;
    case "state":
      return (STATE_ORDER[a.state] - STATE_ORDER[b.state]) * dir;
    case "holder":
      // Code-unit order, as the console sorts a group's holders (and every resource): a locale's order put
      // `alice` before `Bob` here and after it in a group's table, whose pages the console sorts by code units.
      return byText(holderText(a), holderText(b)) * dir;
    case "nodes":
      return (a.quorumHeld - b.quorumHeld) * dir;
    case "ttl":
      // An ended lock keeps its last holder's expiry, which its row no longer shows (—): unknown, as no TTL is.
      return known(isLive(a.state) ? a.expiresAt : null, isLive(b.state) ? b.expiresAt : null, (x, y) => x - y);
    case "heldFor":
      // "Held for" ascending is the shortest-held first: the latest acquisition. An ended lock is held by nobody.
      return known(isLive(a.state) ? (a.acquiredAt ?? null) : null, isLive(b.state) ? (b.acquiredAt ?? null) : null, (x, y) => y - x);
    case "fence":
      return known(a.fence, b.fence, byFence);
    case "contention":
      return known(a.contention.attemptsPerMin, b.contention.attemptsPerMin, (x, y) => x - y);
  }
}

/** The small table's rows in order: by the column, then by resource, then by deployment. */
export function sortLocks(locks: Lock[], key: LockSort, dir: 1 | -1): Lock[] {
  return locks.sort((a, b) => compareLocks(key, a, b, dir) || byText(a.resource, b.resource) || byText(a.deployment, b.deployment));
}
