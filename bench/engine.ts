/**
 * Engine benchmark (not a test): `npm run bench:engine [-- --json] [-- --quick]`.
 *
 * Starts its own redis-server nodes (three, then one) in os.tmpdir(), runs the contenders alternately
 * over several rounds in this one process, prints medians and checks the bars from issue 3:
 *   1. uncontended, concurrency 50, random keys: bare commands / node-redlock / this engine / fenced
 *   2. one hot resource, 20 workers holding it 5 ms each: node-redlock defaults / this engine / fair mode
 * With --json the table goes to stderr and the figures to stdout.
 */
import { createHash, randomBytes } from "node:crypto";
import { setMaxListeners } from "node:events";
import os from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import Redis from "ioredis";
import type * as EnginePackage from "@lockscope/redlock";
import type { RedlockLock as Lock } from "@lockscope/redlock";
import { startRedisNodes, type RedisNode } from "@/lib/redis-node";
import { NodeRedlock, type NodeRedlockLock } from "./engine-node-redlock";
import { fixed, median, quantile, scratchDir, summarize } from "./support";

// The engine as its users run it: the package's build (`npm run build -w @lockscope/redlock`, tsc's ESM
// output), loaded by Node as node-redlock is, not its TypeScript source through the dev loader (which adds
// a naming call to every function it creates: ~2% of the engine's CPU per cycle that no user pays).
let pkg!: typeof EnginePackage;

const args = new Set(process.argv.slice(2));
const JSON_OUT = args.has("--json");
const QUICK = args.has("--quick");
// --scenario=1 or --scenario=2 runs one scenario only (for iterating; the bars need both).
const SCENARIO = Number([...args].find((a) => a.startsWith("--scenario="))?.split("=")[1] ?? 0);
// --nodes=3 or --nodes=1 runs one topology only, --rounds=N sets the hot scenario's rounds (for iterating).
const option = (name: string) => [...args].find((a) => a.startsWith(`--${name}=`))?.split("=")[1];
const NODE_COUNTS = option("nodes") ? [Number(option("nodes"))] : [3, 1];
const out = (line = "") => (JSON_OUT ? process.stderr : process.stdout).write(`${line}\n`);

const S1_RUN_MS = QUICK ? 700 : 1500;
const S1_ROUNDS = QUICK ? 3 : 5;
const S1_CONCURRENCY = 50;
const S2_RUN_MS = QUICK ? 3000 : 8000;
const S2_ROUNDS = option("rounds") ? Number(option("rounds")) : QUICK ? 1 : 5;
const S2_WARMUP_MS = QUICK ? 500 : 1500;
const S2_WORKERS = 20;
const HOLD_MS = 5;
const TTL_MS = 10_000;

// ---------------------------------------------------------------------------------------------------
// Scenario 1: uncontended cycles

interface CycleRun {
  cyclesPerSec: number;
  p50Ms: number;
  p99Ms: number;
  cpuUsPerCycle: number;
  failures: number;
}

type Cycle = (key: string) => Promise<void>;

