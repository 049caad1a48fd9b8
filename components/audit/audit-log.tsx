"use client";

import { useInfiniteQuery } from "@tanstack/react-query";
import { Fragment, useEffect, useRef, useState, type FormEvent } from "react";
import type { AuditAnswer, AuditEntry } from "@/lib/audit/types";
import { apiFetch, ApiRequestError } from "../api-client";
import styles from "./audit-log.module.css";
import { MessageText } from "../message-text";
import { TableHead, TableScroll } from "../table-scroll";
import { SignInLink, useSession } from "../session";
import { LoadMore, useLoadMore, type LoadMoreWords } from "../load-more";
import { BreakableName } from "../breakable-name";
import { TimeText, timeText } from "../time-text";
import { ClampedText } from "./clamped-text";

export interface AuditFilterValues {
  resource: string;
  actor: string;
  /** A deployment's name, exactly; empty for every deployment. */
  deployment: string;
  /** `datetime-local` input values (browser's local time), empty when unset. */
  from: string;
  to: string;
}

const PAGE_SIZE = 50;

const OLDER_ENTRIES: LoadMoreWords = {
  label: "Load older entries",
  busyLabel: "Loading older entries…",
  one: "older entry",
  many: "older entries",
  done: "loaded",
  end: "No older entries are left.",
  noneYet: "No older entries match these filters in the records searched so far: load older entries again to search further back.",
};

const OUTCOME_TEXT: Record<AuditEntry["outcome"], string> = {
  pending: "pending (no outcome recorded)",
  released: "released",
  partial: "partial: still held on nodes that did not confirm",
  conflict: "refused: changed hands",
  absent: "nothing held",
  failed: "failed on every node",
  refused: "refused: audit unavailable",
};

/** A lock-pattern change's outcome in its own words (the log's closed set names a release's end: "released" is "applied"). */
const PATTERNS_OUTCOME_TEXT: Partial<Record<AuditEntry["outcome"], string>> = {
  released: "patterns applied",
  failed: "patterns not applied",
};

function outcomeText(entry: AuditEntry): string {
  return (entry.action === "patterns-changed" ? PATTERNS_OUTCOME_TEXT[entry.outcome] : undefined) ?? OUTCOME_TEXT[entry.outcome];
}

/** An ISO instant as a `datetime-local` input value in this browser's time zone (empty when unset). */
function localInput(iso: string): string {
  const ms = iso ? Date.parse(iso) : NaN;
  if (!Number.isFinite(ms)) return "";
  return new Date(ms - new Date(ms).getTimezoneOffset() * 60_000).toISOString().slice(0, 19);
}

/** The query string the API takes for these filters (times sent as ISO instants). */
export function filterQuery(filters: AuditFilterValues): URLSearchParams {
  const params = new URLSearchParams();
  if (filters.resource.trim()) params.set("resource", filters.resource.trim());
  if (filters.actor.trim()) params.set("actor", filters.actor.trim());
  if (filters.deployment) params.set("deployment", filters.deployment);
  for (const key of ["from", "to"] as const) {
    const ms = filters[key] ? new Date(filters[key]).getTime() : NaN;
    if (Number.isFinite(ms)) params.set(key, new Date(ms).toISOString());
  }
  return params;
}

function holderText(entry: AuditEntry): string {
  const h = entry.holder;
  if (!h) return entry.token ? "foreign value" : "—";
  const where = [h.host, h.pid !== null ? `pid ${h.pid}` : null].filter(Boolean).join(" ");
  return [h.label ?? "unlabelled", where ? `(${where})` : null].filter(Boolean).join(" ");
}

/**
 * Which entry a row's controls are about, in words a listener can tell apart from the next row's ("the release of
 * lock:orders/42 at" the time the row shows, "on orders" too where the table names deployments): every row has a
 * Details button and a node list, and the entry's id says nothing to a person.
 */
function entryName(entry: AuditEntry, withDeployment: boolean): string {
  const on = withDeployment && entry.deployment ? ` on ${entry.deployment}` : "";
  return `${entry.action === "patterns-changed" ? "the lock-pattern change" : `the release of ${entry.resource}${on}`} at ${timeText(entry.at)}`;
}

/**
 * Whether the table names each entry's deployment: where the console watches several, or where the entries name
 * another than the one it watches (releases made while it watched others); not while it shows one deployment's
 * entries only, where every row would say the same name, as the locks table does.
 */
