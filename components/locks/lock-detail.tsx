"use client";

import Link from "next/link";
import { useQuery } from "@tanstack/react-query";
import { useEffect, useRef, useState } from "react";
import { GROUPED_VIEW_ABOVE } from "@/lib/locks/groups";
import { isSplitVote, SPLIT_VOTE_HOLDER } from "@/lib/locks/holder-text";
import type { LockDetail, LockReplication } from "@/lib/locks/types";
import { apiFetch, ApiRequestError, errorText } from "../api-client";
import { ForceReleaseButton } from "../release/force-release-button";
import { ContentionChart } from "./contention-chart";
import { DeploymentChoices } from "./deployment-choices";
import { contentionText, FORMAT_LABEL, formatDuration, groupBackHref, groupHref, holderLine, holderText, lockHref } from "./format";
import { LockBadges, NodeDots, TtlBar } from "./lock-bits";
import { lockDetailKey, type FeedScope } from "./live-feed";
import { useLiveLocks, useLiveNodes, useNow } from "./use-live-locks";
import { MessageText } from "../message-text";
import { TableHead, TableScroll } from "../table-scroll";

type DetailResponse = LockDetail & { serverTime: number };

const NO_LOCKS: FeedScope = { locks: "none" };
const EVERY_LOCK: FeedScope = { locks: "all" };

const TIMELINE_TEXT: Record<LockDetail["timeline"][number]["type"], string> = {
  acquired: "acquired",
  extended: "extended",
  released: "released",
  expired: "expired",
  evicted: "evicted",
  "force-released": "force-released",
  lost: "lost",
  elapsed: "TTL elapsed",
  partial: "quorum lost",
  quorum: "quorum reached",
  attempts: "failed attempts",
  holders: "holders changed",
  gap: "watcher gap",
  "lost-in-failover": "lost in failover",
  "lost-in-restart": "lost in restart",
  "release-undone": "force release undone",
  failover: "survived a failover",
};

/**
 * One lock's page: nodes, holder, TTL, fence, timeline and contention chart; kept live by the tab's stream.
 * `deployment`: the one the URL names (where the console watches several); without it the console finds it.
 */
