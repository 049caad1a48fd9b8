"use client";

import Link from "next/link";
import { useQueries, useQuery, useQueryClient, type QueryKey } from "@tanstack/react-query";
import { useCallback, useEffect, useRef, useState } from "react";
import { GROUP_ROWS_WINDOW, rowsWindow, type GroupSort, type LockGroup, type LockGroupsPage, type LocksPage } from "@/lib/locks/groups";
import { isLive, type Lock } from "@/lib/locks/types";
import { apiFetch } from "../api-client";
import { allGroupsHref, contentionText, deploymentsOf, formatDuration, groupHref, holderText, nodeColumnCount, rememberGroupAddress, shortestTtlText } from "./format";
import { liveFeed } from "./live-feed";
import { LoadError, LockRowsTable, nextSort, SortHeader, TableTools, type Sort, type SortKey } from "./lock-rows";
import { useLiveLocks, useNow } from "./use-live-locks";
import { ScrollHint } from "../table-scroll";

/** Groups shown at once; a search narrows the rest. */
const GROUPS_SHOWN = 500;
/** Locks per page fetched from the server. */
const PAGE = 100;
/** Rows fetched beyond those on screen, above and below, so a short scroll shows rows at once. */
const MARGIN = 50;

const GROUP_COLUMNS: Array<{ key: GroupSort; label: string }> = [
  { key: "group", label: "Group" },
  { key: "locks", label: "Locks" },
  { key: "held", label: "Held" },
  { key: "partial", label: "Partial" },
  { key: "elapsed", label: "TTL elapsed" },
  // Ended a moment ago and still listed: with them, a group's locks add up (held + partial + TTL elapsed + ended).
  { key: "ended", label: "Ended" },
  { key: "contention", label: "Contention" },
  { key: "oldest", label: "Oldest holder" },
  { key: "ttl", label: "Shortest TTL" },
];

/** A search box whose value reaches the server a moment after the typing stops. */
function useSettledText(delayMs = 250, initial = ""): [string, string, (text: string) => void] {
  const [text, setText] = useState(initial);
  const [settled, setSettled] = useState(initial.trim());
  useEffect(() => {
    const timer = setTimeout(() => setSettled(text.trim()), delayMs);
    return () => clearTimeout(timer);
  }, [text, delayMs]);
  return [text, settled, setText];
}

/**
 * One row per group of locks (the group pattern names them), from the server, refreshed every 3 s; where the
 * console watches several deployments (`deployments`), filtered by one on demand.
 */