export function showsDeployment(watched: readonly string[], entries: readonly AuditEntry[], filtered: string): boolean {
  // (The one deployment of a console of one filters nothing: its entries may name others.)
  if (filtered && (watched.length > 1 || !watched.includes(filtered))) return false;
  const named = new Set(watched);
  for (const e of entries) if (e.deployment !== undefined) named.add(e.deployment);
  return named.size > 1;
}

/**
 * The deployments the filter offers: those the console watches, then (by name) those the entries shown name
 * besides (releases made on a deployment since removed from the configuration), and the one chosen.
 */
export function deploymentChoices(watched: readonly string[], entries: readonly AuditEntry[], chosen: string): string[] {
  const others = new Set<string>();
  for (const e of entries) if (e.deployment !== undefined && !watched.includes(e.deployment)) others.add(e.deployment);
  if (chosen && !watched.includes(chosen)) others.add(chosen);
  return [...watched, ...[...others].sort()];
}

/** The Deployment cell: a lock-pattern change applies to every deployment; an older release named none. */
function DeploymentCell({ entry }: { entry: AuditEntry }) {
  if (entry.deployment !== undefined) return <td>{entry.deployment}</td>;
  return <td className="muted">{entry.action === "patterns-changed" ? "all" : "not recorded"}</td>;
}

function NodeResults({ entry, name }: { entry: AuditEntry; name: string }) {
  return (
    <ul className={styles.nodes} aria-label={`Per-node outcome of ${name}`}>
      {entry.nodes.map((n) => (
        <li key={n.id}>
          <span className={`dot ${n.result === "deleted" ? "up" : n.result === "error" ? "down" : "degraded"}`} aria-hidden />
          <span>
            {n.id}: {n.result}
            {n.error ? ` (${n.error})` : ""}
          </span>
        </li>
      ))}
    </ul>
  );
}

/**
 * The audit log: every force release and pattern change, newest first, with filters, per-node outcomes and CSV/JSON
 * export. `initial`: the filters the address names, `from` and `to` as ISO instants. `deployments`: those the console
 * watches (with several, or entries naming others, the filters can pick one).
 */
