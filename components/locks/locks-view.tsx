"use client";

import Link from "next/link";
import { useVirtualizer } from "@tanstack/react-virtual";
import { useDeferredValue, useMemo, useRef, useState, type CSSProperties } from "react";
import type { Lock } from "@/lib/locks/types";
import { ApiRequestError } from "../api-client";
import { contentionText, FORMAT_LABEL, formatDuration, holderText, lockHref } from "./format";
import { badgesTitle, LockBadges, NodeDots, Sparkline, TtlBar } from "./lock-bits";
import type { LiveLocks } from "./live-feed";
import { NodesPanel } from "./nodes-panel";
import { PatternsPanel } from "./patterns-panel";
import { useLiveLocks, useNow } from "./use-live-locks";
import { MessageText } from "../message-text";

type SortKey = "resource" | "state" | "holder" | "nodes" | "ttl" | "heldFor" | "fence" | "contention";

const COLUMNS: Array<{ key: SortKey; label: string }> = [
  { key: "resource", label: "Resource" },
  { key: "state", label: "State" },
  { key: "holder", label: "Holder" },
  { key: "nodes", label: "Nodes" },
  { key: "ttl", label: "TTL" },
  { key: "heldFor", label: "Held for" },
  { key: "fence", label: "Fence" },
  { key: "contention", label: "Contention" },
];

const STATE_ORDER: Record<Lock["state"], number> = { partial: 0, elapsed: 1, held: 2, "force-released": 3, expired: 4, released: 5 };

function compare(key: SortKey, a: Lock, b: Lock): number {
  switch (key) {
    case "resource":
      return a.resource < b.resource ? -1 : a.resource > b.resource ? 1 : 0;
    case "state":
      return STATE_ORDER[a.state] - STATE_ORDER[b.state];
    case "holder":
      return holderText(a).localeCompare(holderText(b));
    case "nodes":
      return a.quorumHeld - b.quorumHeld;
    case "ttl":
      return (a.expiresAt ?? Infinity) - (b.expiresAt ?? Infinity);
    case "heldFor":
      return (b.acquiredAt ?? 0) - (a.acquiredAt ?? 0);
    case "fence":
      return Number(a.fence ?? -1) - Number(b.fence ?? -1);
    case "contention":
      return (a.contention.attemptsPerMin ?? -1) - (b.contention.attemptsPerMin ?? -1);
  }
}

const ROW_HEIGHT = 38;

/** The live locks table: every lock on every node, filtered, sorted and virtualized. */
export function LocksView() {
  const query = useLiveLocks();
  const data = query.data;
  if (query.error instanceof ApiRequestError && query.error.status === 401) return <SignInPrompt />;
  if (data?.status === "signed-out") return <SignInPrompt />;
  return (
    <>
      <Header data={data} />
      {query.isError && !data ? (
        <p role="alert" className="error-text">
          Could not load the locks: {query.error instanceof Error ? <MessageText text={query.error.message} /> : "the console did not answer"}.
        </p>
      ) : (
        <LocksTable data={data} />
      )}
      <PatternsPanel />
      <NodesPanel />
    </>
  );
}

function SignInPrompt() {
  return (
    <div className="panel">
      <p>
        <strong>Sign in to see locks.</strong> This console needs the viewer or operator token to show them.
      </p>
      <Link className="button primary" href="/login?next=%2F">
        Sign in
      </Link>
    </div>
  );
}

const CONNECTION_TEXT: Record<string, string> = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", degraded: "degraded" };

function Header({ data }: { data: LiveLocks | undefined }) {
  const stats = data?.stats;
  const degraded = data?.status === "live" && (stats?.degraded ?? data.nodes.some((n) => !n.up || n.notifications === "unavailable"));
  const connection = data?.status === "live" ? (degraded ? "degraded" : "live") : (data?.status ?? "connecting");
  const held = stats?.held ?? data?.locks.filter((l) => l.state === "held" || l.state === "elapsed").length ?? 0;
  const nodesUp = stats ? `${stats.nodesUp}/${stats.nodesTotal}` : data ? `${data.nodes.filter((n) => n.up).length}/${data.nodes.length}` : "–";
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
          <dd>{held}</dd>
        </div>
        <div>
          <dt>acquisitions/s</dt>
          <dd>{stats?.acquisitionsPerSec ?? 0}</dd>
        </div>
        <div>
          <dt>contention/s</dt>
          <dd>{stats?.contentionPerSec ?? 0}</dd>
        </div>
        <div>
          <dt>expirations/s</dt>
          <dd>{stats?.expirationsPerSec ?? 0}</dd>
        </div>
        <div>
          <dt>nodes up</dt>
          <dd>{nodesUp}</dd>
        </div>
      </dl>
    </div>
  );
}