export function GroupsTable({
  deployments,
  deployment,
  filter = "",
  initialSort = { key: "group", dir: 1 },
}: {
  deployments: readonly string[];
  deployment: string;
  filter?: string;
  /** The sort the address names (`?sort=&order=`), which the table opens with. */
  initialSort?: { key: GroupSort; dir: 1 | -1 };
}) {
  const [sort, setSort] = useState<{ key: GroupSort; dir: 1 | -1 }>(initialSort);
  const [text, search, setText] = useSettledText(250, filter);
  // The deployment chosen and the filter are in the address (`?deployment=`, `?filter=`), so that a group opened
  // from here, and the way back to all groups (its link, the browser's Back), keep them. The filter goes there
  // as it is typed, not once it settles: a group opened meanwhile carries it, and a later change of the address
  // would cancel the way into the group (the router drops a navigation still on its way when the address is
  // replaced). The address's deployment, not the one shown: until the console's deployments are known none is
  // shown, and the address keeps the one asked for.
  const typed = text.trim();
  const setDeployment = useCallback((chosen: string) => window.history.replaceState(null, "", allGroupsHref(chosen, typed, sort)), [typed, sort]);
  const setFilter = useCallback(
    (next: string) => {
      setText(next);
      const href = allGroupsHref(deployment, next.trim(), sort);
      if (`${window.location.pathname}${window.location.search}` !== href) window.history.replaceState(null, "", href);
    },
    [setText, deployment, sort],
  );
  // The sort too: a group opened from here leads Back to the groups in the same order, and a reload keeps it.
  const sortBy = (key: GroupSort) => {
    const next = nextSort(sort, key);
    setSort(next);
    window.history.replaceState(null, "", allGroupsHref(deployment, typed, next));
  };
  const shownDeployment = deployments.includes(deployment) ? deployment : "";
  const now = useNow(1_000);
  const groupsBox = useRef<HTMLDivElement>(null);
  const params = new URLSearchParams({ sort: sort.key, order: sort.dir === 1 ? "asc" : "desc", limit: String(GROUPS_SHOWN) });
  if (search) params.set("q", search);
  if (shownDeployment) params.set("deployment", shownDeployment);
  const query = useQuery({
    queryKey: ["lock-groups", params.toString()],
    queryFn: () => apiFetch<LockGroupsPage>(`/api/locks/groups?${params.toString()}`),
    refetchInterval: 3_000,
    placeholderData: (previous) => previous,
    retry: false,
  });
  const data = query.data;
  const offsetMs = data ? data.serverTime - query.dataUpdatedAt : 0;
  return (
    <div className="panel locks-panel">
      <TableTools
        deployment={{ choices: deployments, value: shownDeployment, onChange: setDeployment }}
        search={{ label: "Filter groups", placeholder: "Filter groups by name", value: text, onChange: setFilter }}
        count={data ? groupsCount(data, search !== "") : "Loading groups…"}
        countPending={query.isPlaceholderData || text.trim() !== search.trim()}
      />
      {query.isError && <LoadError what="the groups" error={query.error} />}
      <ScrollHint box={groupsBox} />
      <div className="locks-scroll groups-scroll" ref={groupsBox}>
        <table className="groups-table" aria-label="Lock groups">
          <thead>
            <tr>
              {GROUP_COLUMNS.map((col) => (
                <SortHeader key={col.key} column={col.key} label={col.label} sort={sort} onSort={sortBy} className={`col-${col.key}`} />
              ))}
            </tr>
          </thead>
          <tbody>
            {data?.groups.map((g) => <GroupRow key={g.group} group={g} deployment={shownDeployment} filter={typed} now={now + offsetMs} />)}
            {data && data.groups.length === 0 && (
              <tr>
                <td colSpan={GROUP_COLUMNS.length} className="muted empty">
                  {search ? "No group matches the filter." : shownDeployment ? `No locks on ${shownDeployment} right now.` : "No locks under the lock patterns right now."}
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
      <p className="muted groups-note">Locks are grouped by the start of their name (the console&apos;s group pattern). Open a group to see its locks.</p>
    </div>
  );
}

/**
 * How many groups and locks the table shows. `locks` is the whole fleet's (of the deployment chosen): with a
 * search, the matching groups' own locks come first, the fleet's beside them.
 */
function groupsCount(data: LockGroupsPage, searched: boolean): string {
  const n = (count: number) => count.toLocaleString("en");
  const groups = `${n(data.total)} ${data.total === 1 ? "group" : "groups"}`;
  const firstShown = data.total > data.groups.length ? `, first ${n(data.groups.length)} shown` : "";
  if (!searched) return `${n(data.locks)} locks in ${groups}${firstShown}`;
  const matching = data.groups.reduce((sum, g) => sum + g.locks, 0);
  return `${groups} ${data.total === 1 ? "matches" : "match"}${firstShown}: ${n(matching)} ${matching === 1 ? "lock" : "locks"}${firstShown ? " in those" : ""} (of ${n(data.locks)} in all)`;
}

function GroupRow({ group: g, deployment, filter, now }: { group: LockGroup; deployment: string; filter: string; now: number }) {
  const c = g.contention;
  const contention = c.attemptsPerMin === null && c.waiters === null ? null : contentionText({ ...c, source: c.attemptsPerMin === null ? "queue" : "engine" });
  return (
    <tr aria-label={g.group}>
      <th scope="row" className="col-group mono" data-truncates title={g.group}>
        {/* No prefetch: 500 group rows on screen would each have the console render a page. */}
        <Link href={groupHref(g.group, deployment, filter)} prefetch={false}>
          {g.group}
        </Link>
      </th>
      <td className="col-locks mono">{g.locks.toLocaleString("en")}</td>
      <td className="col-held mono">{g.held.toLocaleString("en")}</td>
      <td className="col-partial mono">{g.partial > 0 ? <strong>{g.partial.toLocaleString("en")}</strong> : "0"}</td>
      <td className="col-elapsed mono">{g.elapsed.toLocaleString("en")}</td>
      <td className="col-ended mono">{g.ended.toLocaleString("en")}</td>
      <td className="col-contention" data-truncates title={contention ?? "Not visible for these locks' libraries"}>
        {contention ?? <span className="muted">not visible</span>}
      </td>
      <td className="col-oldest" data-truncates title={g.oldest ? `${g.oldest.resource}\n${g.oldest.holder ?? ""}` : undefined}>
        {g.oldest ? `${g.oldest.holder ?? "unknown"}, ${formatDuration(now - g.oldest.acquiredAt)}` : "—"}
      </td>
      <td className="col-ttl mono" data-truncates title={g.shortestTtl?.resource}>
        {shortestTtlText(g.shortestTtl, now)}
      </td>
    </tr>
  );
}

const pageKey = (base: readonly unknown[], page: number): QueryKey => [...base, page];

/** A page of a group's locks, and which of the table's pages it is. */
type PageOfRows = LocksPage & { page: number };

/**
 * Which range of a large group's rows the table shows, and the way to the range before and after it. The range is read
 * out when it moves (Previous, Next, the group shrinking under it), not when the group's total changes: in a busy
 * group that is each time a lock is taken or ends, every second or so.
 */
function RowsWindowNav({ shown, total, onMove }: { shown: { start: number; count: number }; total: number; onMove: (start: number) => void }) {
  const step = GROUP_ROWS_WINDOW.toLocaleString("en");
  const text = `Rows ${(shown.start + 1).toLocaleString("en")}–${(shown.start + shown.count).toLocaleString("en")} of ${total.toLocaleString("en")}`;
  const [said, setSaid] = useState("");
  const saidFor = useRef(shown.start);
  // Marked aria-disabled, not disabled, at either end: a button pressed from the keyboard to reach the last (or first)
  // range would otherwise drop focus to the page's top as it became disabled. Focus stays on it; the status reads the range.
  const atStart = shown.start === 0;
  const atEnd = shown.start + shown.count >= total;
  useEffect(() => {
    if (saidFor.current === shown.start) return;
    saidFor.current = shown.start;
    // The text as the range moved (not a dependency: a later total alone is not read out).
    setSaid(text);
  }, [shown.start]);
  return (
    <nav className="rows-window" aria-label="Rows of this group">
      <button type="button" className="button small" aria-disabled={atStart || undefined} onClick={() => {
          if (!atStart) onMove(shown.start - GROUP_ROWS_WINDOW);
        }}>
        ‹ Previous {step}
      </button>
      <span className="muted">{text}</span>
      <span className="sr-only" role="status">
        {said}
      </span>
      <button type="button" className="button small" aria-disabled={atEnd || undefined} onClick={() => {
          if (!atEnd) onMove(shown.start + GROUP_ROWS_WINDOW);
        }}>
        Next {step} ›
      </button>
    </nav>
  );
}

/**
 * Whether a lock's change may move its row in a table sorted by `key` (the server sorts and pages: a row patched
 * in place keeps its old place), or, under a search, take it out of the results (a search matches the resource,
 * which does not change, or the holder).
 */
export function mayMove(key: SortKey, searched: boolean, before: Lock, after: Lock): boolean {
  if (searched && (before.token !== after.token || before.endedToken !== after.endedToken || holderText(before) !== holderText(after))) return true;
  switch (key) {
    case "resource":
      return false;
    case "state":
      return before.state !== after.state;
    case "holder":
      return holderText(before) !== holderText(after);
    case "nodes":
      return before.quorumHeld !== after.quorumHeld;
    case "ttl":
      // A lock that ends goes after every live one (its TTL and held for are shown as —).
      return before.expiresAt !== after.expiresAt || isLive(before.state) !== isLive(after.state);
    case "heldFor":
      return before.acquiredAt !== after.acquiredAt || isLive(before.state) !== isLive(after.state);
    case "fence":
      return before.fence !== after.fence;
    case "contention":
      return before.contention.attemptsPerMin !== after.contention.attemptsPerMin;
  }
}

/**
 * One group's locks: a virtualized table whose rows are fetched page by page from the server as they come on
 * screen (search and sort done there, over all of the group's locks); pages off screen are let go. The tab's
 * stream follows this group only: a row on screen is updated in place, and a lock arriving or leaving
 * reloads the pages on screen.
 */
export function GroupLocks({
  group,
  deployment = null,
  filter = "",
  initialSearch = "",
  initialSort = { key: "resource", dir: 1 },
}: {
  group: string;
  deployment?: string | null;
  filter?: string;
  /** The search and sort the address names (`?q=`, `?sort=&order=`), which the table opens with. */
  initialSearch?: string;
  initialSort?: Sort;
}) {
  const client = useQueryClient();
  const live = useLiveLocks({ locks: "group", group });
  const [sort, setSort] = useState<Sort>(initialSort);
  const [text, search, setText] = useSettledText(250, initialSearch);
  // The search and sort go into the address as they are given (the search as typed, not once it settles: a lock
  // opened meanwhile would otherwise have its way in cancelled by the later change of the address), replaced rather
  // than pushed, so a lock opened from here leads Back to the same rows, and a reload keeps them.
  const address = useCallback(
    (within: { search: string; sort: Sort }) => {
      const href = groupHref(group, deployment ?? "", filter, within);
      if (`${window.location.pathname}${window.location.search}` !== href) window.history.replaceState(null, "", href);
    },
    [group, deployment, filter],
  );
  // This tab keeps the table's address as shown, for the way back from a lock's page (its link, not only Back).
  useEffect(() => rememberGroupAddress(groupHref(group, deployment ?? "", filter, { search: text.trim(), sort })), [group, deployment, filter, text, sort]);
  const typeSearch = useCallback(
    (next: string) => {
      setText(next);
      address({ search: next.trim(), sort });
    },
    [setText, address, sort],
  );
  const sortBy = (key: SortKey) => {
    const next = nextSort(sort, key);
    setSort(next);
    address({ search: text.trim(), sort: next });
  };
  const [range, setRange] = useState({ first: 0, last: 0 });
  const now = useNow(250);
  const base = ["lock-page", group, deployment, search, sort.key, sort.dir] as const;
  const baseKey = JSON.stringify(base);

  const total = useRef(0);
  // Whether `total` was told by a page of this search and sort (kept while the pages scrolled to are on their way).
  const totalKnown = useRef(false);
  const totalKey = useRef(baseKey);
  const [windowStart, setWindowStart] = useState(0);
  if (totalKey.current !== baseKey) {
    totalKey.current = baseKey;
    total.current = 0;
    totalKnown.current = false;
    if (windowStart !== 0) setWindowStart(0);
    // Another search or sort starts at the table's top (it scrolls there below): its pages are asked for there
    // only, not first where the last one was scrolled to (as many rows on screen, from the first).
    if (range.first !== 0) setRange({ first: 0, last: range.last - range.first });
  }
  // The rows scrolled through: a range of at most GROUP_ROWS_WINDOW of the group's; `range` counts from its
  // start. (Fetched by the total known before this render; shown by the total the pages now tell.)
  const fetching = rowsWindow(total.current, windowStart);
  const firstPage = Math.floor(Math.max(0, fetching.start + range.first - MARGIN) / PAGE);
  const lastPage = Math.floor((fetching.start + range.last + MARGIN) / PAGE);
  // The first page on screen is read by its place in the list; each after it from where the one before ended
  // (its `next`), so the pages on screen follow one another however locks come and go between their reads: read
  // by offset, a lock taken or ended ahead of them shifted the later pages, which showed a lock twice (React then
  // warned of a duplicate key) or skipped one.
  const pageQueries: Array<{ page: number; key: QueryKey; from: string | null }> = [];
  for (let page = firstPage; page <= lastPage; page++) {
    if (page === firstPage) {
      pageQueries.push({ page, key: pageKey(base, page), from: `offset=${page * PAGE}` });
      continue;
    }
    const before = pageQueries[pageQueries.length - 1]!;
    const read = before.from === null ? undefined : client.getQueryData<PageOfRows>(before.key);
    // The list ends with the page before: no page after it (not one waiting forever, its last rows shown).
    if (read && read.next === null) break;
    const next = read?.next ?? null;
    pageQueries.push({ page, key: [...pageKey(base, page), next], from: next === null ? null : `after=${encodeURIComponent(next)}` });
  }
  const pages = useQueries({
    queries: pageQueries.map(({ page, key, from }) => ({
      queryKey: key,
      queryFn: async (): Promise<PageOfRows> => {
        const params = new URLSearchParams({ group, sort: sort.key, order: sort.dir === 1 ? "asc" : "desc", limit: String(PAGE) });
        if (search) params.set("q", search);
        if (deployment) params.set("deployment", deployment);
        return { ...(await apiFetch<LocksPage>(`/api/locks?${params.toString()}&${from ?? ""}`)), page };
      },
      // A page after one still on its way waits for it.
      enabled: from !== null,
      // Pages off screen leave the cache at once: the tab holds the rows it shows and a margin, no more.
      gcTime: 0,
      staleTime: 2_000,
      refetchInterval: 10_000,
      placeholderData: (previous: PageOfRows | undefined) => previous,
      retry: false,
    })),
  });
  const loaded = pages.find((p) => p.data)?.data;
  if (loaded) {
    total.current = loaded.total;
    totalKnown.current = true;
  }
  const shown = rowsWindow(total.current, windowStart);
  const error = pages.find((p) => p.error)?.error;

  // Each lock in one row only: a page shown while its next one is on its way (the one before it changed) may
  // still hold a row the page before now holds too, and a lock whose figure sorted by changed may be in both
  // until they are read again. The later row waits as a row still loading.
  const rowsOnScreen = new Map<number, Lock>();
  const seen = new Set<string>();
  pages.forEach((p, i) => {
    const data = p.data;
    if (!data || data.page !== firstPage + i) return;
    data.locks.forEach((lock, at) => {
      const id = `${lock.deployment}\u0000${lock.resource}`;
      if (seen.has(id)) return;
      seen.add(id);
      rowsOnScreen.set(data.page * PAGE + at, lock);
    });
  });
  const rowAt = (index: number): Lock | undefined => rowsOnScreen.get(shown.start + index);

  // Live changes of this group: patch a row on screen, reload the pages on screen when a lock comes or goes, or
  // when a change on screen may move its row (the figure sorted by) or take it out of the search's results.
  const sortKey = sort.key;
  const searched = search !== "";
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | null = null;
    const reload = () => {
      timer ??= setTimeout(() => {
        timer = null;
        void client.invalidateQueries({ queryKey: ["lock-page", group] });
      }, 1_000);
    };
    const stop = liveFeed(client).listen((change) => {
      if ("lock" in change || "contention" in change) {
        const resource = "lock" in change ? change.lock.resource : change.contention.resource;
        // (Named where the console watches several deployments: the same resource on another is another row.)
        const on = "lock" in change ? change.lock.deployment : change.contention.deployment;
        // Another deployment's lock, where the page shows one deployment's.
        if (deployment && on !== undefined && on !== deployment) return;
        const same = (l: Lock) => l.resource === resource && (on === undefined || l.deployment === on);
        let found = false;
        let moved = false;
        for (const [key, page] of client.getQueriesData<PageOfRows>({ queryKey: ["lock-page", group] })) {
          if (!page?.locks.some(same)) continue;
          found = true;
          client.setQueryData<PageOfRows>(key, {
            ...page,
            locks: page.locks.map((l) => {
              if (!same(l)) return l;
              let next: Lock;
              if ("lock" in change) next = change.lock;
              else {
                const { resource: _resource, deployment: _deployment, ...contention } = change.contention;
                next = { ...l, contention };
              }
              if (mayMove(sortKey, searched, l, next)) moved = true;
              return next;
            }),
          });
        }
        if ((!found && "lock" in change) || moved) reload();
      } else {
        reload();
      }
    });
    return () => {
      stop();
      if (timer) clearTimeout(timer);
    };
    // `baseKey`: a new search or sort (either way) asks for its pages afresh, after whatever change owed a reload of
    // the pages before it: that reload would only ask for them once more.
  }, [client, group, deployment, sortKey, searched, baseKey]);

  const scrollToTop = useRef<(() => void) | null>(null);
  useEffect(() => scrollToTop.current?.(), [baseKey, shown.start]);
  const onRange = useCallback((first: number, last: number) => {
    setRange((r) => (r.first === first && r.last === last ? r : { first, last }));
  }, []);

  // Another range starts at its top: no page is fetched for where the last one was scrolled to.
  const moveWindow = useCallback((start: number) => {
    setRange({ first: 0, last: 0 });
    setWindowStart(start);
  }, []);

  const offsetMs = live.data?.offsetMs ?? 0;
  return (
    <div className="panel locks-panel">
      <TableTools
        before={
          <>
            <Link href={allGroupsHref(deployment, filter)} className="back-link">
              ← All groups
            </Link>
            <h2 className="group-title mono" title={group}>
              {group}
            </h2>
            {deployment && <span className="muted">on {deployment}</span>}
          </>
        }
        search={{ label: "Search this group", placeholder: "Search by resource or holder", value: text, onChange: typeSearch }}
        // (Scrolled to rows still on their way, no page on screen has come yet: the count stays what the last one said,
        // rather than "Loading locks…" and back, each read out.)
        countPending={pages.some((p) => p.isPlaceholderData) || text.trim() !== search.trim()}
        count={totalKnown.current ? `${total.current.toLocaleString("en")} ${total.current === 1 ? "lock" : "locks"}${search ? (total.current === 1 ? " matches" : " match") : ""}` : "Loading locks…"}
      />
      {error && <LoadError what="the locks" error={error} />}
      {total.current > GROUP_ROWS_WINDOW && <RowsWindowNav shown={shown} total={total.current} onMove={moveWindow} />}
      <LockRowsTable
        count={shown.count}
        firstRow={shown.start}
        rowCount={total.current}
        rowAt={rowAt}
        sort={sort}
        onSort={sortBy}
        nodeCount={nodeColumnCount(live.data?.nodes, deployment)}
        now={now}
        offsetMs={offsetMs}
        showDeployment={deploymentsOf(live.data?.nodes ?? []).length > 0}
        // A group opened for one deployment: its title says which.
        deploymentColumn={deploymentsOf(live.data?.nodes ?? []).length > 0 && !deployment}
        empty={!loaded ? "Loading locks…" : search ? "No lock in this group matches the search." : "No locks in this group right now."}
        onRange={onRange}
        scrollerRef={(virtualizer) => {
          scrollToTop.current = () => virtualizer.scrollToOffset(0);
        }}
      />
    </div>
  );
}
