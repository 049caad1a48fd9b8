"use client";

import Link from "next/link";
import { useVirtualizer, type Virtualizer } from "@tanstack/react-virtual";
import { memo, useEffect, useLayoutEffect, useRef, useState, useSyncExternalStore, type CSSProperties, type ReactNode, type RefObject } from "react";
import { KEY_TOO_LONG_TO_OPEN, keyChars, MAX_ADDRESSED_KEY_CHARS, type Lock } from "@/lib/locks/types";
import { ApiRequestError, errorText } from "../api-client";
import { ScrollHint } from "../table-scroll";
import { MessageText } from "../message-text";
import { DeploymentSelect } from "./deployment-choices";
import { contentionText, FORMAT_LABEL, formatDuration, holderText, lockHref } from "./format";
import { badgesTitle, LockBadges, NodeDots, Sparkline, TtlBar } from "./lock-bits";

/** The locks table's columns; each sorts (in the browser for a small fleet, on the server for a group). */
export type SortKey = "resource" | "state" | "holder" | "nodes" | "ttl" | "heldFor" | "fence" | "contention";

export const COLUMNS: Array<{ key: SortKey; label: string }> = [
  { key: "resource", label: "Resource" },
  { key: "state", label: "State" },
  { key: "holder", label: "Holder" },
  { key: "nodes", label: "Nodes" },
  { key: "ttl", label: "TTL" },
  { key: "heldFor", label: "Held for" },
  { key: "fence", label: "Fence" },
  { key: "contention", label: "Contention" },
];

/** The columns no screen width hides (globals.css). */
const ALWAYS_SHOWN: readonly SortKey[] = ["resource", "state", "holder", "nodes", "ttl"];

export interface Sort {
  key: SortKey;
  dir: 1 | -1;
}

export const ROW_HEIGHT = 38;
/** On a phone (globals.css, max-width 640px) a row is a finger's height, its lock's link with it. */
const TOUCH_ROW_HEIGHT = 44;
const PHONE = "(max-width: 640px)";

function onPhoneChange(change: () => void): () => void {
  const query = window.matchMedia(PHONE);
  query.addEventListener("change", change);
  return () => query.removeEventListener("change", change);
}

/** A row's height at this screen's width (the virtualized table places its rows by it). */
function useRowHeight(): number {
  const phone = useSyncExternalStore(onPhoneChange, () => window.matchMedia(PHONE).matches, () => false);
  return phone ? TOUCH_ROW_HEIGHT : ROW_HEIGHT;
}

/** A table's tools: what comes first (a way back, a title), the filter box, and the live count beside it. */
export function TableTools({
  before,
  deployment,
  search,
  count,
  countPending = false,
}: {
  before?: ReactNode;
  /** The deployment filter, shown where the console watches several (`choices` is empty where it watches one). */
  deployment?: { choices: readonly string[]; value: string; onChange: (deployment: string) => void };
  /** The search box: its accessible label, placeholder and text. */
  search: { label: string; placeholder: string; value: string; onChange: (text: string) => void };
  count: string;
  /** The count is still an earlier filter's (the new one's answer is on its way): not read out yet. */
  countPending?: boolean;
}) {
  return (
    <div className="locks-tools">
      {before}
      {deployment && deployment.choices.length > 0 && <DeploymentSelect deployments={deployment.choices} value={deployment.value} onChange={deployment.onChange} />}
      <label className="filter">
        <span className="sr-only">{search.label}</span>
        <input type="search" placeholder={search.placeholder} aria-label={search.label} value={search.value} maxLength={MAX_SEARCH_CHARS} onChange={(e) => search.onChange(e.target.value)} />
      </label>
      <span className="muted locks-count">{count}</span>
      <FilterAnnouncement asked={`${search.value.trim()}\u0000${deployment?.value ?? ""}`} filtered={search.value.trim() !== "" || (deployment?.value ?? "") !== ""} count={countPending ? null : count} />
    </div>
  );
}

/** The longest search the API takes (`q`, `GET /api/locks` and `/api/locks/groups`). */
const MAX_SEARCH_CHARS = 200;
/** How long a filter stays unchanged (typing paused) before its count is read out. */
const ANNOUNCE_AFTER_MS = 700;

/**
 * Reads out a table's count once the operator changed its filter (text or deployment), and only then: the count
 * beside the box changes with every lock that comes or goes, and a live region on it read the count out every
 * second of a busy fleet. Waits for typing to pause and for the new filter's count (`null` while an earlier one's
 * is shown; not "Loading…").
 */