function LocksTable({ data }: { data: LiveLocks | undefined }) {
  const [filter, setFilter] = useState("");
  const [sort, setSort] = useState<{ key: SortKey; dir: 1 | -1 }>({ key: "resource", dir: 1 });
  const deferredFilter = useDeferredValue(filter.trim().toLowerCase());
  const now = useNow(250);
  const offsetMs = data?.offsetMs ?? 0;
  const rows = useMemo(() => {
    const all = data?.locks ?? [];
    const filtered = deferredFilter
      ? all.filter((l) => l.resource.toLowerCase().includes(deferredFilter) || holderText(l).toLowerCase().includes(deferredFilter) || l.state.includes(deferredFilter))
      : all.slice();
    filtered.sort((a, b) => compare(sort.key, a, b) * sort.dir || (a.resource < b.resource ? -1 : 1));
    return filtered;
  }, [data?.locks, deferredFilter, sort]);

  const columnCount = COLUMNS.length;
  const nodeCount = data?.nodes.length ?? 3;
  const scroller = useRef<HTMLDivElement>(null);
  const virtualizer = useVirtualizer({ count: rows.length, getScrollElement: () => scroller.current, estimateSize: () => ROW_HEIGHT, overscan: 12 });
  const items = virtualizer.getVirtualItems();
  const top = items[0]?.start ?? 0;
  const bottom = virtualizer.getTotalSize() - (items[items.length - 1]?.end ?? 0);

  return (
    <div className="panel locks-panel">
      <div className="locks-tools">
        <label className="filter">
          <span className="sr-only">Filter locks</span>
          <input type="search" placeholder="Filter by resource, holder or state" aria-label="Filter locks" value={filter} onChange={(e) => setFilter(e.target.value)} />
        </label>
        <span className="muted" aria-live="polite">
          {rows.length === (data?.locks.length ?? 0) ? `${rows.length} ${rows.length === 1 ? "lock" : "locks"}` : `${rows.length} of ${data?.locks.length ?? 0} locks`}
        </span>
      </div>
      <div className="locks-scroll" ref={scroller}>
        <table className="locks-table" aria-label="Locks" aria-rowcount={rows.length + 1} style={{ "--node-count": nodeCount } as CSSProperties}>
          <thead>
            <tr aria-rowindex={1}>
              {COLUMNS.map((col) => (
                <th key={col.key} scope="col" className={`col-${col.key}`} aria-sort={sort.key === col.key ? (sort.dir === 1 ? "ascending" : "descending") : "none"}>
                  <button
                    type="button"
                    className="sort-button"
                    onClick={() => setSort((s) => (s.key === col.key ? { key: col.key, dir: s.dir === 1 ? -1 : 1 } : { key: col.key, dir: 1 }))}
                  >
                    {col.label}
                    <span aria-hidden>{sort.key === col.key ? (sort.dir === 1 ? " ▲" : " ▼") : ""}</span>
                  </button>
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {top > 0 && (
              <tr aria-hidden className="spacer">
                <td colSpan={columnCount} style={{ height: top }} />
              </tr>
            )}
            {items.map((item) => {
              const lock = rows[item.index];
              if (!lock) return null;
              return <LockRow key={lock.resource} lock={lock} index={item.index} now={now} offsetMs={offsetMs} />;
            })}
            {bottom > 0 && (
              <tr aria-hidden className="spacer">
                <td colSpan={columnCount} style={{ height: bottom }} />
              </tr>
            )}
            {rows.length === 0 && (
              <tr>
                <td colSpan={columnCount} className="muted empty">
                  {!data?.ready ? (
                    "Loading locks…"
                  ) : deferredFilter ? (
                    "No lock matches the filter."
                  ) : (
                    <>
                      No locks under the lock patterns right now; locks taken on any node appear here as they happen. Only keys that match a
                      pattern are shown: if your locks are named otherwise, see <a href="#patterns-heading">Lock patterns and discovery</a> below
                      for lock-shaped keys found outside them, and add their pattern.
                    </>
                  )}
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </div>
  );
}

/**
 * One lock. Force release is not here: it is on the lock's page, one deliberate step away from the table.
 * Cells that may end in an ellipsis (`data-truncates`) carry their full text as a title.
 */
function LockRow({ lock, index, now, offsetMs }: { lock: Lock; index: number; now: number; offsetMs: number }) {
  const live = lock.state === "held" || lock.state === "partial" || lock.state === "elapsed";
  const heldFor = live && lock.acquiredAt ? now + offsetMs - lock.acquiredAt : null;
  const c = lock.contention;
  const holder = holderText(lock);
  return (
    <tr aria-label={lock.resource} aria-rowindex={index + 2} className={live ? undefined : "ended"} style={{ height: ROW_HEIGHT }}>
      <th scope="row" className="col-resource resource mono" data-truncates title={lock.resource}>
        <Link href={lockHref(lock.resource)}>{lock.resource}</Link>
      </th>
      <td className="col-state" data-truncates title={badgesTitle(lock)}>
        <LockBadges lock={lock} compact />
      </td>
      <td className="col-holder holder" data-truncates title={[`${FORMAT_LABEL[lock.format]} lock`, holder, lock.token].filter(Boolean).join("\n")}>
        {lock.format !== "lockscope" && lock.format !== "token" && <span className="format-tag">{FORMAT_LABEL[lock.format]}</span>}
        {holder}
      </td>
      <td className="col-nodes">
        <NodeDots lock={lock} />
      </td>
      <td className="col-ttl">
        <TtlBar lock={lock} now={now} offsetMs={offsetMs} />
      </td>
      <td className="col-heldFor mono">{heldFor === null ? "—" : formatDuration(heldFor)}</td>
      <td className="col-fence mono" data-truncates title={lock.fence ?? undefined}>
        {lock.fence ?? "—"}
      </td>
      <td
        className="col-contention"
        data-truncates
        title={c.source === null ? "Not visible: a failed attempt by this library's clients leaves no trace in Redis." : contentionText(c)}
      >
        {c.source === null ? (
          <span className="muted">not visible</span>
        ) : (c.attemptsPerMin ?? 0) > 0 || (c.waiters ?? 0) > 0 ? (
          <span className="contention">
            {c.attemptsPerMin !== null && <span className="mono">{c.attemptsPerMin}/min</span>}
            {c.recent && <Sparkline values={c.recent} label={`failed attempts over the last minute on ${lock.resource}`} />}
            {(c.waiters ?? 0) > 0 && <span className="muted">{c.waiters} waiting</span>}
          </span>
        ) : (
          <span className="muted">—</span>
        )}
      </td>
    </tr>
  );
}
