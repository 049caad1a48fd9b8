"use client";

import { useSearchParams } from "next/navigation";
import { useQuery } from "@tanstack/react-query";
import { useDeferredValue, useEffect, useMemo, useRef, useState } from "react";
import { GROUP_SORTS, GROUPED_VIEW_ABOVE, LOCK_SORTS, type LockGroupsPage } from "@/lib/locks/groups";
import { sortLocks } from "@/lib/locks/lock-order";
import type { Lock, WatcherStatus } from "@/lib/locks/types";
import { ApiRequestError, apiFetch } from "../api-client";
import { deploymentsOf, locksTableHref, lockSearchText, nodeColumnCount, sortFromAddress, STATE_LABEL } from "./format";
import { GroupLocks, GroupsTable } from "./groups-view";
import type { LiveLocks } from "./live-feed";
import { NodeCounting } from "./lock-bits";
import { nodeCounting } from "./node-counting";
import { LoadError, LockRowsTable, nextSort, TableTools, type Sort } from "./lock-rows";
import { LossesPanel } from "./losses-panel";
import { NodesPanel } from "./nodes-panel";
import { PatternsPanel } from "./patterns-panel";
import { SignInLink } from "../session";
import { useLiveLocks, useLiveNodes, useNow } from "./use-live-locks";

/** Back to the one table below this many (a fleet hovering at the threshold does not flip the page back and forth). */
const TABLE_VIEW_BELOW = 4_000;

/**
 * The locks page: every lock in one live table, or, for a large fleet, one row per group that opens into a
 * server-paged table of the group's locks (`?group=`), so the browser never holds the whole fleet.
 */
export function LocksView() {
  const live = useLiveNodes();
  const searchParams = useSearchParams();
  const group = searchParams.get("group");
  // The grouped view's deployment filter, and a group opened from it so: that deployment's locks of the group.
  const deploymentParam = searchParams.get("deployment");
  // The groups' filter, kept in the address as the deployment is (a group opened from it leads back to it).
  const filterParam = searchParams.get("filter") ?? "";
  // How many locks: asked once when the page opens, then from the stream's counts (every second).
  const size = useQuery({
    queryKey: ["lock-groups", "size"],
    queryFn: () => apiFetch<LockGroupsPage>("/api/locks/groups?limit=1"),
    staleTime: Infinity,
    gcTime: 0,
    retry: false,
  });
  const grouped = useRef<boolean | null>(null);
  const statuses = live.data?.nodes;
  const counting = useMemo(() => nodeCounting(statuses ?? []), [statuses]);
  const locks = live.data?.stats?.locks ?? size.data?.locks;
  if (locks !== undefined) grouped.current = locks > GROUPED_VIEW_ABOVE || (grouped.current === true && locks >= TABLE_VIEW_BELOW);
  const error = size.error ?? live.error;
  if ((error instanceof ApiRequestError && error.status === 401) || live.data?.status === "signed-out") return <SignInPrompt />;
  return (
    <NodeCounting.Provider value={counting}>
      <Header data={live.data} everyLock={group === null && grouped.current === false} />
      <ReadingNotice nodes={live.data?.nodes ?? []} />
      <LossesPanel />
      {size.isError && grouped.current === null ? (
        <LoadError what="the locks" error={size.error} />
      ) : group !== null ? (
        <GroupLocks
          group={group}
          deployment={deploymentParam}
          filter={filterParam}
          initialSearch={searchParams.get("q") ?? ""}
          initialSort={sortFromAddress(LOCK_SORTS, "resource", searchParams.get("sort"), searchParams.get("order"))}
        />
      ) : grouped.current === true ? (
        <GroupsTable
          deployments={deploymentsOf(live.data?.nodes ?? [])}
          deployment={deploymentParam ?? ""}
          filter={filterParam}
          initialSort={sortFromAddress(GROUP_SORTS, "group", searchParams.get("sort"), searchParams.get("order"))}
        />
      ) : grouped.current === false ? (
        <LocksTable filter={filterParam} deployment={deploymentParam ?? ""} sort={sortFromAddress(LOCK_SORTS, "resource", searchParams.get("sort"), searchParams.get("order"))} />
      ) : (
        <p className="muted">Loading locks…</p>
      )}
      <PatternsPanel />
      <NodesPanel />
    </NodeCounting.Provider>
  );
}