const COMPARE_AND_DELETE = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`;
const CAD_SHA = createHash("sha1").update(COMPARE_AND_DELETE).digest("hex");
// Compare-and-set: the bare hand-over of scenario 2 writes the next holder's token over the last one's.
const COMPARE_AND_SET = `if redis.call("get", KEYS[1]) == ARGV[1] then redis.call("set", KEYS[1], ARGV[2], "PX", ARGV[3]) return 1 end return 0`;
const CAS_SHA = createHash("sha1").update(COMPARE_AND_SET).digest("hex");

async function runCycles(cycle: Cycle, durationMs: number): Promise<CycleRun> {
  const samples = new Float64Array(2_000_000);
  let count = 0;
  let cycles = 0;
  let failures = 0;
  const prefix = `bench:${randomBytes(4).toString("hex")}:`;
  let n = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + durationMs;
  await Promise.all(
    Array.from({ length: S1_CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const started = performance.now();
        try {
          await cycle(prefix + (n++).toString(36));
        } catch {
          failures += 1;
          continue;
        }
        if (count < samples.length) samples[count++] = performance.now() - started;
        cycles += 1;
      }
    }),
  );
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return {
    cyclesPerSec: (cycles / elapsed) * 1000,
    p50Ms: quantile(samples, count, 0.5),
    p99Ms: quantile(samples, count, 0.99),
    cpuUsPerCycle: (cpu.user + cpu.system) / cycles,
    failures,
  };
}

// ---------------------------------------------------------------------------------------------------
// Scenario 2: one hot resource

interface HotRun {
  acquisitionsPerSec: number;
  waitP50Ms: number;
  waitP99Ms: number;
  acquisitions: number;
}

interface HotContender {
  acquire(signal: AbortSignal): Promise<() => Promise<void>>;
}

async function runHot(workers: HotContender[], durationMs: number): Promise<HotRun> {
  const waits = new Float64Array(200_000);
  let count = 0;
  const stop = new AbortController();
  // Every waiting worker listens on this one signal.
  setMaxListeners(S2_WORKERS * 4, stop.signal);
  const t0 = performance.now();
  const end = t0 + durationMs;
  const timer = setTimeout(() => stop.abort(new Error("benchmark run over")), durationMs);
  await Promise.all(
    workers.map(async (worker) => {
      while (performance.now() < end) {
        const asked = performance.now();
        let release: () => Promise<void>;
        try {
          release = await worker.acquire(stop.signal);
        } catch (error) {
          if (error instanceof pkg.AcquireAbortedError) break;
          throw error;
        }
        const got = performance.now();
        if (got <= end && count < waits.length) waits[count++] = got - asked;
        await sleep(HOLD_MS);
        await release();
      }
    }),
  );
  clearTimeout(timer);
  return {
    acquisitionsPerSec: (count / durationMs) * 1000,
    waitP50Ms: quantile(waits, count, 0.5),
    waitP99Ms: quantile(waits, count, 0.99),
    acquisitions: count,
  };
}

/** Resolves once `quorum` of the calls resolved to `ok(value)`; rejects when that can no longer happen. */
function untilQuorum<T>(calls: Array<Promise<T>>, quorum: number, ok: (value: T) => boolean): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let yes = 0;
    let no = 0;
    for (const call of calls) {
      call.then(
        (value) => (ok(value) ? ++yes === quorum && resolve() : ++no > calls.length - quorum && reject(new Error("no quorum"))),
        () => ++no > calls.length - quorum && reject(new Error("no quorum")),
      );
    }
  });
}

/**
 * The least a hand-over can cost, as a reference for scenario 2 (the way the bare commands are for
 * scenario 1): the waiters queue in this process, and a release is one compare-and-set per node that writes
 * the next waiter's token, which holds the lock once a quorum answered. No identity, no queue or tickets on
 * the nodes, no telemetry, no liveness: it only works because every worker is in this one process.
 */
function bareHandOverWorkers(clients: Redis[], resource: string): HotContender[] {
  const quorum = pkg.quorumOf(clients.length);
  const queue: Array<{ token: string; resolve: () => void }> = [];
  let held = false;
  const take = (token: string) =>
    untilQuorum(
      clients.map((c) => c.set(resource, token, "PX", TTL_MS, "NX")),
      quorum,
      (reply) => reply === "OK",
    );
  const release = async (token: string): Promise<void> => {
    const next = queue.shift();
    if (next) {
      await untilQuorum(
        clients.map((c) => c.evalsha(CAS_SHA, 1, resource, token, next.token, TTL_MS)),
        quorum,
        (reply) => reply === 1,
      );
      next.resolve();
      return;
    }
    await untilQuorum(
      clients.map((c) => c.evalsha(CAD_SHA, 1, resource, token)),
      quorum,
      (reply) => reply === 1,
    );
    held = false;
    // Someone queued while the delete was on its way: it takes the free lock.
    const first = queue.shift();
    if (first) {
      held = true;
      await take(first.token);
      first.resolve();
    }
  };
  return Array.from({ length: S2_WORKERS }, () => ({
    acquire: async (signal) => {
      const token = randomBytes(16).toString("hex");
      if (!held) {
        held = true;
        await take(token);
      } else {
        await new Promise<void>((resolve, reject) => {
          const onAbort = () => {
            const at = queue.indexOf(entry);
            if (at < 0) return; // already handed the lock: it resolves
            queue.splice(at, 1);
            reject(new pkg.AcquireAbortedError([resource], 1, signal.reason));
          };
          const entry = {
            token,
            resolve: () => {
              signal.removeEventListener("abort", onAbort);
              resolve();
            },
          };
          queue.push(entry);
          signal.addEventListener("abort", onAbort, { once: true });
        });
      }
      return () => release(token);
    },
  }));
}

// ---------------------------------------------------------------------------------------------------

interface TopologyResult {
  nodes: number;
  roundTripMs: number;
  uncontended: Record<string, CycleRun & { runs: CycleRun[] }>;
  hot: Record<string, HotRun & { runs: HotRun[] }>;
}

async function benchTopology(nodes: RedisNode[]): Promise<TopologyResult> {
  const clients = nodes.map((n) => {
    const c = new Redis(n.port, "127.0.0.1", { enableAutoPipelining: true, maxRetriesPerRequest: 1 });
    c.on("error", () => {});
    return c;
  });
  const engines: EnginePackage.Redlock[] = [];
  try {
    const loadScripts = () => Promise.all(clients.flatMap((c) => [c.script("LOAD", COMPARE_AND_DELETE), c.script("LOAD", COMPARE_AND_SET)]));
    await loadScripts();
    // Round trip: one PING to every node, in parallel, as a quorum round pays it.
    const pings: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t = performance.now();
      await Promise.all(clients.map((c) => c.ping()));
      pings.push(performance.now() - t);
    }
    const roundTripMs = median(pings);

    const nodeRedlock = new NodeRedlock(clients, { retryCount: 0 });
    // A generous node timeout: on a shared 2-core machine a busy moment must not turn into failed cycles.
    const engine = new pkg.Redlock(clients, { retryCount: 0, label: "bench", nodeTimeoutMs: 2000 });
    engines.push(engine);
    const cycles: Record<string, Cycle> = {
      "a bare SET NX PX + compare-and-delete": async (key) => {
        const token = randomBytes(16).toString("hex");
        await Promise.all(clients.map((c) => c.set(key, token, "PX", TTL_MS, "NX")));
        await Promise.all(clients.map((c) => c.evalsha(CAD_SHA, 1, key, token)));
      },
      "b node-redlock": async (key) => {
        const lock = await nodeRedlock.acquire([key], TTL_MS);
        await nodeRedlock.release(lock);
      },
      "c engine (identity, telemetry)": async (key) => {
        const lock = await engine.acquire([key], TTL_MS);
        await engine.release(lock);
      },
      "d engine fenced": async (key) => {
        const lock = await engine.acquire([key], TTL_MS, { fenced: true });
        await engine.release(lock);
      },
    };
    // Warm-up: scripts cached on the nodes, code optimized.
    if (SCENARIO !== 2) for (const cycle of Object.values(cycles)) await runCycles(cycle, 300);
    const s1: Record<string, CycleRun[]> = {};
    const names = Object.keys(cycles);
    for (let round = 0; round < (SCENARIO === 2 ? 0 : S1_ROUNDS); round++) {
      // Alternate, and rotate the order each round so no contender always runs first or last.
      for (let k = 0; k < names.length; k++) {
        const name = names[(k + round) % names.length]!;
        (s1[name] ??= []).push(await runCycles(cycles[name]!, S1_RUN_MS));
      }
      await Promise.all(clients.map((c) => c.flushall()));
      await loadScripts();
    }

    const hotResource = "lock:bench/hot";
    // One engine instance per worker, each with its own subscriber connections and waiter ids, as 20
    // processes would have. They share the clients (as engines in one process do), so a waiter hears of a
    // hand-over with the release reply; across processes it comes by pub/sub (docs/benchmarks.md).
    const engineWorkers = (settings: { fair?: boolean; label: string }): HotContender[] =>
      Array.from({ length: S2_WORKERS }, () => {
        const e = new pkg.Redlock(clients, { retryCount: -1, nodeTimeoutMs: 2000, ...settings });
        engines.push(e);
        return {
          acquire: async (signal) => {
            const lock: Lock = await e.acquire([hotResource], TTL_MS, { signal });
            return async () => {
              await e.release(lock);
            };
          },
        };
      });
    const hotContenders: Record<string, () => HotContender[]> = {
      "node-redlock (defaults)": () =>
        Array.from({ length: S2_WORKERS }, () => {
          const nr = new NodeRedlock(clients, { retryCount: 1000 });
          return {
            acquire: async () => {
              const lock: NodeRedlockLock = await nr.acquire([hotResource], TTL_MS);
              return async () => {
                await nr.release(lock);
              };
            },
          };
        }),
      "engine (hand-over)": () => engineWorkers({ label: "hot" }),
      "engine fair": () => engineWorkers({ fair: true, label: "hot-fair" }),
      "bare hand-over (the limit, reference)": () => bareHandOverWorkers(clients, hotResource),
    };
    const s2: Record<string, HotRun[]> = {};
    const hotNames = Object.keys(hotContenders);
    const rounds = SCENARIO === 1 ? 0 : S2_ROUNDS;
    // Warm-up, not measured: scripts cached on the nodes, code optimized, connections made.
    for (const name of rounds > 0 ? hotNames : []) {
      await runHot(hotContenders[name]!(), S2_WARMUP_MS);
      await Promise.all(engines.map((e) => e.quit()));
      await Promise.all(clients.map((c) => c.flushall()));
    }
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < hotNames.length; k++) {
        const name = hotNames[(k + round) % hotNames.length]!;
        const workers = hotContenders[name]!();
        (s2[name] ??= []).push(await runHot(workers, S2_RUN_MS));
        await Promise.all(engines.map((e) => e.quit()));
        await Promise.all(clients.map((c) => c.flushall()));
      }
    }

    const uncontended: TopologyResult["uncontended"] = {};
    for (const [name, runs] of Object.entries(s1)) uncontended[name] = summarize(runs);
    const hot: TopologyResult["hot"] = {};
    for (const [name, runs] of Object.entries(s2)) hot[name] = summarize(runs);
    return { nodes: nodes.length, roundTripMs, uncontended, hot };
  } finally {
    await Promise.all(engines.map((e) => e.quit()));
    for (const c of clients) c.disconnect();
  }
}

interface Bar {
  name: string;
  value: number;
  limit: string;
  pass: boolean;
  /** The same ratio round by round (each round runs the contenders back to back), when it is a ratio of runs. */
  rounds?: number[];
}

const roundRatios = (x: { runs: HotRun[] }, y: { runs: HotRun[] }): number[] =>
  x.runs.map((run, i) => run.acquisitionsPerSec / y.runs[i]!.acquisitionsPerSec);

function bars(result: TopologyResult): Bar[] {
  const u = result.uncontended;
  const a = u["a bare SET NX PX + compare-and-delete"]!;
  const b = u["b node-redlock"]!;
  const c = u["c engine (identity, telemetry)"]!;
  const h = result.hot;
  const nr = h["node-redlock (defaults)"]!;
  const eng = h["engine (hand-over)"]!;
  const fair = h["engine fair"]!;
  const fairLimit = 1.5 * S2_WORKERS * (HOLD_MS + result.roundTripMs);
  return [
    { name: "1 throughput c/b", value: c.cyclesPerSec / b.cyclesPerSec, limit: ">= 0.95", pass: c.cyclesPerSec / b.cyclesPerSec >= 0.95 },
    { name: "1 throughput c/a", value: c.cyclesPerSec / a.cyclesPerSec, limit: ">= 0.90", pass: c.cyclesPerSec / a.cyclesPerSec >= 0.9 },
    { name: "1 CPU per cycle c/a", value: c.cpuUsPerCycle / a.cpuUsPerCycle, limit: "<= 1.15", pass: c.cpuUsPerCycle / a.cpuUsPerCycle <= 1.15 },
    {
      name: "2 throughput engine/node-redlock",
      value: eng.acquisitionsPerSec / nr.acquisitionsPerSec,
      limit: ">= 1",
      pass: eng.acquisitionsPerSec >= nr.acquisitionsPerSec,
      rounds: roundRatios(eng, nr),
    },
    { name: "2 p99 wait engine/node-redlock", value: eng.waitP99Ms / nr.waitP99Ms, limit: "<= 0.25", pass: eng.waitP99Ms <= 0.25 * nr.waitP99Ms },
    {
      name: "2 fair p99 wait (ms)",
      value: fair.waitP99Ms,
      limit: `<= ${fairLimit.toFixed(0)} (1.5 x ${S2_WORKERS} x (${HOLD_MS} + ${result.roundTripMs.toFixed(2)}))`,
      pass: fair.waitP99Ms <= fairLimit,
    },
  ];
}

function printTopology(result: TopologyResult, checked: Bar[]): void {
  out(`\n## ${result.nodes} node${result.nodes > 1 ? "s" : ""} (round trip to all nodes, median: ${fixed(result.roundTripMs, 3)} ms)`);
  out(`\nScenario 1: uncontended, concurrency ${S1_CONCURRENCY}, random keys, median of ${S1_ROUNDS} runs x ${S1_RUN_MS} ms`);
  out("| contender | cycles/s | p50 ms | p99 ms | client CPU us/cycle | failed cycles |");
  out("|---|---:|---:|---:|---:|---:|");
  for (const [name, r] of Object.entries(result.uncontended)) {
    out(`| ${name} | ${fixed(r.cyclesPerSec, 0)} | ${fixed(r.p50Ms, 2)} | ${fixed(r.p99Ms, 2)} | ${fixed(r.cpuUsPerCycle, 1)} | ${r.failures} |`);
  }
  out(`\nScenario 2: one hot resource, ${S2_WORKERS} workers, hold ${HOLD_MS} ms, median of ${S2_ROUNDS} run(s) x ${S2_RUN_MS} ms`);
  out("| contender | acquisitions/s | wait p50 ms | wait p99 ms |");
  out("|---|---:|---:|---:|");
  for (const [name, r] of Object.entries(result.hot)) {
    out(`| ${name} | ${fixed(r.acquisitionsPerSec, 1)} | ${fixed(r.waitP50Ms, 1)} | ${fixed(r.waitP99Ms, 1)} |`);
  }
  const bare = result.hot["bare hand-over (the limit, reference)"];
  const nr = result.hot["node-redlock (defaults)"];
  if (bare && nr) {
    const ratios = roundRatios(bare, nr).map((r) => fixed(r, 3));
    out(`\nThe bare hand-over / node-redlock: ${fixed(bare.acquisitionsPerSec / nr.acquisitionsPerSec, 3)} (round by round: ${ratios.join(", ")})`);
  }
  if (checked.length === 0) return;
  out("\n| bar | value | limit | result | round by round |");
  out("|---|---:|---|---|---|");
  for (const bar of checked) {
    out(`| ${bar.name} | ${fixed(bar.value, 3)} | ${bar.limit} | ${bar.pass ? "PASS" : "FAIL"} | ${bar.rounds?.map((r) => fixed(r, 3)).join(", ") ?? ""} |`);
  }
}

async function main(): Promise<void> {
  const built: string = "../lib/redlock/dist/index.js";
  pkg = (await import(built)) as typeof EnginePackage;
  const dir = scratchDir();
  out(`# Engine benchmark (${new Date().toISOString()}, node ${process.version}, ${os.cpus().length} CPUs${QUICK ? ", --quick" : ""})`);
  const results: Array<TopologyResult & { bars: Bar[] }> = [];
  for (const count of NODE_COUNTS) {
    const nodes = await startRedisNodes(count, { dir });
    try {
      const result = await benchTopology(nodes);
      const checked = SCENARIO ? [] : bars(result);
      printTopology(result, checked);
      results.push({ ...result, bars: checked });
    } finally {
      await Promise.all(nodes.map((n) => n.stop()));
    }
  }
  if (JSON_OUT) process.stdout.write(`${JSON.stringify({ quick: QUICK, results }, null, 2)}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