export function LockDetailView({ resource, deployment }: { resource: string; deployment?: string }) {
  const now = useNow(250);
  const title = useRef<HTMLHeadingElement>(null);
  const query = useQuery({
    queryKey: lockDetailKey(resource, deployment ?? null),
    queryFn: () => apiFetch<DetailResponse>(`/api/locks/${encodeURIComponent(resource)}${deployment === undefined ? "" : `?deployment=${encodeURIComponent(deployment)}`}`),
    refetchInterval: 5_000,
    retry: false,
  });
  // A small fleet's tab keeps every lock on its stream (the locks table is a step back). A large one's follows the
  // lock's group (a fleet may hold a million locks), from which the live feed patches this page's lock; until the
  // page knows the group, nodes and counts only.
  const fleet = useLiveNodes().data?.stats?.locks;
  const everyLock = fleet !== undefined && fleet <= GROUPED_VIEW_ABOVE;
  const group = everyLock ? undefined : query.data?.group;
  const live = useLiveLocks(everyLock ? EVERY_LOCK : group === undefined ? NO_LOCKS : { locks: "group", group });
  const offsetMs = live.data?.offsetMs ?? (query.data ? query.data.serverTime - query.dataUpdatedAt : 0);
  // The way back to the group leads to its table as this tab last showed it (search, sort, deployment), read from
  // the tab's session storage once the page is in the browser; until then, the group's own address.
  const lockDeployment = query.data?.deployment;
  const [groupBack, setGroupBack] = useState<string | null>(null);
  useEffect(() => setGroupBack(group === undefined || lockDeployment === undefined ? null : groupBackHref(group, lockDeployment)), [group, lockDeployment]);
  // The resource is a lock on several deployments and the URL did not say which: one link to each.
  const choices = query.error instanceof ApiRequestError && query.error.status === 409 ? ((query.error.details as { deployments?: string[] } | undefined)?.deployments ?? []) : [];

  if (query.error instanceof ApiRequestError && query.error.status === 401) {
    // Signed out, the page keeps its heading, the lock's name (the address names it already): a screen reader's
    // list of headings is how its user tells which page this is.
    return (
      <section>
        <h1 className="mono">{resource}</h1>
        <div className="panel">
          <p>
            <strong>Sign in to see locks.</strong>
          </p>
          <Link className="button primary" href={`/login?next=${encodeURIComponent(lockHref(resource, deployment))}`}>
            Sign in
          </Link>
        </div>
      </section>
    );
  }
  // A refresh that failed for want of an answer (the console restarting, a network gone for a moment) or with the
  // console's own failure keeps the lock as last read, and says so above it: the page does not drop what it knew.
  // A refusal (the lock is gone, the address names no one deployment) replaces it.
  const stale = query.data !== undefined && query.error !== null && !(query.error instanceof ApiRequestError && query.error.status < 500);
  if (query.error && !stale) {
    return (
      <section>
        <h1 className="mono">{resource}</h1>
        <p role="alert" className="error-text">
          {query.error instanceof ApiRequestError ? <MessageText text={query.error.message} /> : "Could not load this lock: the console did not answer."}
        </p>
        {choices.length > 0 && <DeploymentChoices resource={resource} deployments={choices} label="Deployments holding this lock" />}
        <Link href="/">Back to all locks</Link>
      </section>
    );
  }
  const lock = query.data;
  if (!lock) return <p className="muted">Loading {resource}…</p>;
  const isLive = lock.state === "held" || lock.state === "partial" || lock.state === "elapsed";
  const split = isSplitVote(lock);
  return (
    <section className="lock-detail">
      <p>
        {/* A large fleet's locks page lists groups: the way back is to this lock's group, as it was opened from. */}
        {group !== undefined ? (
          <Link href={groupBack ?? groupHref(group)} className="back-link">
            ← {group}
          </Link>
        ) : (
          <Link href="/" className="back-link">
            ← All locks
          </Link>
        )}
      </p>
      <div className="detail-title">
        {/* Focusable from script only: the focus comes back here when a release took the button away. */}
        <h1 className="mono" tabIndex={-1} ref={title}>
          {lock.resource}
        </h1>
        <ForceReleaseButton resource={lock.resource} lock={lock} serverOffsetMs={offsetMs} focusAfter={() => title.current} {...(group !== undefined ? { group } : {})} />
      </div>
      {stale && (
        <p role="alert" className="warn-text">
          Could not refresh this lock: {query.error instanceof ApiRequestError ? errorText(query.error).replace(/\.$/, "") : "the console did not answer"}. Shown as read at{" "}
          {new Date(query.dataUpdatedAt).toLocaleTimeString(undefined, { hour12: false })}; trying again.
        </p>
      )}
      <div className="panel detail-grid">
        <dl>
          <div>
            <dt>State</dt>
            <dd>
              <LockBadges lock={lock} />
              {lock.unreadable && <p className="muted">Every node that holds it is down or not answering: this is its last known state, not its current one.</p>}
              {lock.warnings.includes("no-ttl") && (
                <p className="warn-text" role="note">
                  This lock never expires by itself (no TTL). If its holder crashed it stays held until someone deletes it.
                </p>
              )}
            </dd>
          </div>
          <div>
            <dt>Deployment</dt>
            <dd>{lock.deployment}</dd>
          </div>
          <div>
            <dt>Format</dt>
            <dd>
              {FORMAT_LABEL[lock.format]} <span className="muted">({lock.redisType})</span>
            </dd>
          </div>
          <div>
            <dt>{lock.holders.length > 1 ? `Holders (${lock.holders.length})` : "Holder"}</dt>
            <dd>
              {/* A split vote with no side ahead names every side's holder, each with its nodes: none leads. */}
              {split && lock.holders.length > 1 && <p>{SPLIT_VOTE_HOLDER}; each side:</p>}
              {lock.holders.length > 1 ? (
                <ul className="holder-list">
                  {lock.holders.map((h) => (
                    <li key={h.id} className="mono" title={h.id}>
                      {holderLine(h)}
                    </li>
                  ))}
                </ul>
              ) : (
                holderText(lock)
              )}
            </dd>
          </div>
          <div>
            <dt>TTL</dt>
            <dd>
              <TtlBar lock={lock} now={now} offsetMs={offsetMs} />
            </dd>
          </div>
          <div>
            <dt>Held for</dt>
            <dd className="mono">{isLive && lock.acquiredAt ? formatDuration(now + offsetMs - lock.acquiredAt) : "—"}</dd>
          </div>
          <div>
            <dt>Fence</dt>
            <dd className="mono">{lock.fence ?? "—"}</dd>
          </div>
          <div>
            <dt>{lock.scope === "single" ? "Scope" : "Quorum"}</dt>
            <dd>
              <NodeDots lock={lock} />{" "}
              {lock.scope === "single"
                ? `single instance: held on ${lock.nodes.filter((n) => n.token !== null).map((n) => n.id).join(", ") || "no node now"}`
                : split
                  ? `split vote: ${lock.quorumHeld} of ${lock.nodes.length} nodes hold each of the values tied for most (quorum ${lock.quorum})`
                  : `${lock.quorumHeld} of ${lock.nodes.length} nodes hold ${lock.token === null ? "the most common value" : "the value"} (quorum ${lock.quorum})`}
            </dd>
          </div>
          <div>
            <dt>Contention</dt>
            <dd>
              {contentionText(lock.contention)}
              {lock.contention.source === null && <span className="muted"> (a failed attempt by this library&apos;s clients leaves no trace in Redis)</span>}
            </dd>
          </div>
          <div>
            <dt>Token</dt>
            <dd className="mono token">{lock.token ?? lock.endedToken ?? "—"}</dd>
          </div>
        </dl>
      </div>

      <h2>Nodes</h2>
      <div className="panel">
        <ScrollTable label="Nodes holding this lock" columns={["Node", "Status", "Value", "TTL on node"]}>
          {lock.nodes.map((node) => (
            <tr key={node.id} aria-label={node.id}>
              <th scope="row">{node.id}</th>
              <td>{node.up ? "up" : "down or not answering"}</td>
              <td className="mono token">{node.token ?? (node.up ? "nothing" : "unknown")}</td>
              {/* (Read when the page was: counted down to now, with the TTL above, between two reads.) */}
              <td className="mono">{node.pttlMs === null ? "—" : formatDuration(Math.max(0, node.pttlMs - (now + offsetMs - lock.serverTime)))}</td>
            </tr>
          ))}
        </ScrollTable>
      </div>

      {lock.replication && <ReplicationPanel replication={lock.replication} />}

      <h2>Contention</h2>
      {lock.contention.attemptsPerMin === null && lock.contentionHistory.attempts.every((n) => n === 0) ? (
        // "No failed attempts" would claim what nobody can see: this library's failed attempts leave no trace (a
        // Redisson fair lock's queue shows its waiters, above, never its failed attempts).
        <p className="muted">Failed attempts are not visible for this lock: its library&apos;s clients leave no trace in Redis when they fail to take it.</p>
      ) : (
        <ContentionChart history={lock.contentionHistory} />
      )}

      <h2>Timeline</h2>
      <ol className="timeline" aria-label="Timeline">
        {[...lock.timeline].reverse().map((entry, i) => (
          <li key={`${entry.at}-${i}`} className={`timeline-${entry.type}`}>
            <time className="mono muted" dateTime={new Date(entry.at).toISOString()}>
              {new Date(entry.at).toLocaleTimeString(undefined, { hour12: false })}.{String(entry.at % 1000).padStart(3, "0")}
            </time>{" "}
            <strong>{TIMELINE_TEXT[entry.type]}</strong>
            {entry.node && <span className="muted"> on {entry.node}</span>}
            {entry.detail && <span> — {entry.detail}</span>}
          </li>
        ))}
        {lock.timeline.length === 0 && <li className="muted">Nothing recorded yet.</li>}
      </ol>
    </section>
  );
}

