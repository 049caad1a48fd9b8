import "server-only";
import {
  byText,
  GroupAggregator,
  groupOrder,
  lockGroup,
  OTHER_GROUP,
  LockColumns,
  matchesSearch,
  sortInSlices,
  statelessPattern,
  type GroupSort,
  type LockGroup,
  type LockGroupsPage,
  type LockSort,
  type LockSummary,
  type LocksPage,
  type PageCursor,
  type SortOrder,
} from "@/lib/locks/groups";
import { keptHolders, type Kept } from "@/lib/locks/formats/types";
import { holderSearchText, holderText, holderTextOf, type HolderParts } from "@/lib/locks/holder-text";
import { decodeHolder } from "@/lib/locks/merge";
import { firstInOrder, SortedStrings } from "@/lib/locks/sorted-strings";
import type { Lock, LockState, WatcherStatus } from "@/lib/locks/types";
import { cursorKey, encodeCursor } from "./paging-query";
import type { LockStore } from "./store";

/**
 * What the grouped view reads: one deployment's `LockStore`, or the locks of several composed
 * (server/live/deployments.ts), whose summaries then name their deployment.
 */
export interface GroupSource {
  summariesInSlices: LockStore["summariesInSlices"];
  lock(resource: string, now: number, deployment?: string): Lock | null;
}

/** Aggregates and sorted lists are reused this long: a table scrolled page by page costs one pass, not one per page. */
const REUSE_MS = 1_000;
/**
 * ...and at least this many times as long as they took to build, counted from when the build ended: a pass over
 * a million locks takes seconds, and a list that is stale as soon as it is made would be made again for every
 * page a viewer scrolls to, keeping the event loop busy with nothing else (every other request and the live
 * view waiting behind it). So rebuilding takes at most a fifth of the console's time, whatever the fleet's size;
 * the rows of a page are always read live, only their order and membership may be that old.
 */
const REUSE_PER_BUILD = 4;

/**
 * Until when a list asked for at `now` is reused: `madeAfterMs` after it was asked for it was made (its turn waited
 * for, see `BUILDS_AT_ONCE`, and its build), which took `tookMs`. Counted from when it was made: a list that
 * waited its turn longer than it is reused for was stale as it came, and made again for the next page asked.
 */
const reusedUntil = (now: number, madeAfterMs: number, tookMs: number) => now + madeAfterMs + Math.max(REUSE_MS, REUSE_PER_BUILD * tookMs);
/** Whether an aggregate or list made at `at` may still be served at `now`. */
function fresh<T extends { at: number; until: number }>(made: T | null | undefined, now: number): made is T {
  return made !== null && made !== undefined && now <= made.until && now >= made.at;
}

/** Sorted lists kept for reuse (one per search and sort a viewer is scrolling through). */
const KEPT_LISTS = 8;
/**
 * Passes over the locks run at once (the others wait their turn): each distinct search or sort is a pass, and
 * over a million locks a sorted list's columns take tens of megabytes, so a viewer typing, or a script cycling
 * searches, queues passes rather than running them all together.
 */
const BUILDS_AT_ONCE = 2;
/** Groups whose order by name is kept as their locks come and go, at most (the ones viewed last). */
const KEPT_ORDERS = 8;
/** A group's kept order is let go when no page of it was asked for this long. */
const ORDER_IDLE_MS = 5 * 60_000;
/** Pages that end this far into a group at most are served while its order is still sorted (see `pageFound`). */
const FOUND_PAGES_END = 2_000;
/** ...picked with this many names more than the page: those the store no longer lists are passed over. */
const FOUND_MARGIN = 64;

/**
 * A group's locks by name, kept up to date as locks join and leave the list (null while the first pass builds
 * it: what happens meanwhile waits in `pending`, the last word per lock).
 */
interface GroupOrder {
  set: SortedStrings | null;
  pending: Map<string, boolean> | null;
  usedAt: number;
  /** While the first sort runs: the group's names as its pass found them, in no order (see `pageFound`). */
  found: string[] | null;
  /** Settles once the pass has found the names (`found`). */
  passed: Promise<void>;
  pass: () => void;
}

