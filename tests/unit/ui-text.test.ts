import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { explainRun, presetNote, raisedAfterSellOut, stopText } from "@/components/demo/explain";
import { findPreset } from "@/lib/lab/presets";
import { MessageText } from "@/components/message-text";
import type { RunRecord } from "@/lib/lab/types";
import { labResult } from "../support/lab-result";

const html = (text: string) => renderToStaticMarkup(createElement(MessageText, { text }));

describe("messages from the API", () => {
  it("shows quoted names as code and never a backtick", () => {
    expect(html("No node holds `lock:nothing` and it has no recent history.")).toBe("No node holds <code>lock:nothing</code> and it has no recent history.");
    expect(html("unknown field(s) `a`, `b`")).toBe("unknown field(s) <code>a</code>, <code>b</code>");
    expect(html("plain words")).toBe("plain words");
  });

  it("drops an unpaired backtick and escapes markup in the text", () => {
    expect(html("held by `x and <b>y</b>")).toBe("held by x and &lt;b&gt;y&lt;/b&gt;");
  });
});


type Explained = Pick<RunRecord, "status" | "stopReason" | "result" | "settings" | "progress">;
const run = (over: Partial<Explained>): Explained => ({
  status: "done",
  stopReason: "sold-out",
  settings: { strategy: "none", stock: 100, workers: 20, ttlMs: 200, workMs: 5 },
  progress: { phase: "finished", fraction: 1, elapsedMs: 2000, sold: 100, orders: 100, stock: 0, retries: 0, staleWritesRejected: 0, errors: 0 },
  result: labResult({}),
  ...over,
});

