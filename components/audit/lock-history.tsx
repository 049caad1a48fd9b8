"use client";

import { useInfiniteQuery, useQuery } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import type { EventsAnswer, HoldsAnswer } from "@/lib/history/types";
import { apiFetch, ApiRequestError } from "../api-client";
import { LoadMore, useLoadMore, type LoadMoreWords } from "../load-more";
import { DeploymentChoices } from "../locks/deployment-choices";
import { MessageText } from "../message-text";
import { useSession } from "../session";
import { TableHead } from "../table-scroll";
import { TimeText, timeText } from "../time-text";
import styles from "./audit-log.module.css";

const PAGE_SIZE = 50;
/** Holds asked for at a time: at an instant thousands of locks may be held, shown a page at a time. */
const HOLDS_PAGE_SIZE = 100;

const MORE_HOLDS: LoadMoreWords = {
  label: "Show more holds",
  busyLabel: "Loading more holds…",
  one: "more hold",
  many: "more holds",
  done: "shown",
  end: "Every hold at that time is shown.",
  noneYet: "No more holds found yet: show more holds to look further.",
};

const OLDER_EVENTS: LoadMoreWords = {
  label: "Load older events",
  busyLabel: "Loading older events…",
  one: "older event",
  many: "older events",
  done: "loaded",
  end: "No older events are left.",
  noneYet: "No older events found yet: load older events to look further back.",
};

/** Without a history database the routes answer `recording: false`: the one line said instead of a table or a form that can only come back empty. */
const NOT_RECORDING = "Lock history is not recorded on this console: set `AUDIT_DATABASE_URL` to a PostgreSQL database to record it and to ask who held a lock at a given time.";

function NotRecording() {
  return (
    <p className="muted">
      <MessageText text={NOT_RECORDING} />
    </p>
  );
}

/** A lock's history route, on the deployment named (where the console watches several; else it finds it). */
function lockHistoryPath(resource: string, deployment: string | undefined, params: URLSearchParams): string {
  if (deployment !== undefined) params.set("deployment", deployment);
  return `/api/locks/${encodeURIComponent(resource)}/history?${params.toString()}`;
}

/** Where several deployments are watched, the answer's rows name theirs. */
const several = (answer: { deployments: string[] } | undefined) => (answer?.deployments.length ?? 0) > 1;