/** The groups' rows over every lock (of one deployment, or all), and until when they are reused. */
interface GroupsAggregate {
  at: number;
  until: number;
  deployment: string | undefined;
  rows: LockGroupsPage["groups"];
  locks: number;
  /** The watchers' statuses as the pass began: a node being read then may hold locks the pass did not count. */
  nodes: WatcherStatus[];
  /**
   * The rows in the orders asked for (by sort, order and search), each sorted once while the rows are reused: where
   * the pattern makes a group of nearly every lock (keys such as `lock:job-42` under the default), there are as many
   * rows as locks, and a poll every 3 s sorting them all was a second of the event loop each.
   */
  sorted: Map<string, LockGroup[]>;
  /** The rows whose oldest holder has been read: only the rows served are (a `Lock` built per group was seconds). */
  holdersRead: Set<LockGroup>;
}

/** A query's locks (as columns), their order (row numbers), and until when it is reused. */
interface SortedList {
  at: number;
  until: number;
  columns: LockColumns;
  order: number[];
}

export interface LockQuery {
  group?: string;
  /** One deployment's locks only (where several are watched). */
  deployment?: string;
  q?: string;
  state?: LockState;
  sort: LockSort;
  order: SortOrder;
  /** Where the page starts: a position in the list, or (`after`) the row after where the page before ended. */
  offset: number;
  after?: PageCursor;
  limit: number;
}

export interface GroupQuery {
  q?: string;
  /** One deployment's locks only (where several are watched). */
  deployment?: string;
  sort: GroupSort;
  order: SortOrder;
  offset: number;
  limit: number;
}

/** The keys of `set` that begin with `prefix`, in order (those a long key's cursor may name). */
function* keysBeginning(set: SortedStrings, prefix: string): Generator<string> {
  for (let at = set.countBefore(prefix); at < set.size; at += 64) {
    for (const key of set.slice(at, 64)) {
      if (!key.startsWith(prefix)) return;
      yield key;
    }
  }
}

/** What a listed lock's kept reading says of its layout and holders, as its row (`Lock`) has them. */
function layoutOf(reading: Kept | null | undefined): Pick<HolderParts, "format" | "redisType" | "holders"> {
  if (reading === null || reading === undefined) return { format: "unknown", redisType: "none", holders: [] };
  if (typeof reading === "string") return { format: "token", redisType: "string", holders: [{ id: reading }] };
  return { format: reading.format, redisType: reading.redisType, holders: keptHolders(reading) };
}

/**
 * The holder text of a listed lock as its row shows it (`holderText`), from its summary: a Redisson lock's
 * `<client id> thread <n>`, a semaphore's holders, an engine value's `checkout (web-1 pid 42)`, else the raw value.
 */
function shownHolder(s: Readonly<LockSummary>, layout = layoutOf(s.reading)): string {
  // (A partial lock without a value is a split vote with no side ahead: see `Lock.leading`.)
  return holderTextOf({ ...layout, holder: () => decodeHolder(s.token).holder, raw: () => s.token, split: s.state === "partial" && s.token === null });
}

/** What a search matches of a lock's holder (`holderSearchText`: as the table of a small fleet filters). */
function searchedHolder(s: Readonly<LockSummary>): string {
  const layout = layoutOf(s.reading);
  return holderSearchText(shownHolder(s, layout), s.token, layout.format);
}

function fenceOfValue(value: string | null): string | null {
  const fence = value === null ? null : decodeHolder(value).fence;
  return fence === null || !/^\d+$/.test(fence) ? null : fence;
}

/**
 * The grouped view and the server-paged lock list over the store: one pass over its entries' summaries (never
 * a `Lock` per lock), results kept about a second so that scrolling and polling viewers share them; `Lock`s
 * are built only for the page served.
 */
export class LockGroups {
  readonly groupOf: (resource: string) => string;
  /** The groups' rows, by the deployment asked for (null: every deployment), reused as the sorted lists are. */
  private readonly groupsCache = new Map<string | null, GroupsAggregate>();
  private readonly lists = new Map<string, SortedList>();
  /** Aggregates and lists being built, by key: the requests that come meanwhile wait for the same build. */
  private readonly building = new Map<string, Promise<unknown>>();
  /** Builds running, and those waiting for their turn (see `BUILDS_AT_ONCE`). */
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  /** Groups viewed by name, kept in order as their locks come and go (only where the source tells of them). */
  private readonly orders = new Map<string, GroupOrder>();