describe("lab results in words", () => {
  it("says why stock remains after selling out: a late write raised it again", () => {
    const raced = run({ result: labResult({ sold: 155, remaining: 5, lostUpdates: 60 }) });
    expect(raisedAfterSellOut(raced)).toBe(true);
    const lines = explainRun(raced);
    expect(lines[0]).toBe(
      "60 of the 155 sales sold a unit already sold (lost updates): the stock only went down by 95, from 100 to 5. Two buyers read the same stock and both wrote it back one lower.",
    );
    expect(lines[1]).toContain("Why 5 remain although it sold out");
    expect(lines[1]).toContain("raising it to 5 again");
  });

  it("says a locking run that never took its lock measured no lock wait", () => {
    const starved = run({ stopReason: "time-limit", settings: { strategy: "redlock", stock: 100, workers: 3, ttlMs: 1000, workMs: 1 }, result: labResult({ sold: 0, remaining: 100, waitP50Ms: null, waitP99Ms: null }) });
    expect(explainRun(starved)).toContain("No order took the lock before the run stopped, so no lock wait was measured.");
    expect(explainRun(run({})).join(" ")).not.toMatch(/no lock wait/);
  });

  it("says how many orders were still waiting for the lock when the run stopped, and that the percentiles leave them out", () => {
    const starved = run({ stopReason: "cancelled", status: "cancelled", settings: { strategy: "naive", stock: 100, workers: 20, ttlMs: 1000, workMs: 1 }, result: labResult({ sold: 10, remaining: 90, waitingAtStop: 19 }) });
    expect(explainRun(starved)).toContain(
      "19 orders were still waiting for the lock when the run stopped: they never took it, so their waits are not in the wait p50 and p99, which count only the orders that took the lock.",
    );
    const one = run({ settings: { strategy: "naive", stock: 100, workers: 20, ttlMs: 1000, workMs: 1 }, result: labResult({ waitingAtStop: 1 }) });
    expect(explainRun(one)).toContain(
      "1 order was still waiting for the lock when the run stopped: it never took it, so its wait is not in the wait p50 and p99, which count only the orders that took the lock.",
    );
    expect(explainRun(run({ settings: one.settings })).join(" ")).not.toMatch(/still waiting/);
  });

  it("counts the lost updates of a race as sales of units already sold, never as more units than the stock had", () => {
    // The read-modify-write race: 25 buyers kept writing back stale stock, so 100 units took 2346 sales to sell out.
    const race = run({ result: labResult({ sold: 2346, remaining: 0, lostUpdates: 2246, oversold: 2246 }) });
    const [first] = explainRun(race);
    expect(first).not.toMatch(/2246 units were sold twice/);
    expect(first).toMatch(/^2246 of the 2346 sales sold a unit already sold \(lost updates\): the stock only went down by 100, from 100 to 0\./);
  });

  it("says how many of the lost updates the late write that raised the stock made, all at once", () => {
    // The naive lock with pauses: a holder read 32, stalled past its TTL while the others sold those 32 units, and
    // wrote 31 after the sale closed: 31 sold units back in stock, most of the 32 lost updates.
    const naive = run({ settings: { strategy: "naive", stock: 100, workers: 20, ttlMs: 200, workMs: 5 }, result: labResult({ sold: 101, remaining: 31, lostUpdates: 32, oversold: 1 }) });
    const why = explainRun(naive).find((line) => line.startsWith("Why 31 remain"));
    expect(why).toContain("31 of the 32 lost updates");
    expect(why).not.toContain("one of the lost updates");
    const all = run({ result: labResult({ sold: 100, remaining: 1, lostUpdates: 1, oversold: 0 }) });
    expect(explainRun(all).find((line) => line.startsWith("Why 1 remain"))).toContain("the one lost update");
  });

  it("says how many units were sold that the stock never had", () => {
    const raced = run({ result: labResult({ sold: 120, remaining: 0, lostUpdates: 20, oversold: 20 }) });
    expect(explainRun(raced)).toContain(
      "20 units more than the 100 in stock were sold (oversold): buyers were told they had bought units that did not exist. The stock itself never went below 0, because every buyer checked it was above 0 before writing it one lower; the lost updates are where the extra sales went.",
    );
    expect(explainRun(run({ result: labResult({ sold: 100, lostUpdates: 5, remaining: 5 }) })).join(" ")).not.toMatch(/oversold/);
  });

  it("says a release that failed on a node error left the lock to expire, and is neither a lost lock nor a failed order", () => {
    const naive = run({ settings: { strategy: "naive", stock: 100, workers: 20, ttlMs: 200, workMs: 5 }, result: labResult({ releaseErrors: 2 }) });
    expect(explainRun(naive)).toContain(
      "2 lock releases failed on a node error: those locks were left to expire by their 200 ms TTL, which the next buyers waited out. The orders themselves went through; these are not counted as errors or as locks lost.",
    );
    expect(explainRun(run({ settings: { strategy: "naive", stock: 100, workers: 20, ttlMs: 200, workMs: 5 } })).join(" ")).not.toMatch(/releases? failed/);
  });

  it("says what rejected stale writes were, and that every unit sold once", () => {
    const fenced = run({ settings: { strategy: "redlock-fenced", stock: 100, workers: 20, ttlMs: 200, workMs: 5 }, result: labResult({ staleWritesRejected: 1, locksLost: 3 }) });
    const lines = explainRun(fenced);
    expect(lines[0]).toMatch(/^1 stale write was rejected: a buyer whose lock had expired under it/);
    expect(lines[1]).toBe("3 locks expired under their holders before being released (a pause or slow work past the 200 ms TTL).");
    expect(lines[2]).toBe("Every one of the 100 units was sold exactly once.");
    expect(raisedAfterSellOut(fenced)).toBe(false);
  });

  it("never says every unit sold exactly once when orders failed on node errors, and says what those errors leave open", () => {
    // One write went through while its buyer saw an error (a unit gone, no sale counted) and one update was lost
    // (a sale counted, no unit gone): the figures come out even, as in a run where nothing went wrong.
    const naive = run({ settings: { strategy: "naive", stock: 100, workers: 20, ttlMs: 200, workMs: 5 }, result: labResult({ errors: 3 }) });
    const lines = explainRun(naive);
    expect(lines.join(" ")).not.toContain("exactly once.");
    expect(lines).toContain(
      "The stock went down by exactly the 100 units counted as sold, but 3 orders failed on a node error and were placed again: a write that went through while its buyer saw the error took a unit with no sale counted, and cancels out one lost update in these figures. Up to 3 lost updates may hide here, so whether every unit was sold exactly once cannot be told.",
    );
    expect(explainRun(run({ result: labResult({ errors: 1 }) })).join(" ")).toContain("1 order failed on a node error and was placed again");
    // The atomic decrement cannot lose an update, so an unseen write would have shown (lost updates below 0).
    const atomic = run({ settings: { strategy: "atomic", stock: 100, workers: 20, ttlMs: 200, workMs: 5 }, result: labResult({ errors: 3 }) });
    expect(explainRun(atomic)).toContain("Every one of the 100 units was sold exactly once.");
  });

  it("tells a run stopped early from one that sold out", () => {
    expect(explainRun(run({ status: "cancelled", stopReason: "cancelled", result: labResult({ sold: 40, remaining: 60 }) }))).toEqual(["It stopped before the stock ran out: 60 units still in stock."]);
    expect(stopText(run({ status: "cancelled", stopReason: "cancelled" }))).toBe("cancelled");
    expect(stopText(run({}))).toBe("done: sold out");
    expect(stopText(run({ stopReason: "orders", settings: { strategy: "atomic", stock: 100, workers: 2, ttlMs: 200, workMs: 0, orders: 30 } }))).toBe("done: all 30 orders placed");
    expect(explainRun(run({ status: "running", result: undefined }))).toEqual([]);
  });
});

describe("lab presets in words", () => {
  const kill = findPreset("redlock-kill")!;

  it("says a preset's kill only cuts the lab's connections where the console does not own the nodes", () => {
    expect(presetNote(kill, { nodes: 3, faultMode: "connections" })).toBe(
      "This console did not start these nodes: the kill cuts the lab workers' connections to node 1 instead, and the node keeps running with its keys.",
    );
    expect(presetNote(kill, { nodes: 3, faultMode: "process" })).toBeNull();
    expect(presetNote(findPreset("naive-pauses")!, { nodes: 3, faultMode: "connections" })).toBeNull();
  });

  it("says a preset's fault needs a node the lab does not have", () => {
    expect(presetNote(kill, { nodes: 1, faultMode: "process" })).toBe("Its fault is on node 1, and the lab runs on one node here: the run would be refused.");
    // Two nodes: a Redlock quorum is both, so nothing is sold while node 1 is down.
    expect(presetNote(kill, { nodes: 2, faultMode: "process" })).toBe("The lab runs on two nodes here, and a Redlock quorum of two is both: no lock can be taken while node 1 is down.");
  });
});