function FilterAnnouncement({ asked, filtered, count }: { asked: string; filtered: boolean; count: string | null }) {
  const [said, setSaid] = useState("");
  const [armed, setArmed] = useState(false);
  // (Not the page's first filter, from its address, until the operator changes it.)
  const initial = useRef(asked);
  const changed = useRef(false);
  useEffect(() => {
    if (!changed.current && asked === initial.current) return;
    changed.current = true;
    setArmed(false);
    const timer = setTimeout(() => setArmed(true), ANNOUNCE_AFTER_MS);
    return () => clearTimeout(timer);
  }, [asked]);
  useEffect(() => {
    if (!armed || count === null || count.startsWith("Loading")) return;
    setArmed(false);
    setSaid(`${filtered ? "Filtered" : "Filter cleared"}: ${count}`);
  }, [armed, filtered, count]);
  return (
    <span className="sr-only" role="status">
      {said}
    </span>
  );
}

/**
 * Why a table or panel has nothing to show: the API's refusal in the page's words (a 401 is a session that ended),
 * or, where no answer came (the fetch itself failed), that the console did not answer.
 */
export function LoadError({ what, error }: { what: string; error: unknown }) {
  // The sentence ends with its own full stop, not a second one after the message's.
  const message = error instanceof ApiRequestError ? errorText(error).replace(/\.$/, "") : null;
  return (
    <p role="alert" className="error-text">
      Could not load {what}: {message !== null ? <MessageText text={message} /> : "the console did not answer"}.
    </p>
  );
}

/** A sortable column header: a button whose arrow and `aria-sort` say how the rows are ordered. */
export function SortHeader<K extends string>({ column, label, sort, onSort, className }: { column: K; label: string; sort: { key: K; dir: 1 | -1 }; onSort: (key: K) => void; className?: string }) {
  return (
    <th scope="col" className={className} aria-sort={sort.key === column ? (sort.dir === 1 ? "ascending" : "descending") : "none"}>
      <button type="button" className="sort-button" onClick={() => onSort(column)}>
        {label}
        <span aria-hidden>{sort.key === column ? (sort.dir === 1 ? " ▲" : " ▼") : ""}</span>
      </button>
    </th>
  );
}

/** The next sort after a click on `key`: the same column flips, another starts ascending. */
export const nextSort = <K extends string>(current: { key: K; dir: 1 | -1 }, key: K): { key: K; dir: 1 | -1 } =>
  current.key === key ? { key, dir: current.dir === 1 ? -1 : 1 } : { key, dir: 1 };

/**
 * How many of the table's columns the screen shows (globals.css hides held for and fence, then contention, as it
 * narrows), counted from its header as the width changes; `atEveryWidth` (those no width hides) until counted.
 * Rows of one cell (spacers, "Loading…", the empty table's text) span exactly these: a span over a hidden column
 * makes the fixed layout add a column of its own there, which takes its width from the resource column; a span
 * over fewer leaves the row (its line, its text's centre) short of the table's right edge.
 */
function useShownColumns(scroller: RefObject<HTMLDivElement | null>, atEveryWidth: number): number {
  const [count, setCount] = useState(atEveryWidth);
  useLayoutEffect(() => {
    const box = scroller.current;
    const header = box?.querySelector("thead tr");
    if (!box || !header) return;
    const measure = () => setCount([...header.children].filter((cell) => getComputedStyle(cell).display !== "none").length);
    measure();
    // The box's width follows the window's, whose breakpoints hide columns.
    const observer = new ResizeObserver(measure);
    observer.observe(box);
    return () => observer.disconnect();
  }, [scroller, atEveryWidth]);
  return count;
}

/**
 * The virtualized locks table: `count` rows, of which only those on screen (plus an overscan) are rendered.
 * `rowAt` may not have a row yet (a page still loading on the server-paged table): a placeholder stands in.
 * `onRange` is told which rows are on screen, so the caller can fetch those and let the others go.
 */