  /**
   * `listed`: where the source tells of locks joining and leaving its list (one deployment's store), the
   * groups a viewer pages through by name keep their order as locks come and go, so that a page costs the
   * page, not a pass over every lock and a sort.
   */
  constructor(
    private readonly store: GroupSource,
    pattern: RegExp,
    private readonly listed: ((listener: (resource: string, listed: boolean) => void) => void) | null = null,
  ) {
    const stateless = statelessPattern(pattern);
    this.groupOf = (resource) => lockGroup(stateless, resource);
    listed?.((resource, isListed) => this.onListed(resource, isListed));
  }

  private onListed(resource: string, isListed: boolean): void {
    if (this.orders.size === 0) return;
    const order = this.orders.get(this.groupOf(resource));
    if (!order) return;
    if (order.pending) order.pending.set(resource, isListed);
    else if (isListed) order.set?.add(resource);
    else order.set?.delete(resource);
  }

  /**
   * The groups' rows. The aggregate behind them is one pass over every lock, in slices of 2,000 with the event
   * loop free between them (over a million locks in one go, it held up the live view and every request for
   * most of a second), shared by the requests that come while it runs and reused as the sorted lists are.
   */
  async groups(query: GroupQuery, now = Date.now(), statuses: () => WatcherStatus[] = () => []): Promise<LockGroupsPage> {
    let aggregate = this.groupsCache.get(query.deployment ?? null);
    if (!fresh(aggregate, now)) {
      const asked = performance.now();
      aggregate = await this.shared(JSON.stringify(["groups", query.deployment ?? null]), () => this.aggregate(query.deployment, now, asked, statuses));
    }
    const needle = query.q?.toLowerCase();
    const key = JSON.stringify([query.sort, query.order, needle ?? null]);
    let rows = aggregate.sorted.get(key);
    if (!rows) {
      const matching = needle ? aggregate.rows.filter((g) => g.group.toLowerCase().includes(needle)) : aggregate.rows.slice();
      rows = await sortInSlices(matching, groupOrder(query.sort, query.order));
      aggregate.sorted.set(key, rows);
      while (aggregate.sorted.size > KEPT_LISTS) aggregate.sorted.delete(aggregate.sorted.keys().next().value as string);
    }
    const served = rows.slice(query.offset, query.offset + query.limit);
    for (const row of served) this.readHolder(aggregate, row, now);
    return { serverTime: now, locks: aggregate.locks, total: rows.length, offset: query.offset, groups: served, nodes: aggregate.nodes };
  }

  /** Names the oldest holder of a row about to be served, as the locks table names it (once per row and aggregate). */
  private readHolder(aggregate: GroupsAggregate, row: LockGroup, now: number): void {
    if (row.oldest === null || aggregate.holdersRead.has(row)) return;
    aggregate.holdersRead.add(row);
    const oldest = this.store.lock(row.oldest.resource, now, row.oldest.deployment);
    if (oldest) row.oldest.holder = holderText(oldest);
  }

  private async aggregate(deployment: string | undefined, now: number, asked: number, statuses: () => WatcherStatus[]): Promise<GroupsAggregate> {
    const started = performance.now();
    // Read before the pass: a node whose reading ends during it may still have had locks the pass went by.
    const nodes = statuses();
    const aggregator = new GroupAggregator(this.groupOf);
    let locks = 0;
    await this.store.summariesInSlices((s) => {
      if (deployment !== undefined && s.deployment !== deployment) return;
      locks += 1;
      aggregator.add(s);
    });
    // Holders are read for the rows served only (see `readHolder`).
    const rows = aggregator.rows();
    const aggregate: GroupsAggregate = { at: now, until: reusedUntil(now, performance.now() - asked, performance.now() - started), deployment, rows, locks, nodes, sorted: new Map(), holdersRead: new Set() };
    this.groupsCache.set(deployment ?? null, aggregate);
    for (const [key, kept] of this.groupsCache) if (now > kept.until) this.groupsCache.delete(key);
    return aggregate;
  }