/** Signed out, the page still has its heading: it is what a screen reader lists, and jumps to, to tell where it is. */
function SignInPrompt() {
  return (
    <>
      <h1>Locks</h1>
      <div className="panel">
        <p>
          <strong>Sign in to see locks.</strong> This console needs the viewer or operator token to show them.
        </p>
        <SignInLink className="button primary">Sign in</SignInLink>
      </div>
    </>
  );
}

/**
 * While the console reads a node's lock keys (at start-up, after a reconnect or a pattern change), the list
 * lacks some of the locks that node holds: said above it, with the progress. Only what is read is a live region:
 * the count of keys, which changes with every node report (every 5 s) while a large fleet is read, is beside it,
 * not read out each time.
 */
function ReadingNotice({ nodes }: { nodes: readonly WatcherStatus[] }) {
  const reading = nodes.filter((n) => n.reading);
  if (reading.length === 0) return null;
  const keys = reading.reduce((sum, n) => sum + (n.reading?.keysRead ?? 0), 0);
  const names = reading.map((n) => (n.deployment ? `${n.nodeId} (${n.deployment})` : n.nodeId)).join(", ");
  return (
    <p className="warn-text reading-notice">
      <span role="status" aria-label="Reading the nodes' locks">
        Reading the locks on {names}: until it ends, the list lacks some of the locks {reading.length === 1 ? "this node holds" : "these nodes hold"}.
      </span>{" "}
      {keys.toLocaleString("en")} {keys === 1 ? "key" : "keys"} read so far.
    </p>
  );
}

const CONNECTION_TEXT: Record<string, string> = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", degraded: "degraded" };

/** A count, or "–" while it is not known. */
const figureText = (n: number | null | undefined) => (n === null || n === undefined ? "–" : n.toLocaleString("en"));

/**
 * The page's title, connection and live counts. The counts come from the stream's `stats` (every second); until the
 * first arrives (the page just opened, or the console is being reached again) they are not known and say so: only
 * the locks held can be counted meanwhile, and only where the tab holds every lock (`everyLock`: the one table of a
 * small fleet; a large fleet's grouped view holds none, and would count 0). While the stream reconnects, the last
 * figures it brought are not shown as current: rates of a second the console is not heard in, nodes up as last told.
 */
function Header({ data, everyLock }: { data: LiveLocks | undefined; everyLock: boolean }) {
  const reconnecting = data?.status === "reconnecting";
  const stats = reconnecting ? null : data?.stats;
  const degraded = data?.status === "live" && (stats?.degraded ?? data.nodes.some((n) => !n.up || n.notifications === "unavailable"));
  const connection = data?.status === "live" ? (degraded ? "degraded" : "live") : (data?.status ?? "connecting");
  const held = stats?.held ?? (everyLock && data?.ready ? data.locks.filter((l) => l.state === "held" || l.state === "elapsed").length : null);
  const nodesUp = stats ? `${stats.nodesUp}/${stats.nodesTotal}` : data && !reconnecting ? `${data.nodes.filter((n) => n.up).length}/${data.nodes.length}` : "–";
  return (
    <div className="locks-header">
      <h1>Locks</h1>
      <span className={`connection ${connection}`} role="status" aria-label="Live connection">
        <span className={`dot ${connection === "live" ? "up" : connection === "degraded" ? "degraded" : "down"}`} aria-hidden />
        {CONNECTION_TEXT[connection] ?? connection}
      </span>
      <dl className="locks-counts" aria-label="Live counts">
        <div>
          <dt>locks held</dt>
          <dd>{figureText(held)}</dd>
        </div>
        <div>
          <dt>acquisitions/s</dt>
          <dd>{figureText(stats?.acquisitionsPerSec)}</dd>
        </div>
        <div>
          <dt>contention/s</dt>
          <dd>{figureText(stats?.contentionPerSec)}</dd>
        </div>
        <div>
          <dt>expirations/s</dt>
          <dd>{figureText(stats?.expirationsPerSec)}</dd>
        </div>
        <div>
          <dt>nodes up</dt>
          <dd>{nodesUp}</dd>
        </div>
      </dl>
    </div>
  );
}

/**
 * How many rows the table shows, and what they are: ended locks stay listed a few seconds after they end, so the
 * rows are more than the locks held. "held" counts as the "locks held" tile does (TTL elapsed, not yet reclaimed, included).
 */
