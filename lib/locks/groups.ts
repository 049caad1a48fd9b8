import { isLive, type Lock, type LockState } from "./types";

/** The group of keys the pattern does not name (no match, an empty or over-long capture). */
export const OTHER_GROUP = "other";
const MAX_GROUP_LENGTH = 64;

/**
 * The group a lock key belongs to: the first capture group of the group pattern (`METRICS_GROUP_PATTERN`,
 * `lock:orders/42` → `lock:orders` by default), or `other`. `pattern` must not be global or sticky (`exec`
 * would keep state between keys).
 */
export function lockGroup(pattern: RegExp, resource: string): string {
  const match = pattern.exec(resource);
  const group = match ? (match[1] ?? match[0]) : "";
  return group === "" || group.length > MAX_GROUP_LENGTH ? OTHER_GROUP : group;
}

/** The pattern without a global or sticky flag, which would make `exec` stateful across keys. */
export function statelessPattern(pattern: RegExp): RegExp {
  return new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ""));
}

/** The few fields of one listed lock that grouping, search and sort read (never a whole `Lock`). */
export interface LockSummary {
  resource: string;
  state: LockState;
  acquiredAt: number | null;
  /** null: never expires by itself. */
  expiresAt: number | null;
  /** The value shown for it: the quorum's, else the most widely held one, else the one it ended with. */
  token: string | null;
  quorumHeld: number;
  /** Where the console can see them (engine telemetry, a library's queue); null where it cannot. */
  attemptsPerMin: number | null;
  waiters: number | null;
  /** The deployment the lock is on, where the console watches several (absent with one). */
  deployment?: string;
}

/** One row of the grouped view (`GET /api/locks/groups`). */
export interface LockGroup {
  group: string;
  /** Listed locks in the group, ended ones included while they linger. */
  locks: number;
  held: number;
  partial: number;
  elapsed: number;
  /** released, expired or force-released a moment ago, still listed. */
  ended: number;
  /** Sums over the locks whose contention can be seen; null when none of them can. */
  contention: { attemptsPerMin: number | null; waiters: number | null };
  /** The longest-held live lock: its resource, since when, and who holds it (as the locks table says it). */
  oldest: { resource: string; acquiredAt: number; holder: string | null; deployment?: string } | null;
  /** The live lock that expires first. */
  shortestTtl: { resource: string; expiresAt: number; deployment?: string } | null;
}

export const GROUP_SORTS = ["group", "locks", "held", "partial", "elapsed", "contention", "oldest", "ttl"] as const;
export type GroupSort = (typeof GROUP_SORTS)[number];

/** Sort keys of the server-paged lock list, one per column of the locks table. */
export const LOCK_SORTS = ["resource", "state", "holder", "nodes", "ttl", "heldFor", "fence", "contention"] as const;
export type LockSort = (typeof LOCK_SORTS)[number];

export type SortOrder = "asc" | "desc";

/** Folds lock summaries into one row per group (one pass; holder text is added by the caller for the winners only). */
export class GroupAggregator {
  private readonly groups = new Map<string, LockGroup>();

  constructor(private readonly groupOf: (resource: string) => string) {}

  /** `lock` may be reused by the caller once this returns. */
  add(lock: Readonly<LockSummary>): void {
    const name = this.groupOf(lock.resource);
    let row = this.groups.get(name);
    if (!row) {
      row = { group: name, locks: 0, held: 0, partial: 0, elapsed: 0, ended: 0, contention: { attemptsPerMin: null, waiters: null }, oldest: null, shortestTtl: null };
      this.groups.set(name, row);
    }
    row.locks += 1;
    if (lock.state === "held" || lock.state === "partial" || lock.state === "elapsed") row[lock.state] += 1;
    else row.ended += 1;
    if (lock.attemptsPerMin !== null) row.contention.attemptsPerMin = (row.contention.attemptsPerMin ?? 0) + lock.attemptsPerMin;
    if (lock.waiters !== null) row.contention.waiters = (row.contention.waiters ?? 0) + lock.waiters;
    if (!isLive(lock.state)) return;
    if (lock.acquiredAt !== null && (row.oldest === null || lock.acquiredAt < row.oldest.acquiredAt)) {
      row.oldest = { resource: lock.resource, acquiredAt: lock.acquiredAt, holder: null };
      if (lock.deployment !== undefined) row.oldest.deployment = lock.deployment;
    }
    if (lock.expiresAt !== null && (row.shortestTtl === null || lock.expiresAt < row.shortestTtl.expiresAt)) {
      row.shortestTtl = { resource: lock.resource, expiresAt: lock.expiresAt };
      if (lock.deployment !== undefined) row.shortestTtl.deployment = lock.deployment;
    }
  }

  rows(): LockGroup[] {
    return [...this.groups.values()];
  }
}

const STATE_ORDER: Record<LockState, number> = { partial: 0, elapsed: 1, held: 2, "force-released": 3, expired: 4, released: 5 };

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
/** Unknown figures (null) sort after every known one, whichever the order. */
const byNumber = (a: number | null, b: number | null, dir: number) => (a === null ? (b === null ? 0 : 1) : b === null ? -1 : (a - b) * dir);

/** Sorts groups in place by `key`, ties by name. */
export function sortGroups(rows: LockGroup[], key: GroupSort, order: SortOrder): LockGroup[] {
  const dir = order === "asc" ? 1 : -1;
  const value = (g: LockGroup): number | null => {
    switch (key) {
      case "group":
        return null;
      case "contention":
        return g.contention.attemptsPerMin;
      case "oldest":
        return g.oldest?.acquiredAt ?? null;
      case "ttl":
        return g.shortestTtl?.expiresAt ?? null;
      default:
        return g[key];
    }
  };
  return rows.sort((a, b) => (key === "group" ? byText(a.group, b.group) * dir : byNumber(value(a), value(b), dir) || byText(a.group, b.group)));
}