  /**
   * One page of the locks a query selects, in its order. The sorted list behind it is built in slices of
   * 2,000 locks with the event loop free between them (a million locks take seconds: the live view and every
   * other request go on meanwhile), by one build per list that every request asking for it meanwhile shares.
   */
  async page(query: LockQuery, now = Date.now()): Promise<LocksPage> {
    if (this.listed && query.group !== undefined && query.sort === "resource" && !query.q && query.state === undefined && query.deployment === undefined) {
      const { order, built } = this.orderOf(query.group, now);
      if (order.set === null && query.after === undefined && query.offset + query.limit <= FOUND_PAGES_END) {
        await Promise.race([built, order.passed]);
        if (order.set === null && order.found !== null) return this.pageFound(order.found, order.pending, query, now);
      }
      const set = await built;
      const descending = query.order === "desc";
      const start = query.after ? set.positionAfter(cursorKey(query.after, keysBeginning(set, query.after.resource), descending), descending) : query.offset;
      const locks: Lock[] = [];
      // (A name the store no longer lists is passed over, and the page goes on to fill up.)
      let at = start;
      let last: string | undefined;
      while (locks.length < query.limit && at < set.size) {
        const rows = set.slice(at, query.limit - locks.length, descending);
        if (rows.length === 0) break;
        at += rows.length;
        for (const resource of rows) {
          last = resource;
          const lock = this.store.lock(resource, now);
          if (lock) locks.push(lock);
        }
      }
      const next = last !== undefined && at < set.size ? encodeCursor({ value: null, resource: last, deployment: null }, "resource") : null;
      return { serverTime: now, total: set.size, offset: start, locks, next };
    }
    const key = JSON.stringify([query.group ?? null, query.q?.toLowerCase() ?? null, query.state ?? null, query.sort, query.order, query.deployment ?? null]);
    let list = this.lists.get(key);
    if (!fresh(list, now)) {
      const asked = performance.now();
      list = await this.shared(key, () => this.build(query, key, now, asked));
    }
    const locks: Lock[] = [];
    const { columns, order } = list;
    const start = query.after ? columns.firstAfter(order, query.order, { ...query.after, resource: cursorKey(query.after, columns.resources, query.sort === "resource" && query.order === "desc") }) : query.offset;
    // A list reused a moment may hold locks that have left the store since: they are passed over, and the page
    // goes on down the list until it is full (it was served short, the first page too, while more locks followed).
    let end = start;
    while (locks.length < query.limit && end < order.length) {
      const row = order[end++] as number;
      const lock = this.store.lock(columns.resources[row] as string, now, columns.deployments[row]);
      if (lock) locks.push(lock);
    }
    const next = end > start && end < order.length ? encodeCursor(columns.cursorOf(order[end - 1] as number), query.sort) : null;
    return { serverTime: now, total: order.length, offset: start, locks, next };
  }

  /**
   * A group's locks by name: built by one pass and a sort the first time a viewer asks (sliced, as any list),
   * then kept as locks join and leave the list, until nobody has asked for `ORDER_IDLE_MS`. `built` settles with
   * the order; `order.passed` once the pass has found the names, seconds earlier for a million.
   */
  private orderOf(group: string, now: number): { order: GroupOrder; built: Promise<SortedStrings> } {
    for (const [name, kept] of this.orders) if (name !== group && now - kept.usedAt > ORDER_IDLE_MS) this.orders.delete(name);
    let order = this.orders.get(group);
    if (order) {
      // Most recently used last: the first is the one let go when too many are kept.
      this.orders.delete(group);
      this.orders.set(group, order);
      order.usedAt = now;
      if (order.set) return { order, built: Promise.resolve(order.set) };
    } else {
      let pass = () => {};
      const passed = new Promise<void>((resolve) => (pass = resolve));
      order = { set: null, pending: new Map(), usedAt: now, found: null, passed, pass };
      this.orders.set(group, order);
      while (this.orders.size > KEPT_ORDERS) this.orders.delete(this.orders.keys().next().value as string);
    }
    const building = order;
    const built = this.shared(JSON.stringify(["order", group]), async () => {
      const resources: string[] = [];
      const inGroup = this.membersOf(group);
      await this.store.summariesInSlices((s) => {
        if (inGroup(s.resource)) resources.push(s.resource);
      });
      building.found = resources;
      building.pass();
      // (Sorted in place only at its end, at once: `found` is the same names throughout.)
      const set = SortedStrings.fromSorted(await sortInSlices(resources, byText));
      for (const [resource, isListed] of building.pending ?? []) {
        if (isListed) set.add(resource);
        else set.delete(resource);
      }
      building.pending = null;
      building.found = null;
      building.set = set;
      return set;
    });
    return { order, built };
  }

