import type { Kept } from "./formats/types";
import { isLive, STATE_ORDER, type Lock, type LockState, type WatcherStatus } from "./types";

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
  /**
   * The format's reading the lock keeps (its layout and holders, as its row shows them: see `holderTextOf`); null
   * or absent before any.
   */
  reading?: Kept | null;
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
  /** released, expired, force-released or lost a moment ago, still listed. */
  ended: number;
  /** Sums over the locks whose contention can be seen; null when none of them can. */
  contention: { attemptsPerMin: number | null; waiters: number | null };
  /** The longest-held live lock: its resource, since when, and who holds it (as the locks table says it). */
  oldest: { resource: string; acquiredAt: number; holder: string | null; deployment?: string } | null;
  /** The live lock that expires first. */
  shortestTtl: { resource: string; expiresAt: number; deployment?: string } | null;
}

export const GROUP_SORTS = ["group", "locks", "held", "partial", "elapsed", "ended", "contention", "oldest", "ttl"] as const;
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

/** Code-unit order of two texts (resources are sorted by it). */
export const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
/** Unknown figures (null) sort after every known one, whichever the order. */
const byNumber = (a: number | null, b: number | null, dir: number) => (a === null ? (b === null ? 0 : 1) : b === null ? -1 : (a - b) * dir);

/** Sorts groups in place by `key`, ties by name. */
export function sortGroups(rows: LockGroup[], key: GroupSort, order: SortOrder): LockGroup[] {
  return rows.sort(groupOrder(key, order));
}

/** Two groups in the order of `key`, ties by name (see `sortGroups`). */
export function groupOrder(key: GroupSort, order: SortOrder): (a: LockGroup, b: LockGroup) => number {
  const dir = order === "asc" ? 1 : -1;
  const value = (g: LockGroup): number | null => {
    switch (key) {
      case "group":
        return null;
      case "contention":
        return g.contention.attemptsPerMin;
      case "oldest":
        // As its column reads, how long the oldest holder has held (as "held for" sorts a group's locks): ascending
        // is the shortest-held first, the latest acquisition.
        return g.oldest ? -g.oldest.acquiredAt : null;
      case "ttl":
        return g.shortestTtl?.expiresAt ?? null;
      default:
        return g[key];
    }
  };
  return (a, b) => (key === "group" ? byText(a.group, b.group) * dir : byNumber(value(a), value(b), dir) || byText(a.group, b.group));
}

/**
 * Two fencing tokens (decimal digits) compared as the numbers they are, of any size (a fence may pass 2^53,
 * where JavaScript numbers stop telling integers apart; Redis counts to 2^63).
 */
export function byFence(a: string, b: string): number {
  // (Called for every comparison of a sort: leading zeros, which no engine writes, are dropped only where there are some.)
  const x = a.length > 1 && a.charCodeAt(0) === 48 ? a.replace(/^0+(?=\d)/, "") : a;
  const y = b.length > 1 && b.charCodeAt(0) === 48 ? b.replace(/^0+(?=\d)/, "") : b;
  return x.length - y.length || (x < y ? -1 : x > y ? 1 : 0);
}

/** What sorting reads from a lock's value, decoded once per lock and only for the column sorted by. */
export interface ValueReaders {
  /** The holder text the table shows. */
  holder: (s: LockSummary) => string;
  /** The fencing token as its decimal digits (a fence may pass 2^53: Redis counts to 2^63), null where the value carries none. */
  fence: (s: LockSummary) => string | null;
}

/**
 * Where a page of the server-paged list ended: the last row's figure sorted by (as the list had it; null where
 * unknown, and always null by `resource`), its resource and its deployment. The next page is the rows after it in
 * the list's order (`after`), wherever that row is by then: pages read in turn while locks come and go neither
 * repeat a lock nor skip one that stayed, as pages read by offset did (a lock taken or ended ahead of the
 * viewer's place moved every row after it).
 */
