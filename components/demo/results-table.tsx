"use client";

import { LOCKING_STRATEGIES } from "@/lib/lab/settings";
import type { RunRecord, RunResult } from "@/lib/lab/types";
import { MessageText } from "../message-text";
import { oversoldOf, raisedAfterSellOut, stockOf, stopText } from "./explain";
import styles from "./lab.module.css";
import { TableHead, TableScroll } from "../table-scroll";

function settingsText(r: RunRecord): string {
  const s = r.settings;
  const parts = [`stock ${s.stock}`, `${s.workers} workers`, `TTL ${s.ttlMs} ms`, `work ${s.workMs} ms`];
  if (s.orders !== undefined) parts.push(`${s.orders} orders`);
  // Three significant digits: a chance of 0.004 reads 0.4%, not a rounded "0%" that says the run had no pauses.
  if (s.pause) parts.push(`pauses ${Number((s.pause.probability * 100).toPrecision(3))}% × ${s.pause.ms} ms`);
  if (s.fault) {
    const when = `at ${s.fault.atMs} ms${s.fault.forMs !== undefined ? ` for ${s.fault.forMs} ms` : ""}`;
    // On nodes the console does not own, the fault never touches the node: it acts on the lab's own connections.
    if (r.fault?.mode === "connections") {
      parts.push(s.fault.kind === "kill" ? `lab's connections to node-${s.fault.node} cut ${when}` : `lab's commands to node-${s.fault.node} held ${when}`);
    } else {
      parts.push(`${s.fault.kind} node-${s.fault.node} ${when}`);
    }
  }
  return parts.join(", ");
}

const ms = (n: number) => `${n < 10 ? n.toFixed(1) : Math.round(n)} ms`;

/** A lock-wait figure: none for a strategy without a lock, none measured for a locking run that never took its lock. */
const waitText = (locks: boolean, wait: number | null) => (!locks ? "no lock" : wait === null ? "no lock taken" : ms(wait));

/** Runs side by side, one row each: the numbers to compare, lost updates and oversold units marked (red and ⚠) when any. */
export function ResultsTable({
  runs,
  highlight,
  onSelect,
}: {
  runs: RunRecord[];
  highlight: ReadonlySet<string>;
  /** Null while a run is on: the live panel stays on it. */
  onSelect: ((id: string) => void) | null;
}) {
  if (runs.length === 0) return <p className="muted">No runs yet. Pick a preset or fill in the form.</p>;
  return (
    <TableScroll label="Lab results, scrollable">
      <table className={styles.table} aria-label="Lab results">
        <TableHead columns={["Strategy", "Status", "Sold", "Remaining", "Lost updates", "Oversold", "Sold/s", "Wait p50", "Wait p99", "Retries", "Stale writes rejected", "Duration", "Settings"]} />
        <tbody>
          {runs.map((r) => {
            const res = r.result;
            const locks = LOCKING_STRATEGIES.has(r.settings.strategy);
            const oversold = oversoldOf(r);
            // Absent from runs recorded before it was added.
            const waitingAtStop = (res as Partial<RunResult> | undefined)?.waitingAtStop ?? 0;
            return (
              <tr key={r.id} data-run-id={r.id} className={highlight.has(r.id) ? styles.highlight : undefined}>
                <th scope="row" className="mono">
                  <button type="button" className={styles.linkButton} title="Show this run's charts" disabled={!onSelect} onClick={() => onSelect?.(r.id)}>
                    {r.settings.strategy}
                  </button>
                </th>
                <td data-label="status">
                  {/* Why it stopped (the time limit, a cancel, a sell-out), as the run's own panel says it; the colour is its status. */}
                  <span className={`${styles.status} ${styles[r.status]}`}>{stopText(r)}</span>
                </td>
                <td className={styles.num}>{res?.sold ?? r.progress.sold}</td>
                <td className={styles.num}>
                  {stockOf(r) ?? "—"}
                  {raisedAfterSellOut(r) && <span className={styles.cellNote}>raised by a late write</span>}
                </td>
                <td className={`${styles.num} ${res && res.lostUpdates !== 0 ? styles.bad : ""}`} data-label="lost updates">
                  {res ? res.lostUpdates : "—"}
                </td>
                <td className={`${styles.num} ${oversold ? styles.bad : ""}`} data-label="oversold">
                  {oversold ?? "—"}
                </td>
                <td className={styles.num} data-label="sold per second" title="Units sold per second (orders that did not sell are not counted)">
                  {res ? res.ordersPerSec : "—"}
                </td>
                <td className={styles.num} data-label="wait p50">{res ? waitText(locks, res.waitP50Ms) : "—"}</td>
                <td className={styles.num} data-label="wait p99">
                  {res ? waitText(locks, res.waitP99Ms) : "—"}
                  {/* Orders that never took the lock are not in the percentiles: say how many, or a starved run's p99 looks small. */}
                  {waitingAtStop > 0 && <span className={styles.cellNote}>{waitingAtStop === 1 ? "1 order" : `${waitingAtStop} orders`} still waiting at the stop</span>}
                </td>
                <td className={styles.num}>{res?.retries ?? r.progress.retries}</td>
                <td className={styles.num}>{res?.staleWritesRejected ?? r.progress.staleWritesRejected}</td>
                <td className={styles.num}>{res ? `${(res.durationMs / 1000).toFixed(1)} s` : "—"}</td>
                <td className={styles.settings} title={r.fault?.description ?? r.error ?? undefined}>
                  {settingsText(r)}
                  {r.error && (
                    <div className={styles.bad}>
                      <MessageText text={r.error} />
                    </div>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </TableScroll>
  );
}