  /**
   * A page near the start of a group by name while its order is still being sorted (a million names take seconds
   * to sort, and a viewer opening the group waits for its first page): the names the pass found, as the changes
   * since (`pending`, the last word per lock) leave them, and the page's worth picked from them in one pass
   * (`firstInOrder`). The same page the order gives once sorted; its cursor leads on into it.
   */
  private pageFound(found: readonly string[], pending: ReadonlyMap<string, boolean> | null, query: LockQuery, now: number): LocksPage {
    let total = 0;
    function* listed(): Generator<string> {
      for (const resource of found) {
        if (pending?.has(resource)) continue;
        total += 1;
        yield resource;
      }
      for (const [resource, isListed] of pending ?? []) {
        if (!isListed) continue;
        total += 1;
        yield resource;
      }
    }
    const picked = firstInOrder(listed(), query.offset + query.limit + FOUND_MARGIN, query.order === "desc");
    const locks: Lock[] = [];
    let at = query.offset;
    let last: string | undefined;
    while (locks.length < query.limit && at < picked.length) {
      const resource = picked[at++]!;
      last = resource;
      const lock = this.store.lock(resource, now);
      if (lock) locks.push(lock);
    }
    const next = last !== undefined && at < total ? encodeCursor({ value: null, resource: last, deployment: null }, "resource") : null;
    return { serverTime: now, total, offset: query.offset, locks, next };
  }

  /** Whether a resource is in `group`. A group's name is a piece of each of its keys: most keys are ruled out without running the pattern. */
  private membersOf(group: string): (resource: string) => boolean {
    if (group === OTHER_GROUP) return (resource) => this.groupOf(resource) === group;
    return (resource) => resource.includes(group) && this.groupOf(resource) === group;
  }

  /**
   * The build running or waiting under `key`, or `build` queued now: one build for every request that comes
   * meanwhile, and at most `BUILDS_AT_ONCE` running.
   */
  private shared<T>(key: string, build: () => Promise<T>): Promise<T> {
    let building = this.building.get(key) as Promise<T> | undefined;
    if (!building) {
      building = this.inTurn(build).finally(() => this.building.delete(key));
      this.building.set(key, building);
    }
    return building;
  }

  private async inTurn<T>(build: () => Promise<T>): Promise<T> {
    // A finished build hands its place to the first waiting (no other can take it meanwhile).
    if (this.running >= BUILDS_AT_ONCE) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running += 1;
    try {
      return await build();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running -= 1;
    }
  }

  private async build(query: LockQuery, key: string, now: number, asked: number): Promise<SortedList> {
    const started = performance.now();
    const columns = new LockColumns(query.sort, { holder: (s) => shownHolder(s), fence: (s) => fenceOfValue(s.token) });
    const needle = query.q?.toLowerCase();
    const inGroup = query.group === undefined ? null : this.membersOf(query.group);
    await this.store.summariesInSlices((s) => {
      if (query.state !== undefined && s.state !== query.state) return;
      if (query.deployment !== undefined && s.deployment !== query.deployment) return;
      if (inGroup && !inGroup(s.resource)) return;
      if (needle && !matchesSearch(s, needle, searchedHolder)) return;
      columns.add(s);
    });
    const order = await sortInSlices(columns.rows(), columns.compare(query.order));
    const list: SortedList = { at: now, until: reusedUntil(now, performance.now() - asked, performance.now() - started), columns, order };
    this.lists.delete(key);
    this.lists.set(key, list);
    for (const [k, kept] of this.lists) if (this.lists.size > KEPT_LISTS || now > kept.until) this.lists.delete(k);
    return list;
  }
}
