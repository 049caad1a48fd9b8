"use client";

import Link from "next/link";
import { useQuery } from "@tanstack/react-query";
import type { LockLoss } from "@/lib/locks/types";
import { apiFetch } from "../api-client";
import { TableHead, TableScroll } from "../table-scroll";
import { formatDuration, lockHref } from "./format";

/** The newest losses the panel lists; `GET /api/losses` gives them all. */
const SHOWN = 20;

/**
 * The locks nodes lost while their TTL ran (a restart without them, a failover to a replica that never had them)
 * in the last 24 hours: the on-call's answer to "which locks?" when a lost-lock alert fires, long after the
 * locks themselves left the list. Shown only when there are any.
 */
export function LossesPanel() {
  const { data } = useQuery({
    queryKey: ["losses"],
    queryFn: () => apiFetch<{ serverTime: number; losses: LockLoss[] }>("/api/losses"),
    refetchInterval: 10_000,
  });
  const losses = data?.losses ?? [];
  if (!data || losses.length === 0) return null;
  const multi = new Set(losses.map((l) => l.deployment)).size > 1;
  const wentOn = losses.filter((l) => l.wentOn).length;
  const lost = losses.length === 1 ? "1 lock" : `${losses.length.toLocaleString("en")} locks`;
  return (
    <section className="panel losses-panel" aria-labelledby="losses-heading">
      <h2 id="losses-heading">
        <span aria-hidden>⚠ </span>Lost in node restarts and failovers
      </h2>
      <p>
        In the last 24 hours, nodes lost {lost} while {losses.length === 1 ? "its" : "their"} TTL ran
        {wentOn > 0 ? ` (${wentOn.toLocaleString("en")} of them ${wentOn === 1 ? "goes" : "go"} on, held on a quorum of the other nodes)` : ""}. Their holders may
        still think they hold them while another client takes them: check the work those holders did.
      </p>
      <TableScroll label="Losses, scrollable">
        <table className="losses-table" aria-label="Losses">
          <TableHead columns={["When", "Lock", "Node", "How", "Now"]} />
          <tbody>
            {losses.slice(0, SHOWN).map((loss) => (
              <tr key={`${loss.deployment} ${loss.resource} ${loss.node} ${loss.at}`}>
                <td className="mono" title={new Date(loss.at).toISOString()}>
                  {formatDuration(data.serverTime - loss.at)} ago
                </td>
                <td className="mono wraps">
                  <Link href={lockHref(loss.resource, multi ? loss.deployment : undefined)}>{loss.resource}</Link>
                </td>
                <td>{multi ? `${loss.deployment} ${loss.node}` : loss.node}</td>
                <td>{loss.kind === "restart" ? "restarted without it" : "failover to a replica without it"}</td>
                <td>{loss.wentOn ? "goes on (quorum kept)" : "ended"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableScroll>
      {losses.length > SHOWN && (
        <p className="muted">
          The {SHOWN} newest of {losses.length.toLocaleString("en")}: <code>GET /api/losses</code> lists them all.
        </p>
      )}
    </section>
  );
}
