"use client";

import Link from "next/link";
import { useQuery } from "@tanstack/react-query";
import type { LockLoss } from "@/lib/locks/types";
import { apiFetch } from "../api-client";
import { TableHead, TableScroll } from "../table-scroll";
import { formatDuration, lockHref } from "./format";
import { LoadError } from "./lock-rows";
import { useNow } from "./use-live-locks";

/** How many rows each of the panel's lists shows; `GET /api/losses` gives them all. */
const SHOWN = 10;

const count = (n: number) => (n === 1 ? "1 lock" : `${n.toLocaleString("en")} locks`);

/**
 * The locks nodes lost while their TTL ran (a restart without them, a failover to a replica that never had them)
 * in the last 24 hours: the on-call's answer to "which locks?" when a lost-lock alert fires, long after the
 * locks themselves left the list. Shown only when there are any, or when they could not be read: those gone first,
 * those that go on (a Redlock that kept its quorum on the other nodes) folded away.
 */
export function LossesPanel() {
  const { data, dataUpdatedAt, error } = useQuery({
    queryKey: ["losses"],
    queryFn: () => apiFetch<{ serverTime: number; deployments: string[]; losses: LockLoss[] }>("/api/losses"),
    refetchInterval: 10_000,
  });
  // Ages count on with the browser's clock, set to the console's by its last answer: between two answers (10 s
  // apart), and after the last one where the console stops answering, "5.0 s ago" stays true.
  const now = useNow(1_000) + (data ? data.serverTime - dataUpdatedAt : 0);
  const losses = data?.losses ?? [];
  // A read that failed is not "no losses": say so (in the page's words for a session that ended), above the last
  // losses read where there are any.
  const failed = error ? <LoadError what="the locks lost in node restarts and failovers" error={error} /> : null;
  if (!data || losses.length === 0) {
    if (!failed) return null;
    return (
      <section className="panel losses-panel" aria-labelledby="losses-heading">
        <h2 id="losses-heading">Lost in node restarts and failovers</h2>
        {failed}
      </section>
    );
  }
  // (Where the console watches several deployments, a lock's page and its node are named with its deployment.)
  const multi = data.deployments.length > 1;
  const nodes = new Set(losses.map((l) => (multi ? `${l.deployment} ${l.node}` : l.node)));
  const who = nodes.size === 1 ? [...nodes][0] : "nodes";
  const ended = losses.filter((l) => !l.wentOn);
  const wentOn = losses.filter((l) => l.wentOn);
  const table = (rows: LockLoss[], label: string) => (
    <>
      <TableScroll label={`${label}, scrollable`}>
        <table className="losses-table" aria-label={label}>
          <TableHead columns={["When", "Lock", "Node", "How"]} />
          <tbody>
            {rows.slice(0, SHOWN).map((loss) => (
              <tr key={`${loss.deployment} ${loss.resource} ${loss.node} ${loss.at}`}>
                <td className="mono" title={new Date(loss.at).toISOString()}>
                  {formatDuration(now - loss.at)} ago
                </td>
                <td className="mono wraps">
                  <Link href={lockHref(loss.resource, multi ? loss.deployment : undefined)}>{loss.resource}</Link>
                </td>
                <td>{multi ? `${loss.deployment} ${loss.node}` : loss.node}</td>
                <td>{loss.kind === "restart" ? "restarted without it" : "failover to a replica without it"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableScroll>
      {rows.length > SHOWN && (
        <p className="muted">
          The {SHOWN} newest of {rows.length.toLocaleString("en")}: <code>GET /api/losses</code> lists them all.
        </p>
      )}
    </>
  );
  return (
    <section className="panel losses-panel" aria-labelledby="losses-heading">
      <h2 id="losses-heading">
        <span aria-hidden>⚠ </span>Lost in node restarts and failovers
      </h2>
      {failed}
      <p>
        In the last 24 hours, {who} lost {count(losses.length)} while {losses.length === 1 ? "its" : "their"} TTL ran
        {ended.length === 0
          ? losses.length === 1
            ? "; it goes on, held on a quorum of the other nodes."
            : "; each goes on, held on a quorum of the other nodes."
          : ended.length === 1
            ? `; ${losses.length === 1 ? "it is" : "1 of them is"} gone: its holder may still think it holds it while another client takes it. Check the work that holder did.`
            : `; ${ended.length === losses.length ? "they are" : `${ended.length.toLocaleString("en")} of them are`} gone: their holders may still think they hold them while other clients take them. Check the work those holders did.`}
      </p>
      {ended.length > 0 && table(ended, "Lost and gone")}
      {wentOn.length > 0 && (
        <details className="losses-went-on">
          <summary>
            {count(wentOn.length)} {wentOn.length === 1 ? "goes" : "go"} on, held on a quorum of the other nodes
          </summary>
          {table(wentOn, "Lost copies, going on")}
        </details>
      )}
    </section>
  );
}