export function AuditLog({ initial, deployments }: { initial: AuditFilterValues; deployments: readonly string[] }) {
  const session = useSession();
  const signedOut = !session.isPending && session.data === null;
  // `initial` comes from the address, with `from` and `to` as ISO instants: read in this browser's time zone. (The
  // form is first drawn once the session is known, in the browser: the server's rendering never shows these.)
  const [draft, setDraft] = useState<AuditFilterValues>(() => ({ ...initial, from: localInput(initial.from), to: localInput(initial.to) }));
  const [filters, setFilters] = useState<AuditFilterValues>(draft);
  const [expanded, setExpanded] = useState<string | null>(null);
  // Each Apply filters or Clear (counted), and what its answer was said as: the table changes silently, so what the
  // filters found is read out once, when their answer comes (not on the log's refresh every 15 s).
  const [asked, setAsked] = useState(0);
  const [said, setSaid] = useState("");
  const saidFor = useRef(0);
  const query = filterQuery(filters);

  const result = useInfiniteQuery({
    queryKey: ["audit", query.toString()],
    initialPageParam: null as string | null,
    queryFn: ({ pageParam }) => {
      const params = new URLSearchParams(query);
      params.set("limit", String(PAGE_SIZE));
      if (pageParam) params.set("before", pageParam);
      return apiFetch<AuditAnswer>(`/api/audit?${params.toString()}`);
    },
    getNextPageParam: (last) => last.next,
    refetchInterval: 15_000,
    // Signed out, only the sign-in prompt shows: the read would be refused.
    enabled: !signedOut,
  });

  function apply(event: FormEvent) {
    event.preventDefault();
    setFilters(draft);
    setAsked((n) => n + 1);
    setSaid("");
    const url = new URL(window.location.href);
    url.search = filterQuery(draft).toString();
    window.history.replaceState(null, "", url);
  }

  function clear() {
    const empty = { resource: "", actor: "", deployment: "", from: "", to: "" };
    setDraft(empty);
    setFilters(empty);
    setAsked((n) => n + 1);
    setSaid("");
    window.history.replaceState(null, "", window.location.pathname);
  }

  const entries = result.data?.pages.flatMap((p) => p.entries) ?? [];
  const withDeployment = showsDeployment(deployments, entries, filters.deployment);
  const choices = deploymentChoices(deployments, entries, draft.deployment);
  // With no entry to go to, a last load that found none leaves focus on the table's box (its button is gone).
  const tableBox = useRef<HTMLDivElement>(null);
  const older = useLoadMore({
    keys: entries.map((e) => e.id),
    words: OLDER_ENTRIES,
    fallback: tableBox,
    load: async () => {
      const page = await result.fetchNextPage();
      return { keys: page.data?.pages.flatMap((p) => p.entries.map((e) => e.id)) ?? [], more: page.hasNextPage, failed: page.isFetchNextPageError };
    },
  });
  const refused = result.error instanceof ApiRequestError && result.error.status === 400;
  const source = result.data?.pages[0]?.source;
  // Any page read from too few nodes may lack entries, not only the first.
  const missingNodes = [...new Set(result.data?.pages.flatMap((p) => p.missingNodes ?? []) ?? [])];
  // What the filters found, in the words the page shows below the table (a refusal is read out by its alert).
  const found =
    entries.length > 0
      ? `${entries.length.toLocaleString("en")} ${entries.length === 1 ? "entry" : "entries"} shown${result.hasNextPage ? "; older entries can be loaded" : ""}.`
      : result.hasNextPage
        ? "None of the newest records searched so far match these filters: load older entries to search further back."
        : `No force releases or pattern changes recorded${query.size > 0 ? " that match these filters" : " yet"}.`;
  const answered = !result.isPending && !result.isFetching;
  const failed = result.error !== null;
  useEffect(() => {
    if (asked === 0 || saidFor.current === asked || !answered) return;
    saidFor.current = asked;
    if (!failed) setSaid(`${query.size > 0 ? "Filtered" : "Filters cleared"}: ${found}`);
  }, [asked, answered, failed, found, query.size]);
  const exportHref = (format: "csv" | "json") => {
    const params = new URLSearchParams(query);
    params.set("format", format);
    return `/api/audit/export?${params.toString()}`;
  };

  // Until the session is known nothing is shown, so a signed-out visitor never sees the filters come and go.
  if (session.isPending) return <p className="muted">Loading…</p>;
  if (signedOut || (result.error instanceof ApiRequestError && result.error.status === 401)) {
    return (
      <p className="panel">
        Reading the audit log needs the viewer or operator token: <SignInLink>sign in</SignInLink>.
      </p>
    );
  }

  return (
    <div className={styles.wrap}>
      <form className={`panel ${styles.filters}`} onSubmit={apply} aria-label="Filter the audit log">
        <label>
          Resource
          <input type="search" value={draft.resource} maxLength={1024} onChange={(e) => setDraft({ ...draft, resource: e.target.value })} placeholder="e.g. lock:orders" />
        </label>
        <label>
          Actor
          <input type="search" value={draft.actor} maxLength={64} onChange={(e) => setDraft({ ...draft, actor: e.target.value })} placeholder="e.g. alice" />
        </label>
        {choices.length > 1 && (
          <label>
            Deployment
            <select value={draft.deployment} onChange={(e) => setDraft({ ...draft, deployment: e.target.value })}>
              <option value="">All deployments</option>
              {choices.map((name) => (
                <option key={name} value={name}>
                  {name}
                </option>
              ))}
            </select>
          </label>
        )}
        <label>
          From
          <input type="datetime-local" step={1} value={draft.from} onChange={(e) => setDraft({ ...draft, from: e.target.value })} />
        </label>
        <label>
          To
          <input type="datetime-local" step={1} value={draft.to} onChange={(e) => setDraft({ ...draft, to: e.target.value })} />
        </label>
        <div className={styles.filterActions}>
          <button type="submit" className="button primary">
            Apply filters
          </button>
          <button type="button" className="button" onClick={clear}>
            Clear
          </button>
          {(["csv", "json"] as const).map((format) =>
            // Filters the console refused (a From after the To) would only download a failed file: no export then.
            refused ? (
              <button key={format} type="button" className="button" disabled title="The filters above were refused: correct them first">
                Export {format.toUpperCase()}
              </button>
            ) : (
              <a key={format} className="button" href={exportHref(format)} download>
                Export {format.toUpperCase()}
              </a>
            ),
          )}
        </div>
      </form>

      <p className="sr-only" role="status">
        {said}
      </p>
      {source === "file" && (
        <p role="status" className={styles.notice}>
          No lock node answered: showing this console&apos;s own audit file, which lacks entries written by other console instances.
        </p>
      )}
      {source === "stream" && missingNodes.length > 0 && (
        <p role="status" className={styles.notice}>
          Too few lock nodes answered ({missingNodes.join(", ")} did not): entries written by other console instances may be missing.
        </p>
      )}
      {result.error && !(result.error instanceof ApiRequestError && result.error.status === 401) && (
        <p role="alert" className="error-text">
          <MessageText text={result.error.message} />
        </p>
      )}

      <div className="panel">
        <TableScroll label="Audit entries, scrollable" ref={tableBox}>
          <table className={`${styles.table} ${styles.entries}`} aria-label="Audit entries">
            <TableHead columns={["Time", "Actor", "Resource", withDeployment && "Deployment", "Holder", "Reason", "Outcome", "Nodes", <span className="sr-only">Details</span>]} />
            <tbody>
              {entries.map((entry) => {
                const open = expanded === entry.id;
                const name = entryName(entry, withDeployment);
                return (
                  <Fragment key={entry.id}>
                    <tr data-audit-id={entry.id} {...older.rowProps(entry.id)}>
                      <td title={new Date(entry.at).toISOString()}>
                        <TimeText at={entry.at} />
                      </td>
                      <td>
                        <div className={styles.actor}>
                          <BreakableName text={entry.actor} /> <span className="muted">({entry.role})</span>
                        </div>
                      </td>
                      <td>
                        <ClampedText text={entry.resource} className="mono" about={`the ${entry.action === "patterns-changed" ? "pattern list" : "resource"} of ${name}`} />
                      </td>
                      {withDeployment && <DeploymentCell entry={entry} />}
                      <td>
                        <div className={styles.holder}>
                          <BreakableName text={holderText(entry)} />
                        </div>
                      </td>
                      <td>
                        <ClampedText text={entry.reason} about={`the reason for ${name}`} />
                      </td>
                      <td>
                        <div className={styles.outcomeBox}>
                          <span className={`${styles.outcome} ${styles[entry.outcome] ?? ""}`}>{outcomeText(entry)}</span>
                        </div>
                      </td>
                      <td>
                        <NodeResults entry={entry} name={name} />
                      </td>
                      <td>
                        {/* Named for its entry (the name starts with the words shown): each row has one. */}
                        <button
                          type="button"
                          className="button"
                          aria-expanded={open}
                          aria-label={`${open ? "Hide details" : "Details"} of ${name}`}
                          onClick={() => setExpanded(open ? null : entry.id)}
                        >
                          {open ? "Hide" : "Details"}
                        </button>
                      </td>
                    </tr>
                    {open && (
                      <tr className={styles.detailRow}>
                        <td colSpan={withDeployment ? 9 : 8}>
                          <dl className={styles.details}>
                            <dt>Entry</dt>
                            <dd className="mono">{entry.id}</dd>
                            <dt>Token</dt>
                            <dd className="mono">{entry.token ?? "—"}</dd>
                            <dt>Fence</dt>
                            <dd>{entry.holder?.fence ?? "—"}</dd>
                            <dt>From</dt>
                            <dd>
                              {entry.ip} {entry.userAgent ? <span className="muted">· {entry.userAgent}</span> : null}
                            </dd>
                            <dt>Finished</dt>
                            <dd>{entry.finishedAt ? `${timeText(entry.finishedAt)} (${entry.finishedAt - entry.at} ms after it started)` : "no outcome recorded"}</dd>
                          </dl>
                        </td>
                      </tr>
                    )}
                  </Fragment>
                );
              })}
            </tbody>
          </table>
        </TableScroll>
        {result.isPending && <p className="muted">Loading…</p>}
        {!result.isPending && entries.length === 0 && !result.error && !result.hasNextPage && (
          <p className="muted">No force releases or pattern changes recorded{query.size > 0 ? " that match these filters" : " yet"}.</p>
        )}
        {!result.isPending && entries.length === 0 && !result.error && result.hasNextPage && (
          <p className="muted">None of the newest records searched so far match these filters: load older entries to search further back.</p>
        )}
        <LoadMore control={older} more={result.hasNextPage} />
      </div>
    </div>
  );
}