/** Where the lock's copies are: the primary that holds it (on a cluster, its slot's) and whether each replica has it. */
function ReplicationPanel({ replication }: { replication: LockReplication }) {
  return (
    <>
      <h2>Replication</h2>
      <div className="panel">
        <p>
          {replication.slot !== undefined && (
            <>
              Hash slot <span className="mono">{replication.slot}</span>, held by primary{" "}
            </>
          )}
          {replication.slot === undefined && <>Primary </>}
          <span className="mono">{replication.primary}</span>
          {replication.replicas.length === 0 ? ": no replica is connected, so this lock is on the primary alone." : "."}
        </p>
        {replication.replicas.length > 0 && (
          <ScrollTable label="Replicas of the primary" columns={["Replica", "Link", "Behind the primary", "Has this lock"]}>
            {replication.replicas.map((r) => (
              <tr key={r.address}>
                <th scope="row" className="mono">
                  {r.address}
                </th>
                <td>{r.state}</td>
                <td className="mono">{r.lagBytes === 0 ? "nothing" : `${r.lagBytes} bytes`}</td>
                <td>{r.hasLock ? "yes: a failover to it keeps the lock" : "not yet: a failover to it now may lose the lock"}</td>
              </tr>
            ))}
          </ScrollTable>
        )}
      </div>
    </>
  );
}

/** A table with one header row, scrollable sideways on a narrow screen; `children` are its body rows. */
function ScrollTable({ label, columns, children }: { label: string; columns: string[]; children: React.ReactNode }) {
  return (
    <TableScroll label={`${label}, scrollable`}>
      <table aria-label={label}>
        <TableHead columns={columns} />
        <tbody>{children}</tbody>
      </table>
    </TableScroll>
  );
}
