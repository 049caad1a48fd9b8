/**
 * The hot-resource scenario of the engine benchmark with every worker in its own process (not a test):
 * `npm run bench:engine:processes [-- --json] [-- --quick]`.
 *
 * `npm run bench:engine` runs its 20 workers in one process, as issue 3 asks; there, a waiter hears of a
 * hand-over with the release reply. Here each of the 20 workers is a child process with its own clients and
 * engine, so a hand-over reaches the next holder by pub/sub and wakes another process, while node-redlock's
 * releasing worker asks again in its own process. Same nodes (three, then one), hold, TTL and duration;
 * the contenders run alternately, several rounds, medians printed.
 */
import { fork } from "node:child_process";
import os from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import Redis from "ioredis";
import { AcquireAbortedError, Redlock } from "@lockscope/redlock";
import { startRedisNodes } from "@/lib/redis-node";
import { NodeRedlock } from "./engine-node-redlock";
import { fixed, quantile, scratchDir, summarize } from "./support";

const WORKERS = 20;
const HOLD_MS = 5;
const TTL_MS = 10_000;
const CONTENDERS = ["node-redlock (defaults)", "engine (hand-over)", "engine fair"] as const;
type Contender = (typeof CONTENDERS)[number];

interface ChildResult {
  acquisitions: number;
  waits: number[];
}

// ---------------------------------------------------------------------------------------------------
// Child: one worker.

async function child(ports: number[], contender: Contender): Promise<void> {
  const clients = ports.map((port) => {
    const client = new Redis(port, "127.0.0.1", { enableAutoPipelining: true, maxRetriesPerRequest: 1 });
    client.on("error", () => {});
    return client;
  });
  const resource = "lock:bench/hot";
  let acquire: (signal: AbortSignal) => Promise<() => Promise<unknown>>;
  if (contender === "node-redlock (defaults)") {
    const nr = new NodeRedlock(clients, { retryCount: 1000 });
    acquire = async () => {
      const lock = await nr.acquire([resource], TTL_MS);
      return () => nr.release(lock);
    };
  } else {
    const e = new Redlock(clients, { retryCount: -1, nodeTimeoutMs: 2000, fair: contender === "engine fair", label: "hot" });
    acquire = async (signal) => {
      const lock = await e.acquire([resource], TTL_MS, { signal });
      return () => e.release(lock);
    };
  }
  await Promise.all(clients.map((c) => c.ping()));
  process.send!({ ready: true });
  const durationMs = await new Promise<number>((resolve) => process.once("message", (m: { go: number }) => resolve(m.go)));
  const waits: number[] = [];
  const stop = new AbortController();
  const end = performance.now() + durationMs;
  setTimeout(() => stop.abort(new Error("run over")), durationMs);
  while (performance.now() < end) {
    const asked = performance.now();
    let release: () => Promise<unknown>;
    try {
      release = await acquire(stop.signal);
    } catch (error) {
      if (error instanceof AcquireAbortedError) break;
      throw error;
    }
    const got = performance.now();
    if (got <= end) {
      waits.push(got - asked);
      await sleep(HOLD_MS);
    }
    // Released also when the run is over, so no worker leaves the lock held for the next run.
    await release();
  }
  const result: ChildResult = { acquisitions: waits.length, waits };
  process.send!(result, () => process.exit(0));
}

// ---------------------------------------------------------------------------------------------------
// Parent.

interface Run {
  acquisitionsPerSec: number;
  waitP50Ms: number;
  waitP99Ms: number;
}