function countText(rows: readonly Lock[], total: number): string {
  const n = (count: number) => count.toLocaleString("en");
  const shown = rows.length === total ? `${n(total)} ${total === 1 ? "lock" : "locks"} shown` : `${n(rows.length)} of ${n(total)} locks shown`;
  if (rows.length === 0) return shown;
  const held = rows.filter((l) => l.state === "held" || l.state === "elapsed").length;
  const partial = rows.filter((l) => l.state === "partial").length;
  const ended = rows.length - held - partial;
  return `${shown}: ${[`${n(held)} held`, partial > 0 ? `${n(partial)} partial` : null, ended > 0 ? `${n(ended)} ended` : null].filter(Boolean).join(", ")}`;
}

interface TableView {
  filter: string;
  deployment: string;
  sort: Sort;
}

/** Every lock of a small fleet, live from the tab's stream, filtered and sorted in the browser; opened as the address says. */
function LocksTable(view: TableView) {
  const query = useLiveLocks();
  const data = query.data;
  if (query.isError && !data) {
    return <LoadError what="the locks" error={query.error} />;
  }
  return <FilteredLocks data={data} initial={view} />;
}

function FilteredLocks({ data, initial }: { data: LiveLocks | undefined; initial: TableView }) {
  const [filter, setFilter] = useState(initial.filter);
  // Where the console watches several deployments: a Deployment column, and a filter by deployment.
  const deployments = useMemo(() => deploymentsOf(data?.nodes ?? []), [data?.nodes]);
  const [deployment, setDeployment] = useState(initial.deployment);
  const shownDeployment = deployments.includes(deployment) ? deployment : "";
  const [sort, setSort] = useState<Sort>(initial.sort);
  // The view goes into the address as it changes (replaced, not pushed: Back leaves the page, not a keystroke), so a
  // lock opened from here leads Back to the same rows, and a reload keeps them. The deployment asked for, not the one
  // shown: until the console's deployments are known none is shown, and the address keeps the one asked for.
  const typed = filter.trim();
  useEffect(() => {
    const href = locksTableHref({ filter: typed, deployment, sort });
    if (`${window.location.pathname}${window.location.search}` !== href) window.history.replaceState(null, "", href);
  }, [typed, deployment, sort]);
  const deferredFilter = useDeferredValue(filter.trim().toLowerCase());
  const now = useNow(250);
  const offsetMs = data?.offsetMs ?? 0;
  const rows = useMemo(() => {
    const all = shownDeployment ? (data?.locks ?? []).filter((l) => l.deployment === shownDeployment) : (data?.locks ?? []);
    const filtered = deferredFilter
      ? // The state as its column shows it ("TTL elapsed"), not the word behind it.
        all.filter((l) => l.resource.toLowerCase().includes(deferredFilter) || lockSearchText(l).toLowerCase().includes(deferredFilter) || STATE_LABEL[l.state].toLowerCase().includes(deferredFilter))
      : all.slice();
    return sortLocks(filtered, sort.key, sort.dir);
  }, [data?.locks, deferredFilter, sort, shownDeployment]);

  const nodeCount = nodeColumnCount(data?.nodes, shownDeployment);

  return (
    <div className="panel locks-panel">
      <TableTools
        deployment={{ choices: deployments, value: shownDeployment, onChange: setDeployment }}
        search={{ label: "Filter locks", placeholder: "Filter by resource, holder or state", value: filter, onChange: setFilter }}
        count={countText(rows, data?.locks.length ?? 0)}
      />
      <LockRowsTable
        count={rows.length}
        rowAt={(i) => rows[i]}
        sort={sort}
        onSort={(key) => setSort((s) => nextSort(s, key))}
        nodeCount={nodeCount}
        now={now}
        offsetMs={offsetMs}
        showDeployment={deployments.length > 0}
        // Filtered by one deployment: the filter says which.
        deploymentColumn={deployments.length > 0 && shownDeployment === ""}
        empty={
          !data?.ready ? (
            "Loading locks…"
          ) : deferredFilter ? (
            "No lock matches the filter."
          ) : shownDeployment ? (
            // Other deployments may hold locks: nothing here says the patterns miss any.
            `No locks on ${shownDeployment} right now.`
          ) : (
            <>
              No locks under the lock patterns right now; locks taken on any node appear here as they happen. Only keys that match a pattern are
              shown: if your locks are named otherwise, see <a href="#patterns-heading">Lock patterns and discovery</a> below for lock-shaped keys
              found outside them, and add their pattern.
            </>
          )
        }
      />
    </div>
  );
}