export interface PageCursor {
  value: number | string | null;
  /** The last row's key; only its beginning where `keyDigest` is given. */
  resource: string;
  deployment: string | null;
  /** Where the key was too long to carry whole in a URL: the SHA-256 (base64url) of the whole key. */
  keyDigest?: string;
}

/** The kind of figure a sort's cursor carries: none (by resource), a number, or a text. */
export function cursorKind(sort: LockSort): "none" | "number" | "text" {
  return sort === "resource" ? "none" : sort === "holder" || sort === "fence" ? "text" : "number";
}

/**
 * A query's locks for one sort, as columns: each lock's resource and deployment (what its row is built from
 * when a page is served) and the one figure it is sorted by; the order is a list of row numbers. No object per
 * lock: a list of a million locks lives as long as it is reused (seconds), and as a million copied summaries
 * it was a million objects for every full collection to mark meanwhile, in a heap that grew by as much.
 */
export class LockColumns {
  /** The store's own key strings (nothing copied). */
  readonly resources: string[] = [];
  readonly deployments: Array<string | undefined> = [];
  /** The figure sorted by, where it is a number: NaN where unknown (V8 keeps an array of doubles unboxed). */
  private readonly numbers: number[] = [];
  /** The figure sorted by, where it is a text (the holder; a fence's digits). */
  private readonly texts: string[] = [];

  constructor(
    private readonly key: LockSort,
    private readonly read: ValueReaders,
  ) {}

  get length(): number {
    return this.resources.length;
  }

  add(s: Readonly<LockSummary>): void {
    this.resources.push(s.resource);
    this.deployments.push(s.deployment);
    switch (this.key) {
      case "resource":
        return;
      case "holder":
        this.texts.push(this.read.holder(s));
        return;
      case "state":
        this.numbers.push(STATE_ORDER[s.state]);
        return;
      case "fence":
        this.texts.push(this.read.fence(s) ?? "");
        return;
      case "nodes":
        this.numbers.push(s.quorumHeld);
        return;
      case "ttl":
        // An ended lock keeps its last holder's expiry, which its row no longer shows (—): unknown, as no TTL is.
        this.numbers.push(isLive(s.state) && s.expiresAt !== null ? s.expiresAt : Number.NaN);
        return;
      case "heldFor":
        // "Held for" ascending is the shortest-held first: the latest acquisition. An ended lock is held by nobody.
        this.numbers.push(isLive(s.state) && s.acquiredAt !== null ? -s.acquiredAt : Number.NaN);
        return;
      case "contention":
        this.numbers.push(s.attemptsPerMin ?? Number.NaN);
        return;
    }
  }

  /** Where a page ending at `row` ended (see `PageCursor`). */
  cursorOf(row: number): PageCursor {
    const resource = this.resources[row] as string;
    const deployment = this.deployments[row] ?? null;
    switch (cursorKind(this.key)) {
      case "none":
        return { value: null, resource, deployment };
      case "text": {
        const text = this.texts[row] as string;
        // No fence is kept as "" (after every fence).
        return { value: this.key === "fence" && text === "" ? null : text, resource, deployment };
      }
      case "number": {
        const n = this.numbers[row] as number;
        return { value: Number.isNaN(n) ? null : n, resource, deployment };
      }
    }
  }

