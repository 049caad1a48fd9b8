import type { Lock } from "./locks/types";

/**
 * The lock-safety facts that alerts need, computed from what the live view and the node watchers already
 * know. Pure: the live view counts its locks by these rules as they change (`server/live/safety-ledger.ts`),
 * and `server/console-metrics.ts` exports the result with the nodes' facts at scrape time.
 */

export interface LockSafetyCounts {
  /** Present with no TTL: only a release ever ends it (a crashed holder keeps it forever). */
  withoutTtl: number;
  /** Held by fewer nodes than a quorum: nobody holds it in Redlock's sense, yet it blocks those nodes. */
  belowQuorum: number;
  /** Its TTL has run out and the key is still there. */
  pastTtl: number;
  /** Acquisition time (epoch ms) of the oldest present lock, whatever its state; null when none. */
  oldestAcquiredAt: number | null;
  /**
   * When the TTL of the lock longest past it ran out (epoch ms); null when none is. A lock ending by its TTL is
   * past it for the moment Redis takes to reclaim its key: under a flow of them `pastTtl` is above 0 at every
   * scrape, while this stays a moment ago; a lock stuck past its TTL makes it old.
   */
  oldestPastTtlAt: number | null;
}

/**
 * What counting needs of a lock (`acquiredAt` null or absent where unknown; state null: not listed; `unreadable`:
 * every node holding it cannot be read, its view is the last readings').
 */
type SafetyFacts = Pick<Lock, "resource" | "expiresAt"> & { state: Lock["state"] | null; acquiredAt?: number | null; unreadable?: boolean };

/**
 * What a lock counts as, as bits (`safetyFlags`). A lock key still present on some node is held by a quorum,
 * by fewer nodes, or past its TTL and not reclaimed; the contention lab's own locks are left out of the
 * counts (`COUNTED`), so they never page.
 */
export const SAFETY = Object.freeze({
  /** Present and not the lab's: what the counts and the oldest present lock are over. */
  COUNTED: 1,
  NO_TTL: 2,
  PARTIAL: 4,
  ELAPSED: 8,
  /** Held or elapsed, the lab's too: what the oldest-held gauge looks at. */
  HELD: 16,
});

/** The lock's `SAFETY` bits; 0 for a lock not present (ended, or not listed). */
export function safetyFlags(lock: Readonly<SafetyFacts>, isLab: (resource: string) => boolean): number {
  const state = lock.state;
  if (state !== "held" && state !== "partial" && state !== "elapsed") return 0;
  // Its TTL ran out while no node holding it can be read (down, or its slots unserved): Redis reclaims such a key by
  // itself, so nothing says it is still present. Counted, it would page as stuck past its TTL and held ever longer
  // for as long as the node is down, which the node and quorum alerts already say.
  if (state === "elapsed" && lock.unreadable === true) return 0;
  let flags = state === "partial" ? SAFETY.PARTIAL : SAFETY.HELD;
  if (state === "elapsed") flags |= SAFETY.ELAPSED;
  if (lock.expiresAt === null) flags |= SAFETY.NO_TTL;
  if (!isLab(lock.resource)) flags |= SAFETY.COUNTED;
  return flags;
}

/** Counts over the present locks, one at a time (see `safetyFlags`). */
export class LockSafetyTally {
  readonly counts: LockSafetyCounts = { withoutTtl: 0, belowQuorum: 0, pastTtl: 0, oldestAcquiredAt: null, oldestPastTtlAt: null };

  constructor(private readonly isLab: (resource: string) => boolean) {}

  add(lock: Readonly<SafetyFacts>): void {
    const flags = safetyFlags(lock, this.isLab);
    if (!(flags & SAFETY.COUNTED)) return;
    const counts = this.counts;
    if (flags & SAFETY.NO_TTL) counts.withoutTtl++;
    if (flags & SAFETY.PARTIAL) counts.belowQuorum++;
    if (flags & SAFETY.ELAPSED) {
      counts.pastTtl++;
      const expired = lock.expiresAt;
      if (expired !== null && (counts.oldestPastTtlAt === null || expired < counts.oldestPastTtlAt)) counts.oldestPastTtlAt = expired;
    }
    const at = lock.acquiredAt;
    if (at !== undefined && at !== null && (counts.oldestAcquiredAt === null || at < counts.oldestAcquiredAt)) counts.oldestAcquiredAt = at;
  }
}

/** Counts over the present locks; the contention lab's own locks (`isLab`) are left out, so they never page. */
export function lockSafetyCounts(locks: Iterable<SafetyFacts>, isLab: (resource: string) => boolean): LockSafetyCounts {
  const tally = new LockSafetyTally(isLab);
  for (const lock of locks) tally.add(lock);
  return tally.counts;
}

export interface NodeSafety {
  uptimeSec: number | null;
  /** Restarted (while watched) without persistence sooner than the longest TTL seen on it. */
  restartHazard: boolean | null;
  /** Node clock minus this console's, in ms. */
  clockSkewMs: number | null;
  longestTtlMs: number | null;
  /** `appendonly yes`; null when unknown. */
  aof: boolean | null;
  /** A non-empty `save` schedule; null when unknown. */
  rdb: boolean | null;
}

const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** Reads the watcher's per-node facts out of a health entry, tolerating any that are missing. */
export function readNodeSafety(entry: Readonly<Record<string, unknown>>): NodeSafety {
  const persistence = typeof entry.persistence === "object" && entry.persistence !== null ? (entry.persistence as Record<string, unknown>) : {};
  const appendonly = typeof persistence.appendonly === "string" ? persistence.appendonly : null;
  const save = typeof persistence.save === "string" ? persistence.save : null;
  return {
    uptimeSec: num(entry.uptimeSec),
    restartHazard: typeof entry.restartRisk === "boolean" ? entry.restartRisk : null,
    clockSkewMs: num(entry.clockSkewMs),
    longestTtlMs: num(entry.longestTtlMs),
    aof: appendonly === null ? null : appendonly === "yes",
    rdb: save === null ? null : save.trim() !== "",
  };
}