async function runProcesses(ports: number[], contender: Contender, durationMs: number): Promise<Run> {
  const self = fileURLToPath(import.meta.url);
  const children = Array.from({ length: WORKERS }, () =>
    fork(self, ["--child", contender, ports.join(",")], { execArgv: ["--import", "tsx"], stdio: ["ignore", "inherit", "inherit", "ipc"] }),
  );
  const ready = children.map((c) => new Promise<void>((resolve) => c.once("message", () => resolve())));
  // Each worker reports, releases and exits once its run is over (a node-redlock waiter cannot be
  // cancelled: it finishes its pending attempt first); the next run starts when all have exited.
  const results = children.map(
    (c) =>
      new Promise<ChildResult>((resolve, reject) => {
        let result: ChildResult | null = null;
        c.on("message", (m: ChildResult | { ready: true }) => {
          if ("waits" in m) result = m;
        });
        c.once("exit", (code) => (code === 0 && result ? resolve(result) : reject(new Error(`a worker exited with ${code}`))));
      }),
  );
  await Promise.all(ready);
  for (const c of children) c.send({ go: durationMs });
  const done = await Promise.all(results);
  const waits = done.flatMap((r) => r.waits);
  return {
    acquisitionsPerSec: (done.reduce((n, r) => n + r.acquisitions, 0) / durationMs) * 1000,
    waitP50Ms: quantile(waits, waits.length, 0.5),
    waitP99Ms: quantile(waits, waits.length, 0.99),
  };
}

async function main(): Promise<void> {
  const args = new Set(process.argv.slice(2));
  const quick = args.has("--quick");
  const json = args.has("--json");
  const out = (line = "") => (json ? process.stderr : process.stdout).write(`${line}\n`);
  const rounds = quick ? 1 : 3;
  const durationMs = quick ? 3000 : 8000;
  const dir = scratchDir();
  out(`# Engine benchmark, hot resource, one process per worker (${new Date().toISOString()}, node ${process.version}, ${os.cpus().length} CPUs)`);
  const results: Array<{ nodes: number; hot: Record<string, Run & { runs: Run[] }> }> = [];
  for (const count of [3, 1]) {
    const nodes = await startRedisNodes(count, { dir });
    const ports = nodes.map((n) => n.port);
    const admin = ports.map((port) => new Redis(port, "127.0.0.1"));
    try {
      const runs: Record<string, Run[]> = {};
      // Warm-up, not measured.
      for (const contender of CONTENDERS) await runProcesses(ports, contender, 1000);
      for (let round = 0; round < rounds; round++) {
        for (let k = 0; k < CONTENDERS.length; k++) {
          const contender = CONTENDERS[(k + round) % CONTENDERS.length]!;
          await Promise.all(admin.map((c) => c.flushall()));
          (runs[contender] ??= []).push(await runProcesses(ports, contender, durationMs));
        }
      }
      const hot: Record<string, Run & { runs: Run[] }> = {};
      for (const [name, r] of Object.entries(runs)) hot[name] = summarize(r);
      results.push({ nodes: count, hot });
      out(`\n## ${count} node${count > 1 ? "s" : ""}: ${WORKERS} worker processes, hold ${HOLD_MS} ms, median of ${rounds} run(s) x ${durationMs} ms`);
      out("| contender | acquisitions/s | wait p50 ms | wait p99 ms |");
      out("|---|---:|---:|---:|");
      for (const [name, r] of Object.entries(hot)) out(`| ${name} | ${fixed(r.acquisitionsPerSec, 1)} | ${fixed(r.waitP50Ms, 1)} | ${fixed(r.waitP99Ms, 1)} |`);
      const nr = hot["node-redlock (defaults)"]!;
      const eng = hot["engine (hand-over)"]!;
      out(`\nengine/node-redlock: throughput ${fixed(eng.acquisitionsPerSec / nr.acquisitionsPerSec, 3)}, p99 wait ${fixed(eng.waitP99Ms / nr.waitP99Ms, 3)}`);
    } finally {
      for (const c of admin) c.disconnect();
      await Promise.all(nodes.map((n) => n.stop()));
    }
  }
  if (json) process.stdout.write(`${JSON.stringify({ quick, results }, null, 2)}\n`);
}

if (process.argv[2] === "--child") {
  child(process.argv[4]!.split(",").map(Number), process.argv[3] as Contender).catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  });
} else {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exitCode = 1;
  });
}
