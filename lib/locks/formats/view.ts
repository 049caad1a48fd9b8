import { formatByName } from "./index";
import { keptHolders, type ContentionSource, type FormatHolder, type FormatName, type FormatReading, type Kept, type KeptReading, type LockWarning } from "./types";

/**
 * The bridge from per-node format readings to the merged lock (lib/locks/merge.ts): what the quorum vote
 * compares, and the format fields of the lock once the vote has picked a leading value. Pure.
 */

/** The per-node values and expiries `mergeSamples` takes: a node's fingerprint is its value. */
export function samplesOf(readings: ReadonlyArray<FormatReading | null>): { values: Array<string | null>; expiries: number[] } {
  return {
    values: readings.map((r) => (r ? r.fingerprint : null)),
    expiries: readings.map((r) => (r ? r.expiresAt : Number.NaN)),
  };
}

export interface FormatView {
  format: FormatName;
  redisType: string;
  holders: FormatHolder[];
  warnings: LockWarning[];
  /** `contention.waiters` where the layout shows them; null where they cannot be seen. */
  waiters: number | null;
  /** Where a contention figure can come from for this format; null: not visible. */
  contentionSource: ContentionSource | null;
  fence: string | null;
  acquiredAt: number | null;
}

/**
 * The format fields of a lock: from the nodes holding the leading fingerprint (or, without one, the first node
 * holding anything), warnings of any of them, the most waiters any of them shows.
 */
export function formatView(readings: ReadonlyArray<KeptReading | null>, leading: string | null): FormatView | null {
  const holding = readings.filter((r): r is KeptReading => r !== null && (leading === null || r.fingerprint === leading));
  const first = holding[0];
  if (!first) return null;
  const warnings: LockWarning[] = [];
  for (const r of holding) for (const w of r.warnings) if (!warnings.includes(w)) warnings.push(w);
  const counts = holding.map((r) => r.waiters).filter((w): w is number => w !== null);
  return {
    format: first.format,
    redisType: first.redisType,
    holders: keptHolders(first),
    warnings,
    waiters: counts.length > 0 ? Math.max(...counts) : null,
    contentionSource: formatByName(first.format).contention,
    fence: first.fence ?? null,
    acquiredAt: first.acquiredAt ?? null,
  };
}

/**
 * `formatView` of a lock's one kept reading (`formatView([keptReading(kept)], null)`), as every changed lock's
 * row is built: without the lists and copies that view of several readings makes (and, for a plain token,
 * without making its reading first).
 */
export function keptView(kept: Kept): FormatView {
  if (typeof kept === "string") {
    return { format: "token", redisType: "string", holders: [{ id: kept }], warnings: [], waiters: null, contentionSource: formatByName("token").contention, fence: null, acquiredAt: null };
  }
  const warnings: LockWarning[] = [];
  for (const w of kept.warnings) if (!warnings.includes(w)) warnings.push(w);
  return {
    format: kept.format,
    redisType: kept.redisType,
    holders: keptHolders(kept),
    warnings,
    waiters: kept.waiters,
    contentionSource: formatByName(kept.format).contention,
    fence: kept.fence ?? null,
    acquiredAt: kept.acquiredAt ?? null,
  };
}