/** What sorting reads from a lock's value, decoded once per lock and only for the column sorted by. */
export interface ValueReaders {
  /** The holder text the table shows. */
  holder: (s: LockSummary) => string;
  /** The fencing token, null where the value carries none. */
  fence: (s: LockSummary) => number | null;
}

/**
 * The order of lock summaries by a table column, ties by resource, as a comparator (for `sortInSlices`).
 * "Held for" ascending is the shortest-held first.
 */
export function lockOrder(key: LockSort, order: SortOrder, read: ValueReaders): (a: LockSummary, b: LockSummary) => number {
  const dir = order === "asc" ? 1 : -1;
  let compare: (a: LockSummary, b: LockSummary) => number;
  switch (key) {
    case "resource":
      compare = () => 0;
      break;
    case "state":
      compare = (a, b) => (STATE_ORDER[a.state] - STATE_ORDER[b.state]) * dir;
      break;
    case "holder": {
      const text = new Map<LockSummary, string>();
      const of = (s: LockSummary) => text.get(s) ?? text.set(s, read.holder(s)).get(s) ?? "";
      compare = (a, b) => byText(of(a), of(b)) * dir;
      break;
    }
    case "fence": {
      const fences = new Map<LockSummary, number | null>();
      const of = (s: LockSummary) => (fences.has(s) ? (fences.get(s) ?? null) : fences.set(s, read.fence(s)).get(s) ?? null);
      compare = (a, b) => byNumber(of(a), of(b), dir);
      break;
    }
    case "nodes":
      compare = (a, b) => (a.quorumHeld - b.quorumHeld) * dir;
      break;
    case "ttl":
      compare = (a, b) => byNumber(a.expiresAt, b.expiresAt, dir);
      break;
    case "heldFor":
      compare = (a, b) => byNumber(a.acquiredAt === null ? null : -a.acquiredAt, b.acquiredAt === null ? null : -b.acquiredAt, dir);
      break;
    case "contention":
      compare = (a, b) => byNumber(a.attemptsPerMin, b.attemptsPerMin, dir);
      break;
  }
  const resourceDir = key === "resource" ? dir : 1;
  return (a, b) => compare(a, b) || byText(a.resource, b.resource) * resourceDir;
}

/** Elements sorted in one piece, and merged between two yields, by `sortInSlices`. */
const SORT_RUN = 20_000;

/**
 * What `rows.sort(compare)` gives (a stable sort), without holding the event loop for the whole of it: runs of
 * 20,000 are sorted one at a time, then merged two by two, with the loop free between runs and every 20,000
 * elements merged. A million rows take seconds to sort; a server sorting them in one go answers nothing else
 * meanwhile. Sorts `rows` in place.
 */
export async function sortInSlices<T>(rows: T[], compare: (a: T, b: T) => number): Promise<T[]> {
  if (rows.length <= SORT_RUN) return rows.sort(compare);
  const breathe = () => new Promise<void>((resolve) => setImmediate(resolve));
  let runs: T[][] = [];
  for (let i = 0; i < rows.length; i += SORT_RUN) {
    runs.push(rows.slice(i, i + SORT_RUN).sort(compare));
    await breathe();
  }
  while (runs.length > 1) {
    const merged: T[][] = [];
    for (let r = 0; r < runs.length; r += 2) {
      const a = runs[r]!;
      const b = runs[r + 1];
      if (b === undefined) {
        merged.push(a);
        continue;
      }
      const out = new Array<T>(a.length + b.length);
      let x = 0;
      let y = 0;
      let k = 0;
      let budget = SORT_RUN;
      while (x < a.length && y < b.length) {
        // Ties take the earlier run's element first: the merge keeps the sort stable.
        out[k++] = compare(a[x]!, b[y]!) <= 0 ? a[x++]! : b[y++]!;
        if (--budget === 0) {
          budget = SORT_RUN;
          await breathe();
        }
      }
      while (x < a.length) out[k++] = a[x++]!;
      while (y < b.length) out[k++] = b[y++]!;
      merged.push(out);
    }
    runs = merged;
  }
  const sorted = runs[0]!;
  for (let i = 0; i < sorted.length; i++) rows[i] = sorted[i]!;
  return rows;
}

/**
 * Above this many locks the Locks page shows one row per group, each group's locks paged from the server. Up to
 * it, the one virtualized table stays smooth with every lock in the tab (it is tested with 3,000 and churn).
 */
export const GROUPED_VIEW_ABOVE = 5_000;

/** Case-insensitive substring search on the resource and on the holder's value (label and host are in engine values). */
export function matchesSearch(s: Readonly<LockSummary>, needle: string): boolean {
  return s.resource.toLowerCase().includes(needle) || (s.token !== null && s.token.toLowerCase().includes(needle));
}

/** `GET /api/locks` when paged (group, q, sort, order or offset given). */
export interface LocksPage {
  serverTime: number;
  total: number;
  offset: number;
  locks: Lock[];
}

/** `GET /api/locks/groups`. */
export interface LockGroupsPage {
  serverTime: number;
  /** Listed locks over every group. */
  locks: number;
  /** Groups before paging. */
  total: number;
  offset: number;
  groups: LockGroup[];
}
