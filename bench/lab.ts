/**
 * Contention-lab benchmark: `npm run bench:lab` (`-- --quick` for a short smoke run, `-- --json` for JSON
 * on stdout). Each strategy sells 2,000 units to 50 workers (each its own client), 1 ms of work per order,
 * on three redis-server nodes this script starts in os.tmpdir(); atomic is the ceiling. Strategies run in
 * a rotating order over several rounds in this one process and the medians are printed.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { newRunId } from "@/lib/lab/keys";
import { LabRun } from "@/lib/lab/runner";
import { STRATEGIES, type RunSettings, type Strategy } from "@/lib/lab/settings";
import type { RunResult } from "@/lib/lab/types";
import { startRedisNodes } from "@/lib/redis-node";

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

async function main(): Promise<void> {
  const quick = process.argv.includes("--quick");
  const json = process.argv.includes("--json");
  const rounds = quick ? 1 : 3;
  const stock = quick ? 500 : 2000;
  const log = (line: string) => (json ? process.stderr : process.stdout).write(`${line}\n`);

  const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-bench-lab-"));
  const nodes = await startRedisNodes(3, { dir });
  const results = new Map<Strategy, RunResult[]>(STRATEGIES.map((s) => [s, []]));
  try {
    for (let round = 0; round < rounds; round++) {
      // Rotate the order so no strategy always runs first (cold scripts) or last (a warm, busy machine).
      const order = STRATEGIES.map((_, i) => STRATEGIES[(i + round) % STRATEGIES.length]!);
      for (const strategy of order) {
        const settings: RunSettings = { strategy, stock, workers: 50, ttlMs: 1000, workMs: 1 };
        const run = new LabRun({ id: newRunId(), settings, nodeUrls: nodes.map((n) => n.url) });
        const outcome = await run.run();
        const { result } = outcome;
        if (outcome.stopReason !== "sold-out" || !result) throw new Error(`${strategy} stopped: ${outcome.stopReason} ${outcome.error ?? ""}`);
        results.get(strategy)!.push(result);
        log(`round ${round + 1}/${rounds} ${strategy}: ${result.ordersPerSec} sold/s, p99 wait ${result.waitP99Ms} ms`);
      }
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
  }

  const ceiling = median(results.get("atomic")!.map((r) => r.ordersPerSec));
  const rows = STRATEGIES.map((strategy) => {
    const runs = results.get(strategy)!;
    const ordersPerSec = median(runs.map((r) => r.ordersPerSec));
    return {
      strategy,
      ordersPerSec,
      // Every run here sold out, so a locking one took its lock: its waits are never null.
      waitP50Ms: median(runs.map((r) => r.waitP50Ms ?? 0)),
      waitP99Ms: median(runs.map((r) => r.waitP99Ms ?? 0)),
      ofAtomic: ceiling > 0 ? Math.round((ordersPerSec / ceiling) * 1000) / 1000 : 0,
      lostUpdates: median(runs.map((r) => r.lostUpdates)),
      retries: median(runs.map((r) => r.retries)),
    };
  });

  log("");
  log(`stock ${stock}, 50 workers, work 1 ms, TTL 1000 ms, 3 nodes, ${rounds} round(s), medians`);
  log("");
  log("| strategy | sold/s | of atomic | wait p50 ms | wait p99 ms | lost updates | retries |");
  log("|---|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    log(`| ${r.strategy} | ${r.ordersPerSec} | ${r.ofAtomic} | ${r.strategy === "none" || r.strategy === "atomic" ? "no lock" : r.waitP50Ms} | ${r.strategy === "none" || r.strategy === "atomic" ? "no lock" : r.waitP99Ms} | ${r.lostUpdates} | ${r.retries} |`);
  }
  if (json) process.stdout.write(`${JSON.stringify({ stock, workers: 50, workMs: 1, ttlMs: 1000, rounds, rows }, null, 2)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:lab failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
