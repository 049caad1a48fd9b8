import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";
import { ResultsTable } from "@/components/demo/results-table";
import type { RunRecord, RunResult } from "@/lib/lab/types";
import { labResult } from "../support/lab-result";


const record = (over: Partial<RunRecord>): RunRecord => ({
  id: "rmx1wokthvsb3i5",
  status: "done",
  stopReason: "sold-out",
  settings: { strategy: "none", stock: 100, workers: 20, ttlMs: 200, workMs: 5 },
  actor: "alice",
  createdAt: 1,
  finishedAt: 2,
  heartbeatAt: 2,
  progress: { phase: "finished", fraction: 1, elapsedMs: 2000, sold: 100, orders: 100, stock: 0, retries: 0, staleWritesRejected: 0, errors: 0 },
  result: labResult({}),
  notes: [],
  ...over,
});

const table = (runs: RunRecord[]) => renderToStaticMarkup(createElement(ResultsTable, { runs, highlight: new Set<string>(), onSelect: null }));
const headers = (html: string) => [...html.matchAll(/<th scope="col">([^<]*)<\/th>/g)].map((m) => m[1]);
const cell = (html: string, label: string) => new RegExp(`<td[^>]*data-label="${label}"[^>]*>([^<]*)<`).exec(html)?.[1];