  /**
   * The position in `sorted` (this list's rows sorted by `compare(order)`) of the first row that comes after
   * `cursor` in that order: where the page after one that ended at `cursor` starts.
   */
  firstAfter(sorted: readonly number[], order: SortOrder, cursor: PageCursor): number {
    // The cursor is compared as one more row, there only while this (synchronous) search runs.
    const at = this.length;
    this.resources.push(cursor.resource);
    this.deployments.push(cursor.deployment ?? undefined);
    const kind = cursorKind(this.key);
    if (kind === "number") this.numbers.push(typeof cursor.value === "number" ? cursor.value : Number.NaN);
    if (kind === "text") this.texts.push(typeof cursor.value === "string" ? cursor.value : "");
    try {
      const compare = this.compare(order);
      let lo = 0;
      let hi = sorted.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (compare(sorted[mid] as number, at) <= 0) lo = mid + 1;
        else hi = mid;
      }
      return lo;
    } finally {
      this.resources.pop();
      this.deployments.pop();
      if (kind === "number") this.numbers.pop();
      if (kind === "text") this.texts.pop();
    }
  }

  /** Every row's number, in the order added (to be sorted with `compare`). */
  rows(): number[] {
    return Array.from({ length: this.length }, (_, i) => i);
  }

  /**
   * Rows compared by the column in `order`, ties by resource, then (the same resource on several deployments) by
   * deployment, both ascending in either order, as the table of a small fleet sorts them; unknown figures after
   * every known one, in either order.
   */
  compare(order: SortOrder): (i: number, j: number) => number {
    const dir = order === "asc" ? 1 : -1;
    const { resources, deployments, numbers, texts } = this;
    const byDeployment = (i: number, j: number) => byText(deployments[i] ?? "", deployments[j] ?? "");
    const byResource = (i: number, j: number) => byText(resources[i] as string, resources[j] as string) || byDeployment(i, j);
    switch (this.key) {
      case "resource":
        return (i, j) => byText(resources[i] as string, resources[j] as string) * dir || byDeployment(i, j);
      case "holder":
        return (i, j) => byText(texts[i] as string, texts[j] as string) * dir || byResource(i, j);
      case "fence":
        // None after every fence, in either order.
        return (i, j) => {
          const a = texts[i] as string;
          const b = texts[j] as string;
          if (a === "" || b === "") return (a === "" ? (b === "" ? 0 : 1) : -1) || byResource(i, j);
          return byFence(a, b) * dir || byResource(i, j);
        };
      case "state":
      case "nodes":
        return (i, j) => ((numbers[i] as number) - (numbers[j] as number)) * dir || byResource(i, j);
      default:
        return (i, j) => {
          const a = numbers[i] as number;
          const b = numbers[j] as number;
          return (Number.isNaN(a) ? (Number.isNaN(b) ? 0 : 1) : Number.isNaN(b) ? -1 : (a - b) * dir) || byResource(i, j);
        };
    }
  }
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

/**
 * Rows of a group's table the browser scrolls through at once; a larger group is shown a range of this many at
 * a time. At 38 px a row a million rows would be 38 million px, more than a browser lays out (Chromium stops at
 * about 33.5 million, so the last rows could not be scrolled to), and the table's scroll bookkeeping is a pass
 * over every row each time the count changes (124 ms for a million rows in a tab on a slow machine).
 */
export const GROUP_ROWS_WINDOW = 100_000;

/**
 * The range of a group's `total` rows shown from `start`: `start` rounded down to a multiple of `size`, and
 * moved back to the last range when the group has shrunk below it.
 */
export function rowsWindow(total: number, start: number, size = GROUP_ROWS_WINDOW): { start: number; count: number } {
  if (total <= 0) return { start: 0, count: 0 };
  const last = Math.floor((total - 1) / size) * size;
  const first = Math.min(last, Math.max(0, Math.floor(start / size) * size));
  return { start: first, count: Math.min(size, total - first) };
}

/**
 * A search (`needle`, lower-cased): a case-insensitive substring of the resource or of what `searched` gives
 * for the lock (the holder as the table shows it, and what else of the value a search may find).
 */
export function matchesSearch(s: Readonly<LockSummary>, needle: string, searched: (s: Readonly<LockSummary>) => string): boolean {
  return s.resource.toLowerCase().includes(needle) || searched(s).toLowerCase().includes(needle);
}

/** `GET /api/locks` when paged (group, q, sort, order or offset given). */
export interface LocksPage {
  serverTime: number;
  total: number;
  /** Where in the list (as it is now) the page starts. */
  offset: number;
  locks: Lock[];
  /** Where to read the next page from (`after`), null when the list ends with this page. */
  next: string | null;
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
  /**
   * The watchers' statuses (as `GET /api/locks` gives them) when the figures were counted: a node that was being
   * read then (`reading`: at start-up, after a reconnect) held locks the figures lack.
   */
  nodes: WatcherStatus[];
}