/** "Who held it at…": the holds that covered one instant, of one lock or of every lock. */
function HeldAt({ resource, deployment }: { resource?: string; deployment?: string }) {
  const [draft, setDraft] = useState({ at: "", resource: "" });
  const [asked, setAsked] = useState<{ at: number; resource: string } | null>(null);
  const target = resource ?? asked?.resource.trim() ?? "";
  const holds = useInfiniteQuery({
    queryKey: ["history-at", target, deployment ?? null, asked?.at],
    enabled: asked !== null,
    initialPageParam: null as string | null,
    queryFn: ({ pageParam }) => {
      const params = new URLSearchParams({ at: new Date(asked?.at ?? 0).toISOString(), limit: String(HOLDS_PAGE_SIZE) });
      if (pageParam) params.set("before", pageParam);
      if (resource) return apiFetch<HoldsAnswer>(lockHistoryPath(resource, deployment, params));
      if (target) params.set("resource", target);
      return apiFetch<HoldsAnswer>(`/api/history?${params.toString()}`);
    },
    getNextPageParam: (last) => last.next,
  });
  const answer = holds.data?.pages[0];
  const held = holds.data?.pages.flatMap((p) => p.holds) ?? [];
  const more = useLoadMore({
    keys: held.map((h) => h.id),
    words: MORE_HOLDS,
    load: async () => {
      const page = await holds.fetchNextPage();
      return { keys: page.data?.pages.flatMap((p) => p.holds.map((h) => h.id)) ?? [], more: page.hasNextPage, failed: page.isFetchNextPageError };
    },
  });
  const showDeployment = several(answer);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const ms = new Date(draft.at).getTime();
    if (Number.isFinite(ms)) setAsked({ at: ms, resource: draft.resource });
  };
  return (
    <div className={styles.wrap}>
      <form className={styles.filters} onSubmit={submit} aria-label="Who held it at a given time">
        {!resource && (
          <label>
            Lock key (exact, optional)
            <input type="search" value={draft.resource} maxLength={1024} onChange={(e) => setDraft({ ...draft, resource: e.target.value })} placeholder="e.g. lock:orders/42" />
          </label>
        )}
        <label>
          At
          <input type="datetime-local" step={1} required value={draft.at} onChange={(e) => setDraft({ ...draft, at: e.target.value })} />
        </label>
        <div className={styles.filterActions}>
          <button type="submit" className="button">
            Who held it
          </button>
        </div>
      </form>
      {holds.error && (
        <p role="alert" className="error-text">
          <MessageText text={holds.error.message} />
        </p>
      )}
      {answer && !answer.recording && <NotRecording />}
      {answer?.recording && (
        <div className="panel">
          <table className={styles.table} aria-label={`Holds at ${timeText(answer.at)}`}>
            <TableHead columns={["Resource", showDeployment && "Deployment", "Holder", "Fence", "Acquired", "Ended"]} />
            <tbody>
              {held.length === 0 && (
                <tr>
                  <td colSpan={showDeployment ? 6 : 5} className="muted">
                    Nothing was held at {timeText(answer.at)}.
                  </td>
                </tr>
              )}
              {held.map((h) => (
                <tr key={h.id} {...more.rowProps(h.id)}>
                  <td className="mono">{h.resource}</td>
                  {showDeployment && <td>{h.deployment}</td>}
                  <td className="mono" title={h.token}>
                    {h.holder ?? h.token}
                  </td>
                  <td className="mono">{h.fence ?? "—"}</td>
                  <td>
                    <TimeText at={h.acquiredAt} />
                  </td>
                  <td>
                    {h.endedAt === null
                      ? "still held (or its end not seen yet)"
                      : h.endType === "unseen"
                        ? `by ${timeText(h.endedAt)} (its end was not seen)`
                        : h.endType === "holders"
                          ? `${timeText(h.endedAt)} (its holders changed)`
                          : h.endType === "unwatched"
                            ? `not known after ${timeText(h.endedAt)} (its deployment is no longer watched)`
                            : `${timeText(h.endedAt)} (${h.endType ?? "ended"})`}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <LoadMore control={more} more={answer?.recording === true && holds.hasNextPage} />
    </div>
  );
}

/** A lock's recorded events, newest first, page by page; its first answer also says whether history is recorded at all. */
function useRecordedEvents(resource: string, deployment: string | undefined, enabled: boolean) {
  return useInfiniteQuery({
    queryKey: ["history", resource, deployment ?? null],
    initialPageParam: null as string | null,
    queryFn: ({ pageParam }) => {
      const params = new URLSearchParams({ limit: String(PAGE_SIZE) });
      if (pageParam) params.set("before", pageParam);
      return apiFetch<EventsAnswer>(lockHistoryPath(resource, deployment, params));
    },
    getNextPageParam: (last) => last.next,
    refetchInterval: 15_000,
    retry: (count, error) => !(error instanceof ApiRequestError && error.status < 500) && count < 1,
    enabled,
  });
}

/** A lock's recorded history, newest first, read page by page from the database beyond what the live view keeps. */
function RecordedEvents({ resource, deployment, result }: { resource: string; deployment?: string; result: ReturnType<typeof useRecordedEvents> }) {
  const pages = result.data?.pages ?? [];
  const events = pages.flatMap((p) => p.events);
  const older = useLoadMore({
    keys: events.map((e) => e.id),
    words: OLDER_EVENTS,
    load: async () => {
      const page = await result.fetchNextPage();
      return { keys: page.data?.pages.flatMap((p) => p.events.map((e) => e.id)) ?? [], more: page.hasNextPage, failed: page.isFetchNextPageError };
    },
  });
  // The page did not say which deployment, and the lock is on several (or, ended, on none now): one link to each.
  const choices = result.error instanceof ApiRequestError && result.error.status === 409 ? ((result.error.details as { deployments?: string[] } | undefined)?.deployments ?? []) : [];
  if (choices.length > 0) {
    return (
      <div className={styles.wrap}>
        <p className="muted">History is recorded per deployment. Choose which deployment&apos;s {resource} to see:</p>
        <DeploymentChoices resource={resource} deployments={choices} label="Deployments to see the history of" />
      </div>
    );
  }
  const on = several(pages[0]) ? (deployment ?? events[0]?.deployment) : undefined;
  return (
    <div className={styles.wrap}>
      {on !== undefined && <p className="muted">Recorded on deployment {on}.</p>}
      {result.error && (
        <p role="alert" className="error-text">
          <MessageText text={result.error.message} />
        </p>
      )}
      <div className="panel">
        <table className={styles.table} aria-label="Recorded history">
          <TableHead columns={["Time", "Event", "Holder", "Fence", "Detail"]} />
          <tbody>
            {/* (Where the history could not be read, the alert above says so: not "nothing recorded".) */}
            {events.length === 0 && !result.isPending && !result.error && (
              <tr>
                <td colSpan={5} className="muted">
                  Nothing recorded yet.
                </td>
              </tr>
            )}
            {events.map((e) => (
              <tr key={e.id} {...older.rowProps(e.id)}>
                <td>
                  <TimeText at={e.at} />
                </td>
                <td>{e.type}</td>
                <td className="mono" title={e.token ?? undefined}>
                  {e.holder ?? e.token ?? "—"}
                </td>
                <td className="mono">{e.fence ?? "—"}</td>
                <td className={styles.reason}>{[e.node, e.detail].filter(Boolean).join(": ") || "—"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <LoadMore control={older} more={result.hasNextPage} />
    </div>
  );
}

/** The lock page's history section: every recorded event of this lock, and who held it at a given time. */
export function LockHistory({ resource, deployment }: { resource: string; deployment?: string }) {
  const session = useSession();
  const signedIn = !session.isPending && session.data !== null;
  const events = useRecordedEvents(resource, deployment, signedIn);
  const on = deployment === undefined ? {} : { deployment };
  // Signed out, the lock's page says only "Sign in to see locks.": the history would be one more refusal.
  if (!signedIn) return null;
  const first = events.data?.pages[0];
  return (
    <section aria-labelledby="lock-history-heading">
      <h2 id="lock-history-heading">Recorded history</h2>
      {first && !first.recording ? (
        <NotRecording />
      ) : events.isPending ? (
        <p className="muted">Loading…</p>
      ) : (
        <RecordedEvents resource={resource} result={events} {...on} />
      )}
      {/* Asked only where history is recorded (and the lock's deployment is known): elsewhere it could only fail. */}
      {first?.recording && (
        <>
          <h3>Who held it at…</h3>
          <HeldAt resource={resource} {...on} />
        </>
      )}
    </section>
  );
}

/** The audit page's postmortem question: what was held at a given time (of one lock, or of every lock). */
export function HeldAtLookup() {
  const session = useSession();
  const signedIn = !session.isPending && session.data !== null;
  // Whether history is recorded: without a database the route answers `recording: false`.
  const probe = useQuery({
    queryKey: ["history-recording"],
    queryFn: () => apiFetch<EventsAnswer>("/api/history?limit=1"),
    enabled: signedIn,
    retry: false,
    staleTime: 60_000,
  });
  // Signed out, the audit page asks only to sign in (the audit log above says so): this would be one more refusal.
  if (!signedIn || probe.isPending || (probe.error instanceof ApiRequestError && probe.error.status === 401)) return null;
  return (
    <section aria-labelledby="held-at-heading">
      <h2 id="held-at-heading">Who held what, when</h2>
      {probe.data && !probe.data.recording ? <NotRecording /> : <HeldAt />}
    </section>
  );
}