describe("the lab's results table", () => {
  it("shows how many units were sold beyond the stock, a column that can say something went wrong", () => {
    // The race without a lock: 120 sales out of a stock of 100, the stock written down to 0 and never below it.
    const html = table([record({ result: labResult({ sold: 120, remaining: 0, lostUpdates: 20, oversold: 20 }) })]);
    expect(headers(html)).toContain("Oversold");
    expect(headers(html)).not.toContain("Stock never negative");
    expect(cell(html, "oversold")).toBe("20");
    expect(html).toMatch(/<td class="[^"]*bad[^"]*" data-label="oversold"/);
    const exact = table([record({})]);
    expect(cell(exact, "oversold")).toBe("0");
    expect(exact).not.toMatch(/<td class="[^"]*bad[^"]*" data-label="oversold"/);
  });

  it("names the rate for what it counts: units sold per second, not orders placed", () => {
    // 150 orders placed in 2 s, 100 of them sold: the figure is the 50 sales a second.
    const html = table([record({ result: labResult({ sold: 100, orders: 150, ordersPerSec: 50, durationMs: 2000 }) })]);
    expect(headers(html)).not.toContain("Orders/s");
    expect(headers(html)).toContain("Sold/s");
    expect(cell(html, "sold per second")).toBe("50");
  });

  it("says in a run's settings what its fault did: a kill, or a cut of the lab's connections to a node it does not own", () => {
    const fault = { node: 1, kind: "kill" as const, atMs: 1000, forMs: 2500 };
    const settings = { strategy: "redlock" as const, stock: 400, workers: 50, ttlMs: 1000, workMs: 5, fault };
    const report = (mode: "process" | "connections") => ({ ...fault, mode, startedAtMs: 1000, endedAtMs: 3500, description: "" });
    const cut = table([record({ settings, fault: report("connections") })]);
    expect(cut).not.toMatch(/kill node-1/);
    expect(cut).toMatch(/lab&#x27;s connections to node-1 cut at 1000 ms for 2500 ms/);
    const stalled = table([record({ settings: { ...settings, fault: { ...fault, kind: "pause" } }, fault: { ...report("connections"), kind: "pause" } })]);
    expect(stalled).toMatch(/lab&#x27;s commands to node-1 held at 1000 ms for 2500 ms/);
    expect(table([record({ settings, fault: report("process") })])).toMatch(/kill node-1 at 1000 ms for 2500 ms/);
  });

  it("says a run's pause chance as it was set, a small one too", () => {
    const settings = (probability: number) => ({ strategy: "naive" as const, stock: 100, workers: 20, ttlMs: 200, workMs: 5, pause: { probability, ms: 450 } });
    expect(table([record({ settings: settings(0.04) })])).toMatch(/pauses 4% × 450 ms/);
    // One order in 250 stalls: not "0%", which would say the run had no pauses.
    expect(table([record({ settings: settings(0.004) })])).toMatch(/pauses 0\.4% × 450 ms/);
    expect(table([record({ settings: settings(0.0001) })])).toMatch(/pauses 0\.01% × 450 ms/);
    expect(table([record({ settings: settings(0.07) })])).toMatch(/pauses 7% × 450 ms/);
  });

  it("says a locking run that never took its lock has no lock wait, not a wait of 0 ms", () => {
    const settings = { strategy: "naive" as const, stock: 100, workers: 3, ttlMs: 1000, workMs: 1 };
    const html = table([record({ settings, stopReason: "time-limit", result: labResult({ sold: 0, remaining: 100, waitP50Ms: null, waitP99Ms: null }) })]);
    expect(cell(html, "wait p50")).toBe("no lock taken");
    expect(cell(html, "wait p99")).toBe("no lock taken");
    expect(html).not.toMatch(/0\.0 ms/);
    expect(cell(table([record({ settings })]), "wait p99")).toBe("10 ms");
    expect(cell(table([record({})]), "wait p99")).toBe("no lock");
  });

  it("says in the status column why a run stopped: the time limit, a cancel, a sell-out", () => {
    const status = (html: string) => /<td[^>]*data-label="status"[^>]*><span[^>]*>([^<]*)</.exec(html)?.[1];
    expect(status(table([record({ stopReason: "time-limit", result: labResult({ sold: 40, remaining: 60 }) })]))).toBe("stopped at the time limit");
    expect(status(table([record({ status: "cancelled", stopReason: "cancelled", result: labResult({ sold: 40, remaining: 60 }) })]))).toBe("cancelled");
    expect(status(table([record({ status: "cancelled", stopReason: "shutdown", result: labResult({ sold: 40, remaining: 60 }) })]))).toBe("stopped: the console shut down");
    expect(status(table([record({})]))).toBe("done: sold out");
    expect(status(table([record({ status: "failed", stopReason: "error", result: undefined, error: "node 0 vanished" })]))).toBe("failed");
  });

  it("says next to the wait p99 how many orders were still waiting for the lock when the run stopped", () => {
    const settings = { strategy: "redlock" as const, stock: 100, workers: 50, ttlMs: 1000, workMs: 1 };
    const html = table([record({ settings, stopReason: "time-limit", result: labResult({ sold: 40, remaining: 60, waitP99Ms: 12, waitingAtStop: 45 }) })]);
    expect(html).toMatch(/data-label="wait p99"[^>]*>12 ms<span[^>]*>45 orders still waiting at the stop<\/span>/);
    expect(table([record({ settings })])).not.toMatch(/still waiting at the stop/);
  });

  it("works the oversold figure out for a run recorded before the field existed", () => {
    const { oversold: _oversold, ...old } = labResult({ sold: 130, lostUpdates: 30 });
    expect(cell(table([record({ result: old as RunResult })]), "oversold")).toBe("30");
  });
});

describe("the lab's results table, for a run that ended without a result", () => {
  it("shows no stock left for a run whose stock vanished mid-run, rather than the last figure read before it did", () => {
    // Node 0 restarted empty mid-run: the stock is gone, and the run failed with no result to misread. Its progress
    // still holds the last stock read while the run was selling.
    const vanished = record({
      status: "failed",
      stopReason: "error",
      error: "The stock on node 0 vanished mid-run (node 0 restarted empty, or the run's keys were deleted), so what was sold cannot be judged.",
      settings: { strategy: "redlock", stock: 100_000, workers: 10, ttlMs: 1000, workMs: 2 },
      progress: { phase: "finished", fraction: 0.005, elapsedMs: 3000, sold: 523, orders: 523, stock: 99_477, retries: 0, staleWritesRejected: 0, errors: 0 },
      result: undefined,
    });
    const cells = [...table([vanished]).matchAll(/<td[^>]*>(.*?)<\/td>/g)].map((m) => m[1]);
    // Status, Sold, Remaining: the units the workers sold are known; what is left of a stock that vanished is not.
    expect(cells[1]).toBe("523");
    expect(cells[2]).toBe("—");
    // A running run shows the stock as it stands.
    const running = record({ status: "running", stopReason: undefined, result: undefined, progress: { ...vanished.progress, phase: "running" } });
    expect([...table([running]).matchAll(/<td[^>]*>(.*?)<\/td>/g)].map((m) => m[1])[2]).toBe("99477");
  });
});