export function LockRowsTable({
  count,
  firstRow = 0,
  rowCount = count,
  rowAt,
  sort,
  onSort,
  nodeCount,
  now,
  offsetMs,
  empty,
  onRange,
  scrollerRef,
  showDeployment = false,
  deploymentColumn = showDeployment,
}: {
  count: number;
  /** Where the rows start among all there are (a large group's table shows a range of them), and how many there are. */
  firstRow?: number;
  rowCount?: number;
  rowAt: (index: number) => Lock | undefined;
  sort: Sort;
  onSort: (key: SortKey) => void;
  nodeCount: number;
  now: number;
  offsetMs: number;
  empty: ReactNode;
  onRange?: (first: number, last: number) => void;
  scrollerRef?: (virtualizer: Virtualizer<HTMLDivElement, Element>) => void;
  /** Where the console watches several deployments: lock links and row names that name the lock's. */
  showDeployment?: boolean;
  /**
   * A Deployment column: where the console watches several, unless the table shows one deployment's locks only
   * (every row would say the name its filter or title says). @default showDeployment
   */
  deploymentColumn?: boolean;
}) {
  const scroller = useRef<HTMLDivElement>(null);
  // A scroll re-renders in React's next task rather than inside the scroll event (flushSync), so a burst of
  // wheel steps costs one render, not one each; 8 rows beyond the screen cover a wheel step before it renders.
  const rowHeight = useRowHeight();
  const virtualizer = useVirtualizer({ count, getScrollElement: () => scroller.current, estimateSize: () => rowHeight, overscan: 8, useFlushSync: false });
  // Rows placed at the other height are placed again (the phone turned, the window narrowed past a phone's width).
  useEffect(() => virtualizer.measure(), [virtualizer, rowHeight]);
  scrollerRef?.(virtualizer);
  const items = virtualizer.getVirtualItems();
  const top = items[0]?.start ?? 0;
  const bottom = virtualizer.getTotalSize() - (items[items.length - 1]?.end ?? 0);
  const first = items[0]?.index ?? 0;
  const last = items[items.length - 1]?.index ?? 0;
  useEffect(() => onRange?.(first, last), [first, last, onRange]);
  const columnCount = useShownColumns(scroller, ALWAYS_SHOWN.length + (deploymentColumn ? 1 : 0));
  return (
    <>
      <ScrollHint box={scroller} />
      <div className="locks-scroll" ref={scroller}>
        <table className="locks-table" aria-label="Locks" aria-rowcount={rowCount + 1} style={{ "--node-count": nodeCount } as CSSProperties}>
          <thead>
            <tr aria-rowindex={1}>
              {COLUMNS.map((col) => [
                <SortHeader key={col.key} column={col.key} label={col.label} sort={sort} onSort={onSort} className={`col-${col.key}`} />,
                deploymentColumn && col.key === "resource" ? (
                  <th key="deployment" scope="col" className="col-deployment">
                    Deployment
                  </th>
                ) : null,
              ])}
            </tr>
          </thead>
          <tbody>
            {top > 0 && (
              <tr aria-hidden className="spacer">
                <td colSpan={columnCount} style={{ height: top }} />
              </tr>
            )}
            {items.map((item) => {
              const lock = rowAt(item.index);
              if (!lock) {
                return (
                  <tr key={`loading-${item.index}`} aria-rowindex={firstRow + item.index + 2} style={{ height: rowHeight }}>
                    <td colSpan={columnCount} className="muted">
                      Loading…
                    </td>
                  </tr>
                );
              }
              return (
                <LockRow
                  key={`${lock.deployment}\u0000${lock.resource}`}
                  lock={lock}
                  index={firstRow + item.index}
                  now={now}
                  offsetMs={offsetMs}
                  rowHeight={rowHeight}
                  showDeployment={showDeployment}
                  deploymentColumn={deploymentColumn}
                />
              );
            })}
            {bottom > 0 && (
              <tr aria-hidden className="spacer">
                <td colSpan={columnCount} style={{ height: bottom }} />
              </tr>
            )}
            {count === 0 && (
              <tr>
                <td colSpan={columnCount} className="muted empty">
                  <div className="empty-note">{empty}</div>
                </td>
              </tr>
            )}
          </tbody>
        </table>
      </div>
    </>
  );
}

/**
 * One lock. Force release is not here: it is on the lock's page, one deliberate step away from the table.
 * Cells that may end in an ellipsis (`data-truncates`) carry their full text as a title. A row renders again
 * only when its lock, its place or the clock changed, not for every scroll step. Its link does not prefetch
 * the lock's page: a page is rendered by the console, and a scrolling table would ask for one per row shown.
 */
const LockRow = memo(function LockRow({
  lock,
  index,
  now,
  offsetMs,
  rowHeight,
  showDeployment,
  deploymentColumn,
}: {
  lock: Lock;
  index: number;
  now: number;
  offsetMs: number;
  rowHeight: number;
  showDeployment: boolean;
  deploymentColumn: boolean;
}) {
  const live = lock.state === "held" || lock.state === "partial" || lock.state === "elapsed";
  const heldFor = live && lock.acquiredAt ? now + offsetMs - lock.acquiredAt : null;
  const c = lock.contention;
  const holder = holderText(lock);
  return (
    <tr aria-label={showDeployment ? `${lock.resource} on ${lock.deployment}` : lock.resource} aria-rowindex={index + 2} className={live ? undefined : "ended"} style={{ height: rowHeight }}>
      <th scope="row" className="col-resource resource mono" data-truncates title={lock.resource}>
        {keyChars(lock.resource) > MAX_ADDRESSED_KEY_CHARS ? (
          <span className="unlinked" title={`${lock.resource.slice(0, 200)}…\n\nThis key has ${keyChars(lock.resource).toLocaleString("en-US")} characters: ${KEY_TOO_LONG_TO_OPEN}.`}>
            {lock.resource}
          </span>
        ) : (
          <Link href={lockHref(lock.resource, showDeployment ? lock.deployment : undefined)} prefetch={false}>
            {lock.resource}
          </Link>
        )}
      </th>
      {deploymentColumn && (
        <td className="col-deployment" data-truncates title={lock.deployment}>
          {lock.deployment}
        </td>
      )}
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
});
