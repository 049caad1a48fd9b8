import type { LabPreset } from "@/lib/lab/presets";
import { LOCKING_STRATEGIES, MULTI_NODE_STRATEGIES } from "@/lib/lab/settings";
import { oversold } from "@/lib/lab/stats";
import type { LabInfo, RunRecord } from "@/lib/lab/types";

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** How a run ended, in words ("done: sold out" rather than "done (sold-out)"). */
export function stopText(run: Pick<RunRecord, "status" | "stopReason" | "progress" | "settings">): string {
  if (run.status === "running") return run.progress.phase;
  switch (run.stopReason) {
    case "sold-out":
      return "done: sold out";
    case "orders":
      return run.settings.orders === undefined ? "done: all orders placed" : `done: all ${run.settings.orders} orders placed`;
    case "cancelled":
      return "cancelled";
    case "time-limit":
      return "stopped at the time limit";
    case "shutdown":
      return "stopped: the console shut down";
    case "error":
      return "failed";
    default:
      return run.status;
  }
}

/** Whether the stock went back up after a buyer saw it at zero: a late write from a buyer that had read it earlier. */
export function raisedAfterSellOut(run: Pick<RunRecord, "stopReason" | "result">): boolean {
  return run.stopReason === "sold-out" && (run.result?.remaining ?? 0) > 0;
}

/**
 * The stock to show for a run: its result's once ended, the live figure while it runs; null for a run that ended
 * without a result (its stock vanished, or its console went silent), whose last figure read is no longer the stock.
 */
export function stockOf(run: Pick<RunRecord, "status" | "result" | "progress">): number | null {
  if (run.result) return run.result.remaining;
  return run.status === "running" ? run.progress.stock : null;
}

/**
 * Units sold beyond the stock (`result.oversold`, worked out for runs recorded before it existed); null while
 * the run has no result.
 */
export function oversoldOf(run: Pick<RunRecord, "result" | "settings">): number | null {
  const r = run.result;
  if (!r) return null;
  const recorded: number | undefined = (r as Partial<typeof r>).oversold;
  return recorded ?? oversold(r.sold, run.settings.stock);
}

/**
 * What a finished run's numbers mean, one sentence each: why "remaining" is not zero, where lost updates come
 * from, what the rejected stale writes were. Empty while the run has no result.
 */
export function explainRun(run: Pick<RunRecord, "status" | "stopReason" | "result" | "settings">): string[] {
  const r = run.result;
  if (!r) return [];
  const stock = run.settings.stock;
  const out: string[] = [];
  if (r.lostUpdates > 0) {
    out.push(
      // Counted in sales, not units: a race can sell one unit many times, so there can be more lost updates than units.
      `${r.lostUpdates} of the ${plural(r.sold, "sale")} sold a unit already sold (lost updates): the stock only went down by ${stock - r.remaining}, from ${stock} to ${r.remaining}. Two buyers read the same stock and both wrote it back one lower.`,
    );
  } else if (r.lostUpdates < 0) {
    out.push(`${plural(-r.lostUpdates, "unit")} left the stock without a sale being counted: a write went through while its buyer saw an error.`);
  }
  const over = oversoldOf(run) ?? 0;
  if (over > 0) {
    out.push(
      `${plural(over, "unit")} more than the ${stock} in stock ${over === 1 ? "was" : "were"} sold (oversold): buyers were told they had bought units that did not exist. The stock itself never went below 0, because every buyer checked it was above 0 before writing it one lower; the lost updates are where the extra sales went.`,
    );
  }
  if (raisedAfterSellOut(run)) {
    // The late writer read N + 1 and wrote N after the others had sold those units down to 0: N sold units are back
    // in stock, each one a lost update (lostUpdates = oversold + remaining once the stock has sold out).
    const share = r.remaining >= r.lostUpdates ? (r.lostUpdates === 1 ? "the one lost update" : `all ${r.lostUpdates} lost updates`) : `${r.remaining} of the ${r.lostUpdates} lost updates`;
    out.push(
      `Why ${r.remaining} remain although it sold out: the run stops when a buyer reads a stock of 0, but a buyer that had read an older, higher stock wrote it back after that, raising it to ${r.remaining} again. That late write put ${plural(r.remaining, "unit")} already sold back in stock: ${share}.`,
    );
  } else if (r.remaining > 0 && run.stopReason === "orders") {
    out.push(`The run stopped after its ${run.settings.orders ?? r.orders} orders, with ${plural(r.remaining, "unit")} still in stock.`);
  } else if (r.remaining > 0 && run.stopReason !== "sold-out") {
    out.push(`It stopped before the stock ran out: ${plural(r.remaining, "unit")} still in stock.`);
  }
  if (LOCKING_STRATEGIES.has(run.settings.strategy) && r.waitP50Ms === null) {
    out.push("No order took the lock before the run stopped, so no lock wait was measured.");
  }
  const waitingAtStop = (r as Partial<typeof r>).waitingAtStop ?? 0;
  if (waitingAtStop > 0) {
    // A starved run's p99 would otherwise look small: the orders that waited longest are the ones it cannot count.
    out.push(
      `${plural(waitingAtStop, "order was", "orders were")} still waiting for the lock when the run stopped: ${waitingAtStop === 1 ? "it never took it, so its wait is" : "they never took it, so their waits are"} not in the wait p50 and p99, which count only the orders that took the lock.`,
    );
  }
  if (r.staleWritesRejected > 0) {
    out.push(
      `${plural(r.staleWritesRejected, "stale write was", "stale writes were")} rejected: a buyer whose lock had expired under it (a pause past the TTL) tried to read or write the stock with an older fence than the one the next holder had already used. The stock refused it, the buyer retried with a new lock, and no update was lost.`,
    );
  }
  if (r.locksLost > 0 && run.settings.strategy !== "atomic" && run.settings.strategy !== "none") {
    out.push(`${plural(r.locksLost, "lock")} expired under ${r.locksLost === 1 ? "its holder" : "their holders"} before being released (a pause or slow work past the ${run.settings.ttlMs} ms TTL).`);
  }
  const releaseErrors = (r as Partial<typeof r>).releaseErrors ?? 0;
  if (releaseErrors > 0) {
    out.push(
      `${plural(releaseErrors, "lock release")} failed on a node error: ${releaseErrors === 1 ? "that lock was" : "those locks were"} left to expire by ${releaseErrors === 1 ? "its" : "their"} ${run.settings.ttlMs} ms TTL, which the next buyers waited out. The orders themselves went through; these are not counted as errors or as locks lost.`,
    );
  }
  if (r.lostUpdates === 0 && r.remaining === 0 && r.sold === stock) {
    // A write that went through while its buyer saw an error takes a unit from the stock with no sale counted (−1);
    // as many lost updates (+1 each) cancel it out, so with errors the figures cannot show every unit sold once.
    // The atomic decrement cannot lose an update: there an unseen write would show, as lost updates below 0.
    const errors = (r as Partial<typeof r>).errors ?? 0;
    if (errors > 0 && run.settings.strategy !== "atomic") {
      out.push(
        `The stock went down by exactly the ${plural(stock, "unit")} counted as sold, but ${plural(errors, "order")} failed on a node error and ${errors === 1 ? "was" : "were"} placed again: a write that went through while its buyer saw the error took a unit with no sale counted, and cancels out one lost update in these figures. Up to ${plural(errors, "lost update")} may hide here, so whether every unit was sold exactly once cannot be told.`,
      );
    } else {
      out.push(`Every one of the ${stock} units was sold exactly once.`);
    }
  }
  return out;
}

/**
 * What a preset's lesson does not hold on the nodes the lab runs on here, in one sentence; null when it holds.
 * Its fault needs a node the lab has; a kill on nodes the console did not start only cuts the lab's connections
 * (the node neither dies nor forgets its locks); with two nodes a Redlock quorum is both.
 */
export function presetNote(preset: LabPreset, lab: Pick<LabInfo, "nodes" | "faultMode">): string | null {
  const faulted = preset.runs.find((r) => r.fault !== undefined);
  const fault = faulted?.fault;
  if (!faulted || !fault) return null;
  if (fault.node >= lab.nodes) {
    return `Its fault is on node ${fault.node}, and the lab runs on ${lab.nodes === 1 ? "one node" : `${lab.nodes} nodes`} here: the run would be refused.`;
  }
  if (fault.kind === "kill" && lab.faultMode === "connections") {
    return `This console did not start these nodes: the kill cuts the lab workers' connections to node ${fault.node} instead, and the node keeps running with its keys.`;
  }
  if (lab.nodes === 2 && MULTI_NODE_STRATEGIES.has(faulted.strategy)) {
    return `The lab runs on two nodes here, and a Redlock quorum of two is both: no lock can be taken while node ${fault.node} is down.`;
  }
  return null;
}
