/**
 * Live view benchmark (not a test): `npm run bench:live [-- --json] [-- --quick]`, or the memory soak
 * `npm run bench:live -- --soak [--soak-minutes N]` (see `soak()` below). With `--history` (not the soak) the
 * console also records the lock history in a PostgreSQL the benchmark starts (AUDIT_DATABASE_URL), and the
 * events it wrote and dropped are reported. With `--browser`, a Chromium tab on the Locks page is open during every
 * measured churn, its table scrolling, and its JavaScript heap, long tasks and frame intervals are reported
 * (bench/live-browser.ts).
 *
 * Starts three redis-server nodes in os.tmpdir() and the real console as a child process
 * (the production launcher `node dist/start.mjs`, built first when the sources changed; REDIS_URLS pointing
 * at those nodes), so RSS and CPU are the server's own (/proc/<pid>). For N = 1,000 and 100,000 locks held (loaded with pipelined SET PX before the
 * console starts, so it reconciles them by SCAN), it opens one stream in this process, measures the
 * snapshot, then churns acquisitions and releases at 1,000 and 5,000 changes/s on other keys and measures,
 * for every change, the time from the Redis write to its arrival in the stream (after an unmeasured warm-up at
 * the same rate). Afterwards the stream's view of every churned key is compared with Redis: a difference is a
 * lost event.
 *
 * Run it under `flock /tmp/lockscope-build.lock`: it runs `npm run build` first when the sources changed.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import { monitorEventLoopDelay } from "node:perf_hooks";
import path from "node:path";
import { Worker } from "node:worker_threads";
import Redis from "ioredis";
import { freePort, startRedisNodes, type RedisNode } from "../lib/redis-node";
import { ensureBuild } from "../scripts/build-if-stale.mjs";
import { startPostgres, type TestPostgres } from "../tests/support/postgres";
import { PROD_NODE_ARGS } from "../tests/support/production";
import { BrowserTab, type TabFigures } from "./live-browser";
import { processes, readStat, scratchDir } from "./support";

const argv = process.argv.slice(2);
const args = new Set(argv);
const JSON_OUT = args.has("--json");
/** A Chromium tab on the Locks page during every measured churn, its table scrolling (bench/live-browser.ts). */
const BROWSER = args.has("--browser");
/**
 * `--tab-profile DIR`: with `--browser`, the tab's CPU profile and trace of every measured churn, written to DIR
 * (`tab-<held>-<rate>-<viewers>-<rate's place>.cpuprofile` and `.trace.json`).
 */
const tabProfileAt = argv.indexOf("--tab-profile");
const TAB_PROFILE_DIR = tabProfileAt >= 0 ? (argv[tabProfileAt + 1] ?? null) : null;
const HISTORY = args.has("--history");
/** The database the console records history in, with `--history`. */
let historyDb: { server: TestPostgres; url: string } | null = null;
const QUICK = args.has("--quick");
/**
 * `--max-rate`: after the listed rates, search each size for the highest churn rate this machine sustains
 * (see `SUSTAINED_P99_MS`): the rate doubled until a probe fails, then halved back towards the last that held.
 */
const MAX_RATE = args.has("--max-rate");
/**
 * `--node-pause`: at the end of each size, one node stopped (SIGSTOP, as in a long pause of its host) for
 * `NODE_PAUSE_MS` with every lock still held, then let go: the console's longest event-loop delay from the pause to
 * `NODE_PAUSE_AFTER_MS` after it (its watcher's node-down and gap over every lock that node holds), and how many of
 * `/api/health`'s answers meanwhile called another node down.
 */
const NODE_PAUSE = args.has("--node-pause");
const NODE_PAUSE_MS = 8_000;
const NODE_PAUSE_AFTER_MS = 20_000;
/**
 * `--pin`: the three nodes on CPU 0, this process and the console it starts on the others, as when the nodes
 * run on hosts of their own: the nodes' latency is then theirs, not the wait for a core the console is using.
 */
const PIN = args.has("--pin");
const soakMinutesArg = argv.indexOf("--soak-minutes");
const SOAK = args.has("--soak") || soakMinutesArg >= 0;
const SOAK_MINUTES = soakMinutesArg >= 0 ? Number(argv[soakMinutesArg + 1]) : 10;
if (SOAK && !(Number.isFinite(SOAK_MINUTES) && SOAK_MINUTES >= 4 && SOAK_MINUTES <= 600)) {
  process.stderr.write(`--soak-minutes expects a number of minutes from 4 to 600, got ${JSON.stringify(argv[soakMinutesArg + 1] ?? null)}\n`);
  process.exit(2);
}
/** Extra Node.js flags for the console process (`--console-node-args "--cpu-prof --cpu-prof-dir=/tmp/p"`), for profiling it. */
const consoleArgsAt = argv.indexOf("--console-node-args");
const CONSOLE_NODE_ARGS = consoleArgsAt >= 0 ? (argv[consoleArgsAt + 1] ?? "").split(/\s+/).filter(Boolean) : [];
/** Where the console's own output goes as well (`--console-log FILE`, appended), e.g. with `--trace-gc`. */
const consoleLogAt = argv.indexOf("--console-log");
const CONSOLE_LOG = consoleLogAt >= 0 ? (argv[consoleLogAt + 1] ?? null) : null;
/**
 * `--latency-trace FILE`: for each measured churn, every change's write time (Unix ms), delivery and kind, and the
 * console main thread's scheduler counters (`/proc/<pid>/task/<pid>/schedstat`: ran, waited runnable) every
 * tick, appended as tab-separated lines, to line up a slow stretch with what the console was doing then.
 */
const latencyTraceAt = argv.indexOf("--latency-trace");
const LATENCY_TRACE = latencyTraceAt >= 0 ? (argv[latencyTraceAt + 1] ?? null) : null;
const out = (line = "") => (JSON_OUT ? process.stderr : process.stdout).write(`${line}\n`);

const ROOT = path.resolve(import.meta.dirname, "..");
/** `--held 1000,1000000` and `--rates 5000,10000`: other sizes and rates than the bars' (the scale run). */
function listArg(name: string, fallback: number[]): number[] {
  const at = argv.indexOf(name);
  if (at < 0) return fallback;
  const list = (argv[at + 1] ?? "").split(",").map(Number);
  if (list.length === 0 || !list.every((n) => Number.isInteger(n) && n > 0 && n <= 5_000_000)) {
    process.stderr.write(`${name} expects a comma-separated list of whole numbers from 1 to 5000000, got ${JSON.stringify(argv[at + 1] ?? null)}\n`);
    process.exit(2);
  }
  return list;
}
const HELD_COUNTS = listArg("--held", QUICK ? [1_000, 20_000] : [1_000, 100_000]);
const RATES = listArg("--rates", [1_000, 5_000]);
/** `--viewers 1,100`: each churn is run with each number of open streams (the fan-out's cost). */
const VIEWERS = listArg("--viewers", [1]);
/** `--full-locks`: the streams take every lock whole, as a script does, rather than compact, as a browser tab does. */
const STREAM_ENCODING = args.has("--full-locks") ? "full" : "compact";
const CHURN_MS = QUICK ? 3_000 : 8_000;
const WARMUP_MS = QUICK ? 1_000 : 2_000;
/** Further warm-ups at most, while the other viewers' streams wait for their snapshots. */
const OTHERS_WARMUP_MAX = 30;
/**
 * The measured churn's unmeasured start: from rest, a churn's first HOLD_MS are all acquisitions (twice the steady
 * rate of them, nothing released yet), so its steady state is measured from a little later.
 */
const LEAD_IN_MS = 1_500;
/**
 * The churn's mix of lock formats, in turn: a plain string token, a Redisson lock (a hash) and a
 * redis-semaphore permit (a sorted set), so the batched read, the decoders and the `h`/`z` notifications are all
 * under load.
 */
const FORMAT_MIX = ["token", "redisson", "semaphore"] as const;
const REDISSON_CLIENT = "5b0d3c2a-9e1f-4a7b-8c6d-2f4e1a3b5c7d";
/** The writes of Redisson's lock and of a redis-semaphore permit, as their scripts make them (loaded on every node before the churn). */
const REDISSON_LOCK = script("redis.call('hincrby', KEYS[1], ARGV[1], 1); redis.call('pexpire', KEYS[1], ARGV[2]); return 1");
const SEMAPHORE_ACQUIRE = script("redis.call('zadd', KEYS[1], ARGV[2], ARGV[1]); redis.call('pexpire', KEYS[1], ARGV[3]); return 1");
function script(body: string): { body: string; sha: string } {
  return { body, sha: createHash("sha1").update(body).digest("hex") };
}

/**
 * A rate is sustained when the load generator reaches it (98 % of it), every change's final state is right, and
 * p99 delivery stays within this (the scale bar at 10,000 changes/s): the console keeps up, it does not fall
 * behind.
 */
const SUSTAINED_P99_MS = 100;
/** One probe of the search: a shorter warm-up and churn than the measured rates'. */
const PROBE_WARMUP_MS = 1_000;
const PROBE_MS = 5_000;
/** The search stops once the last rate that held and the first that did not are this close (or after this many probes). */
const SEARCH_RESOLUTION = 0.1;
const MAX_PROBES = 8;
const RATE_CEILING = 80_000;

/** Each churned lock is held this long before its release: longer than the stream's 100 ms coalescing window. */
const HOLD_MS = 1_000;
const SETTLE_MS = 2_500;
const VIEWER = `bench-viewer-${randomBytes(12).toString("hex")}`;
const OPERATOR = `bench-operator-${randomBytes(12).toString("hex")}`;
const CLK_TCK = 100;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
}

interface StreamLock {
  resource: string;
  state: string;
  token: string | null;
}

/** What `bench/live-stream.mjs` posts: a chunk's lock changes and when it arrived (absolute ms), or a snapshot part. */
type StreamMessage = { kind: "changes"; at: number; locks: StreamLock[] } | { kind: "snapshot"; at: number; part: number; parts: number; locks: StreamLock[] } | { kind: "snapshot-through" };

/**
 * The stream client: a worker thread reads the stream (and `viewers - 1` more, read and dropped), times each
 * chunk's arrival there and posts the changes; this side keeps each lock's resource, state and token (what
 * the checks read) and calls `onLock` with the arrival time on this thread's `performance.now()` clock.
 * `keepSnapshot` false: the snapshot's locks are counted, not kept (the checks read only the churn's keys, which
 * come as changes). A million kept were this thread's own million-entry map, whose full collections stopped the
 * load generator for a few hundred milliseconds between stamping writes and sending them, counted as delivery time.
 */
class StreamClient {
  readonly locks = new Map<string, StreamLock>();
  /** Locks the snapshot had. */
  snapshotLocks = 0;
  snapshotDoneAt: number | null = null;
  /** The streams read and dropped whose snapshot has come (see `through`). */
  private othersThrough = 0;
  readonly openedAt = performance.now();
  onLock: (lock: StreamLock, at: number) => void = () => {};
  private readonly worker: Worker;

  constructor(
    port: number,
    private readonly streams = 1,
    keepSnapshot = true,
  ) {
    this.worker = new Worker(new URL("./live-stream.mjs", import.meta.url), { workerData: { port, token: VIEWER, streams, encoding: STREAM_ENCODING } });
    this.worker.on("error", (error) => {
      process.stderr.write(`the stream reader failed: ${error.message}\n`);
      process.exit(1);
    });
    this.worker.on("message", (message: StreamMessage) => {
      if (message.kind === "snapshot-through") {
        this.othersThrough += 1;
        return;
      }
      const at = message.at - performance.timeOrigin;
      if (message.kind === "snapshot") {
        if (message.part === 0) {
          this.locks.clear();
          this.snapshotLocks = 0;
        }
        this.snapshotLocks += message.locks.length;
        if (keepSnapshot) for (const lock of message.locks) this.locks.set(lock.resource, lock);
        if (message.part === message.parts - 1) this.snapshotDoneAt = at;
        return;
      }
      for (const lock of message.locks) {
        if (lock.state === "removed") this.locks.delete(lock.resource);
        else this.locks.set(lock.resource, lock);
        this.onLock(lock, at);
      }
    });
  }

  /** Whether every stream of this client has had its snapshot. */
  get through(): boolean {
    return this.snapshotDoneAt !== null && this.othersThrough === this.streams - 1;
  }

  close(): void {
    void this.worker.terminate();
  }
}

function procStats(pid: number): { rssMb: number; hwmMb: number; cpuTicks: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const hwm = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const { fields } = readStat(pid);
  return { rssMb: rss / 1024, hwmMb: hwm / 1024, cpuTicks: Number(fields[11]) + Number(fields[12]) };
}

/**
 * CPU ticks of a PostgreSQL server: its postmaster (with the children it has reaped) and every live child
 * (the backends, the writer, the WAL writer...).
 */
function postgresCpuTicks(dataDir: string): number {
  const postmaster = Number(readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  let ticks = 0;
  for (const { pid, fields } of processes()) {
    if (pid === postmaster) ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    else if (Number(fields[1]) === postmaster) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks;
}

async function getJson<T>(port: number, pathname: string): Promise<{ status: number; body: T }> {
  const res = await fetch(`http://127.0.0.1:${port}${pathname}`, { headers: { authorization: `Bearer ${VIEWER}` } });
  return { status: res.status, body: (await res.json()) as T };
}

async function startConsole(urls: string[], dataDir: string): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [...PROD_NODE_ARGS, ...CONSOLE_NODE_ARGS, "dist/start.mjs"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      REDIS_URLS: urls.join(","),
      PORT: String(port),
      HOST: "127.0.0.1",
      LOG_LEVEL: "warn",
      LOCKSCOPE_DATA_DIR: dataDir,
      LOCKSCOPE_VIEWER_TOKEN: VIEWER,
      LOCKSCOPE_OPERATOR_TOKEN: OPERATOR,
      // All the viewers are this one process with one token.
      LOCKSCOPE_MAX_STREAMS_PER_ADDRESS: String(Math.max(20, ...VIEWERS) + 5),
      LOCKSCOPE_MAX_STREAMS_PER_TOKEN: String(Math.max(50, ...VIEWERS) + 5),
      ...(historyDb ? { AUDIT_DATABASE_URL: historyDb.url } : {}),
    },
  });
  // A run ended by a signal (its own, not the terminal's Ctrl-C to the whole group) must not leave the console running.
  const killAtExit = () => child.kill("SIGKILL");
  process.once("exit", killAtExit);
  child.once("exit", () => process.removeListener("exit", killAtExit));
  let log = "";
  const keep = (c: Buffer) => {
    log = (log + c.toString()).slice(-4000);
    if (CONSOLE_LOG) appendFileSync(CONSOLE_LOG, c);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const deadline = Date.now() + 300_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`console exited: ${log}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/api/ready`);
      if (res.status === 200) return { child, port };
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`console not ready: ${log}`);
    await sleep(250);
  }
}

async function stopConsole(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill("SIGTERM");
  await Promise.race([exited, sleep(12_000)]);
  if (child.exitCode === null) child.kill("SIGKILL");
}

/**
 * The console's `/metrics` text. Asked again once when the connection is reset: a kept-alive connection the
 * console closed as its idle timeout ran out (a race the client loses now and then while a churn loads both
 * processes) says nothing about the console.
 */
async function scrape(port: number): Promise<string> {
  try {
    return await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  } catch (error) {
    const code = (error as { cause?: { code?: string } }).cause?.code;
    if (code !== "ECONNRESET" && code !== "UND_ERR_SOCKET") throw error;
    return await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  }
}

/** The console's event-loop delay p99 and max (ms) since the previous scrape: prom-client resets its monitor on every collect. */
async function serverLoopP99(port: number): Promise<{ p99: number; max: number }> {
  const text = await scrape(port);
  const read = (name: string) => {
    const value = new RegExp(`^lockscope_nodejs_eventloop_lag_${name}_seconds (\\S+)$`, "m").exec(text)?.[1];
    return value === undefined ? Number.NaN : Number(value) * 1000;
  };
  return { p99: read("p99"), max: read("max") };
}

/** Lock history events the console wrote to the database and dropped so far (`--history`), from its /metrics. */
async function historyCounts(port: number): Promise<{ written: number; dropped: number; queued: number }> {
  const text = await scrape(port);
  const sum = (pattern: RegExp) => [...text.matchAll(pattern)].reduce((a, m) => a + Number(m[1]), 0);
  return {
    written: sum(/^lockscope_history_events_total\{outcome="written"\} (\S+)$/gm),
    dropped: sum(/^lockscope_history_events_total\{outcome="dropped_[a-z_]+"\} (\S+)$/gm),
    queued: sum(/^lockscope_history_queue_events (\S+)$/gm),
  };
}

/** Starts the PostgreSQL the console records history in, with `--history`; returns its cleanup. */
async function startHistoryDb(): Promise<() => Promise<void>> {
  if (!HISTORY) return () => Promise.resolve();
  const server = await startPostgres();
  historyDb = { server, url: await server.createDatabase("history") };
  out(`history: recording into PostgreSQL on 127.0.0.1:${server.port}`);
  return () => server.close();
}

async function loadHeld(clients: Redis[], count: number): Promise<void> {
  for (let start = 0; start < count; start += 10_000) {
    await Promise.all(
      clients.map(async (c) => {
        const p = c.pipeline();
        for (let i = start; i < Math.min(count, start + 10_000); i++) p.set(`lock:held:${i}`, `held-token-${i}`, "PX", 3_600_000);
        await p.exec();
      }),
    );
  }
}

interface ChurnResult {
  /** With `--history`: the PostgreSQL server's CPU (every process of it) during the churn, % of one core. */
  dbCpuPct?: number;
  rate: number;
  /** With `--browser`: what the tab on the Locks page went through during this churn. */
  tab?: TabFigures;
  /** Streams open during the churn (one measured, the others only read). */
  viewers?: number;
  changes: number;
  seen: number;
  coalesced: number;
  lost: number;
  p50: number;
  p99: number;
  max: number;
  achievedRate: number;
  cpuPct: number;
  /** The console's CPU time per change delivered to the stream (µs). */
  cpuUsPerChange: number;
  rssMb: number;
  /** The bench process's own event-loop delay p99 (ms): its share of the measured latency. */
  benchLoopP99: number;
  benchLoopMax: number;
  /** The console's event-loop delay p99 (ms) over the run. */
  serverLoopP99: number;
  serverLoopMax: number;
  /** When (ms into the run) the slowest change was written. */
  worstAtMs: number;
}

/**
 * The churn's writes to one node: raw RESP on a connection of its own, one write per tick, the replies read
 * and dropped (an error reply fails the run). A client library would parse every reply and make objects for
 * each command, and on two cores that load generator's CPU is taken from the console it measures; the nodes
 * see the same commands either way.
 */
class ChurnWriter {
  private readonly socket: net.Socket;
  private parts: string[] = [];
  errors = 0;
  private lastError = "";
  private tail = "";
  private ponged: (() => void) | null = null;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.setNoDelay(true);
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      // (With the end of the previous chunk: a reply may be split between two.)
      // The tail kept starts at a line break, so a reply cut in two (a null bulk's "$-1") never reads as an error.
      const text = this.tail + chunk;
      const lastBreak = text.lastIndexOf("\r\n");
      this.tail = lastBreak >= 0 ? text.slice(lastBreak) : text.slice(-64);
      // Every reply of these commands is an integer, a status or a null bulk; an error reply starts a line with "-".
      const at = text.charCodeAt(0) === 45 ? 0 : text.indexOf("\r\n-");
      if (at >= 0) {
        this.errors += 1;
        this.lastError = text.slice(at, at + 200).trim();
      }
      if (text.includes("+PONG")) this.ponged?.();
    });
  }

  static open(port: number): Promise<ChurnWriter> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, "127.0.0.1", () => resolve(new ChurnWriter(socket)));
      socket.once("error", reject);
    });
  }

  command(...args: Array<string | number>): void {
    this.parts.push(`*${args.length}\r\n`);
    for (const arg of args) {
      const text = String(arg);
      this.parts.push(`$${Buffer.byteLength(text)}\r\n${text}\r\n`);
    }
  }

  flush(): void {
    if (this.parts.length === 0) return;
    this.socket.write(this.parts.join(""));
    this.parts = [];
  }

  /** Waits for the node to answer what was sent (a PING after it), then closes; throws on an error reply. */
  async close(): Promise<void> {
    const answered = new Promise<void>((resolve) => (this.ponged = resolve));
    this.command("PING");
    this.flush();
    await answered;
    this.socket.destroy();
    if (this.errors > 0) throw new Error(`a node refused ${this.errors} churn write(s): ${this.lastError}`);
  }
}

/**
 * Writes `rate` changes per second (half acquisitions, half releases of keys held HOLD_MS): `leadInMs` unmeasured,
 * then `durationMs` measured, one churn throughout (see `LEAD_IN_MS`). `atMeasure` is started as the measured
 * window begins (the browser tab's window).
 */
async function churn(
  clients: Redis[],
  stream: StreamClient,
  pid: number,
  port: number,
  rate: number,
  tag: string,
  { leadInMs = 0, durationMs = CHURN_MS, atMeasure }: { leadInMs?: number; durationMs?: number; atMeasure?: () => Promise<void> } = {},
): Promise<ChurnResult> {
  await serverLoopP99(port);
  const pending = new Map<string, { kind: "acquire" | "release"; token: string; sentAt: number }>();
  let latencies: number[] = [];
  let changes = 0;
  let coalesced = 0;
  let worst = 0;
  let worstAt = 0;
  const writers = await Promise.all(clients.map((c) => ChurnWriter.open(c.options.port ?? 6379)));
  let trace: string[] | null = null;
  /** When the measured window began (the lead-in's changes are delivered, not measured). */
  let measuredFrom = Number.POSITIVE_INFINITY;
  stream.onLock = (lock, at) => {
    const p = pending.get(lock.resource);
    if (!p) return;
    const arrived = p.kind === "acquire" ? lock.state === "held" && lock.token === p.token : lock.state !== "held" && lock.state !== "partial" && lock.state !== "elapsed";
    if (arrived) {
      pending.delete(lock.resource);
      if (p.sentAt < measuredFrom) return;
      if (at - p.sentAt > worst) {
        worst = at - p.sentAt;
        worstAt = p.sentAt - measuredFrom;
      }
      latencies.push(at - p.sentAt);
      if (trace) trace.push(`d\t${(performance.timeOrigin + p.sentAt).toFixed(1)}\t${(at - p.sentAt).toFixed(1)}\t${p.kind}`);
    }
  };
  const releases: Array<{ at: number; key: string; token: string }> = [];
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });
  let cpu0 = 0;
  let db0 = 0;
  let changesBefore = 0;
  let measuring: Promise<void> | undefined;
  const t0 = performance.now();
  let n = 0;
  let rssMax = 0;
  const tickMs = 10;
  let next = t0;
  while (performance.now() - t0 < leadInMs + durationMs) {
    next += tickMs;
    const now = performance.now();
    if (measuredFrom === Number.POSITIVE_INFINITY && now - t0 >= leadInMs) {
      measuredFrom = now;
      latencies = [];
      coalesced = 0;
      changesBefore = changes;
      cpu0 = procStats(pid).cpuTicks;
      db0 = historyDb ? postgresCpuTicks(historyDb.server.dataDir) : 0;
      rssMax = 0;
      loopDelay.enable();
      trace = LATENCY_TRACE ? [] : null;
      measuring = atMeasure?.();
    }
    const due = Math.round(((now - t0) / 1000) * rate) - changes;
    // One write per node per tick: the bench's own cost stays small beside the console's.
    for (let i = 0; i < due; i++) {
      const release = releases[0];
      if (release && release.at <= now && changes % 2 === 1) {
        releases.shift();
        if (pending.has(release.key)) coalesced += 1;
        pending.set(release.key, { kind: "release", token: release.token, sentAt: performance.now() });
        for (const w of writers) w.command("DEL", release.key);
      } else {
        const kind = FORMAT_MIX[n % FORMAT_MIX.length]!;
        const key = `lock:churn:${tag}:${n++}`;
        const id = `t-${n}-${randomBytes(4).toString("hex")}`;
        // What the stream shows as the value: the token, a Redisson holder field, a semaphore member.
        const token = kind === "redisson" ? `${REDISSON_CLIENT}:${n}` : id;
        pending.set(key, { kind: "acquire", token, sentAt: performance.now() });
        for (const w of writers) {
          // Each library's own writes: SET NX PX; Redisson's script (HINCRBY of the holder field, then
          // PEXPIRE); redis-semaphore's script (ZADD of a permit scored by the time, then PEXPIRE of the set).
          if (kind === "token") w.command("SET", key, token, "PX", 60_000, "NX");
          else if (kind === "redisson") w.command("EVALSHA", REDISSON_LOCK.sha, 1, key, token, 60_000);
          else w.command("EVALSHA", SEMAPHORE_ACQUIRE.sha, 1, key, token, Date.now(), 60_000);
        }
        releases.push({ at: now + HOLD_MS, key, token });
      }
      changes += 1;
    }
    if (due > 0) for (const w of writers) w.flush();
    if (n % 50 === 0) rssMax = Math.max(rssMax, procStats(pid).rssMb);
    if (trace) trace.push(`s\t${(performance.timeOrigin + performance.now()).toFixed(1)}\t${readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").trim().split(" ").slice(0, 2).join("\t")}`);
    const wait = next - performance.now();
    if (wait > 0) await sleep(wait);
    else await new Promise((r) => setImmediate(r));
  }
  await measuring;
  const elapsed = performance.now() - measuredFrom;
  const cpu1 = procStats(pid).cpuTicks;
  const db1 = historyDb ? postgresCpuTicks(historyDb.server.dataDir) : 0;
  if (trace && LATENCY_TRACE) appendFileSync(LATENCY_TRACE, `# ${tag}\n${trace.join("\n")}\n`);
  await Promise.all(writers.map((w) => w.close()));
  loopDelay.disable();
  const serverLoop = await serverLoopP99(port);
  // Let the last writes arrive, then compare the stream's view with Redis, key by key.
  await sleep(SETTLE_MS);
  rssMax = Math.max(rssMax, procStats(pid).rssMb);
  const missed = pending.size;
  let lost = 0;
  const keys: string[] = [];
  for (let i = 0; i < n; i++) keys.push(`lock:churn:${tag}:${i}`);
  for (let i = 0; i < keys.length; i += 5_000) {
    const slice = keys.slice(i, i + 5_000);
    const read = clients[0]!.pipeline();
    slice.forEach((key, j) => {
      const kind = FORMAT_MIX[(i + j) % FORMAT_MIX.length];
      if (kind === "token") read.get(key);
      else if (kind === "redisson") read.hkeys(key);
      else read.zrange(key, 0, -1);
    });
    const values = ((await read.exec()) ?? []).map(([, v]) => (Array.isArray(v) ? (v.length === 0 ? null : (v as string[]).sort().join("\n")) : typeof v === "string" ? v : null));
    slice.forEach((key, j) => {
      const truth = values[j] ?? null;
      const shown = stream.locks.get(key);
      const shownToken = shown && (shown.state === "held" || shown.state === "partial") ? shown.token : null;
      if (truth !== shownToken) lost += 1;
    });
  }
  const sorted = latencies.sort((a, b) => a - b);
  return {
    rate,
    changes: changes - changesBefore,
    seen: latencies.length,
    coalesced: coalesced + missed,
    lost,
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
    achievedRate: ((changes - changesBefore) / elapsed) * 1000,
    cpuPct: ((cpu1 - cpu0) / CLK_TCK / (elapsed / 1000)) * 100,
    ...(historyDb ? { dbCpuPct: ((db1 - db0) / CLK_TCK / (elapsed / 1000)) * 100 } : {}),
    cpuUsPerChange: latencies.length > 0 ? (((cpu1 - cpu0) / CLK_TCK) * 1e6) / latencies.length : Number.NaN,
    benchLoopP99: loopDelay.percentile(99) / 1e6,
    benchLoopMax: loopDelay.max / 1e6,
    serverLoopP99: serverLoop.p99,
    serverLoopMax: serverLoop.max,
    worstAtMs: worstAt,
    rssMb: rssMax,
  };
}

interface PhaseResult {
  held: number;
  /** From the console's start to every held lock listed (its reconcile by SCAN), and the nodes' PING p99 meanwhile. */
  reconcileMs: number;
  /**
   * CPU per held lock (µs) from the console's start to every lock listed: the console's (all threads, and its
   * main thread alone), above an empty console's start; the three nodes' together (SCAN and reads).
   */
  reconcileCpu: { consoleUsPerLock: number; mainUsPerLock: number; nodesUsPerLock: number };
  nodeP99DuringReconcileMs: number;
  /** The console's RSS above an empty console's, per held lock, once reconciled (bytes). */
  bytesPerLock: number;
  snapshotMs: number;
  restMs: number;
  /** The slowest of three `/metrics` scrapes once reconciled, with the console idle (a Prometheus's `scrape_duration_seconds`). */
  scrapeMs: number;
  rssAfterSnapshotMb: number;
  churns: ChurnResult[];
  hwmMb: number;
  /** With `--history`: events written to and dropped by the history recorder during the phase. */
  history?: { written: number; dropped: number; queued: number };
  /** With `--max-rate`: the highest rate sustained (null: not even the first probe), and every probe. */
  /** `hwmMb`: the console's peak RSS once the probes are done. */
  maxRate?: { sustained: number | null; probes: Probe[]; hwmMb: number };
  /** With `--node-pause`: see `pauseNode`. */
  nodePause?: NodePause;
}

interface Probe {
  rate: number;
  achieved: number;
  p99: number;
  lost: number;
  sustained: boolean;
}

/**
 * The highest churn rate sustained with `held` locks held: from the highest listed rate that held (else 1,000),
 * doubled until a probe fails, then the gap between the last that held and the first that failed halved until
 * it is within `SEARCH_RESOLUTION` of the former.
 */
async function findMaxRate(clients: Redis[], stream: StreamClient, pid: number, port: number, held: number, measured: ChurnResult[]): Promise<{ sustained: number | null; probes: Probe[] }> {
  const probes: Probe[] = [];
  const sustains = (c: ChurnResult) => c.achievedRate >= 0.98 * c.rate && c.lost === 0 && c.p99 <= SUSTAINED_P99_MS;
  const probe = async (rate: number): Promise<boolean> => {
    const tag = `${held}-max-${rate}`;
    await churn(clients, stream, pid, port, rate, `${tag}-warmup`, { durationMs: PROBE_WARMUP_MS });
    const c = await churn(clients, stream, pid, port, rate, tag, { leadInMs: LEAD_IN_MS, durationMs: PROBE_MS });
    const ok = sustains(c);
    probes.push({ rate, achieved: c.achievedRate, p99: c.p99, lost: c.lost, sustained: ok });
    out(`  N=${held}, highest rate: ${rate}/s ${ok ? "sustained" : "not sustained"} (p99 ${c.p99.toFixed(1)} ms, ${c.achievedRate.toFixed(0)}/s written, ${c.lost} lost)`);
    return ok;
  };
  let good: number | null = Math.max(0, ...measured.filter(sustains).map((c) => c.rate)) || null;
  let bad: number | null = null;
  let next = good === null ? 1_000 : good * 2;
  while (probes.length < MAX_PROBES && next <= RATE_CEILING) {
    if (await probe(next)) good = next;
    else bad = next;
    if (bad === null) next = next * 2;
    else if (good === null) next = Math.floor(next / 2);
    else if ((bad - good) / good > SEARCH_RESOLUTION) next = Math.round((good + bad) / 2 / 100) * 100;
    else break;
    if (next <= 0 || (good !== null && next <= good) || (bad !== null && next >= bad)) break;
  }
  return { sustained: good, probes };
}

interface NodePause {
  /** The console's longest event-loop delay from the pause to `NODE_PAUSE_AFTER_MS` after it (ms). */
  loopMaxMs: number;
  /** `/api/health` read every 250 ms meanwhile: answers, and those that called a node other than the paused one down. */
  healthReads: number;
  othersDown: number;
  /** The console's highest RSS seen meanwhile (MB). */
  rssPeakMb: number;
}

/** `--node-pause`: node 1 paused for `NODE_PAUSE_MS`, then let go (see `NODE_PAUSE`). */
async function pauseNode(nodes: RedisNode[], port: number, pid: number): Promise<NodePause> {
  const paused = nodes[1] as RedisNode;
  // (The console's loop-delay monitor starts again at every scrape.)
  await serverLoopP99(port);
  let healthReads = 0;
  let othersDown = 0;
  let rssPeakMb = procStats(pid).rssMb;
  let polling = true;
  const poll = (async () => {
    while (polling) {
      rssPeakMb = Math.max(rssPeakMb, procStats(pid).rssMb);
      try {
        const { body } = await getJson<{ nodes: Array<{ id: string; up: boolean }> }>(port, "/api/health");
        healthReads += 1;
        if (body.nodes.some((n, i) => i !== 1 && !n.up)) othersDown += 1;
      } catch {
        // (Counted only when it answers.)
      }
      await sleep(250);
    }
  })();
  out(`  node ${paused.port} paused for ${NODE_PAUSE_MS / 1000} s`);
  paused.pause();
  try {
    await sleep(NODE_PAUSE_MS);
  } finally {
    paused.resume();
  }
  await sleep(NODE_PAUSE_AFTER_MS);
  polling = false;
  await poll;
  return { loopMaxMs: (await serverLoopP99(port)).max, healthReads, othersDown, rssPeakMb };
}

/** PINGs each node every 10 ms from a process of its own (`bench/node-pinger.mjs`; on the nodes' CPU with `--pin`). */
class NodePinger {
  private readonly child: ChildProcess;
  private output = "";

  constructor(nodes: RedisNode[]) {
    const script = new URL("./node-pinger.mjs", import.meta.url).pathname;
    const ports = nodes.map((n) => String(n.port));
    this.child = PIN ? spawn("taskset", ["-c", "0", process.execPath, script, ...ports]) : spawn(process.execPath, [script, ...ports]);
    this.child.stdout?.on("data", (chunk: Buffer) => (this.output += chunk.toString()));
  }

  /** Stops, and gives the p99 round trip (ms). */
  async stop(): Promise<number> {
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    this.child.stdin?.end("stop\n");
    await exited;
    const samples = JSON.parse(this.output) as number[];
    return quantile(samples.sort((a, b) => a - b), 0.99);
  }
}

/** `--pin`: every thread of the nodes on CPU 0; every thread of this process (and so the console and stream readers it starts later) on the others. */
function pinCpus(nodes: RedisNode[]): void {
  const cpus = os.availableParallelism();
  if (cpus < 2) throw new Error("--pin needs at least 2 CPUs");
  for (const node of nodes) execFileSync("taskset", ["-a", "-p", "-c", "0", String(node.pid)], { stdio: "ignore" });
  execFileSync("taskset", ["-a", "-p", "-c", `1-${cpus - 1}`, String(process.pid)], { stdio: "ignore" });
  out(`pinned: the nodes on CPU 0, the console and the load on CPU${cpus > 2 ? `s 1-${cpus - 1}` : " 1"}`);
}

/** An empty console's RSS (MB), the base the per-lock figure is measured from. */
let baselineRssMb = 0;
/** An empty console's CPU from its start to ready plus 3 s idle (ticks, all threads / its main thread): the base of the reconcile's CPU per lock. */
let baselineCpu = { all: 0, main: 0 };

/** CPU ticks of a process's main thread (the console's event loop and everything it runs). */
function mainThreadTicks(pid: number): number {
  const { fields } = readStat(`${pid}/task/${pid}`);
  return Number(fields[11]) + Number(fields[12]);
}

async function measureBaseline(nodes: RedisNode[]): Promise<void> {
  const clients = nodes.map((n) => new Redis(n.port, "127.0.0.1"));
  await Promise.all(clients.map((c) => c.flushall()));
  for (const c of clients) c.disconnect();
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-bench-console-"));
  const { child } = await startConsole(
    nodes.map((n) => n.url),
    dataDir,
  );
  try {
    await sleep(3_000);
    baselineRssMb = procStats(child.pid!).rssMb;
    baselineCpu = { all: procStats(child.pid!).cpuTicks, main: mainThreadTicks(child.pid!) };
  } finally {
    await stopConsole(child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function phase(nodes: RedisNode[], held: number): Promise<PhaseResult> {
  const clients = nodes.map((n) => new Redis(n.port, "127.0.0.1", { enableAutoPipelining: true }));
  await Promise.all(clients.map((c) => c.flushall()));
  await Promise.all(clients.flatMap((c) => [c.script("LOAD", REDISSON_LOCK.body), c.script("LOAD", SEMAPHORE_ACQUIRE.body)]));
  await loadHeld(clients, held);
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-bench-console-"));
  const pinger = new NodePinger(nodes);
  const nodeTicks = () => nodes.reduce((sum, n) => sum + (n.pid === undefined ? 0 : procStats(n.pid).cpuTicks), 0);
  const nodeTicks0 = nodeTicks();
  const consoleStarted = performance.now();
  const { child, port } = await startConsole(
    nodes.map((n) => n.url),
    dataDir,
  );
  try {
    // The watcher reconciles N keys by SCAN before /api/ready answers 200; make sure it shows all of them.
    for (;;) {
      // The groups' counts, not a list: a list of a million locks is larger than one JavaScript string.
      const { body } = await getJson<{ locks: number }>(port, "/api/locks/groups?limit=1");
      if (body.locks >= held) break;
      await sleep(200);
    }
    const reconcileMs = performance.now() - consoleStarted;
    const perLock = (ticks: number) => ((ticks / CLK_TCK) * 1e6) / held;
    const reconcileCpu = {
      consoleUsPerLock: perLock(procStats(child.pid!).cpuTicks - baselineCpu.all),
      mainUsPerLock: perLock(mainThreadTicks(child.pid!) - baselineCpu.main),
      nodesUsPerLock: perLock(nodeTicks() - nodeTicks0),
    };
    const nodeP99DuringReconcileMs = await pinger.stop();
    await sleep(3_000);
    const bytesPerLock = ((procStats(child.pid!).rssMb - baselineRssMb) * 1024 * 1024) / held;
    const stream = new StreamClient(port, 1, held <= 100_000);
    while (stream.snapshotDoneAt === null) await sleep(5);
    const snapshotMs = stream.snapshotDoneAt - stream.openedAt;
    if (stream.snapshotLocks < held) throw new Error(`snapshot has ${stream.snapshotLocks} locks, expected ${held}`);
    // Read to the end, not parsed: at a million locks the body is larger than one JavaScript string.
    const restStarted = performance.now();
    const rest = await fetch(`http://127.0.0.1:${port}/api/locks`, { headers: { authorization: `Bearer ${VIEWER}` } });
    if (rest.status !== 200 || !rest.body) throw new Error(`GET /api/locks answered ${rest.status}`);
    const reader = rest.body.getReader();
    while (!(await reader.read()).done);
    const restMs = performance.now() - restStarted;
    let scrapeMs = 0;
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      await scrape(port);
      scrapeMs = Math.max(scrapeMs, performance.now() - started);
    }
    const rssAfterSnapshotMb = procStats(child.pid!).rssMb;
    const churns: ChurnResult[] = [];
    const tab = BROWSER ? await BrowserTab.open(port, VIEWER, held) : null;
    if (tab) out(`  N=${held}: the tab showed the first locks of its ${tab.view} after ${(tab.firstRowMs / 1000).toFixed(1)} s`);
    try {
    for (const [rateIndex, rate] of RATES.entries()) {
      for (const viewers of VIEWERS) {
        // (The rate's place in the list is in the keys' names, so a rate asked twice churns keys of its own.)
        const tag = `${held}-${rate}-${viewers}-${rateIndex}`;
        // The other viewers read the same stream (in one worker of their own) and drop what they get.
        const others = viewers > 1 ? [new StreamClient(port, viewers - 1)] : [];
        try {
          // An unmeasured warm-up at the same rate (JIT, first allocations of the stream path, the other streams'
          // snapshots), then the measured churn: its lead-in, long enough for its first locks' releases, is not
          // measured either.
          await tab?.scroll();
          await churn(clients, stream, child.pid!, port, rate, `${tag}-warmup`, { durationMs: WARMUP_MS });
          // The other streams' snapshots (each of every lock listed, a rate's lingering ended locks included)
          // come first: the measured churn is of a hundred streams open, not of a hundred opening.
          for (let more = 0; !others.every((o) => o.through); more++) {
            if (more === OTHERS_WARMUP_MAX) throw new Error(`the other ${viewers - 1} streams had not all had their snapshot after ${((more + 1) * WARMUP_MS) / 1000} s of churn`);
            await churn(clients, stream, child.pid!, port, rate, `${tag}-warmup${more + 1}`, { durationMs: WARMUP_MS });
          }
          if (others.length > 0) out(`  N=${held}, ${rate}/s, ${viewers} viewer(s): the other streams' snapshots came within ${((performance.now() - (others[0] as StreamClient).openedAt) / 1000).toFixed(1)} s`);
          out(`  N=${held}, ${rate}/s, ${viewers} viewer(s): measuring`);
          const measured = await churn(clients, stream, child.pid!, port, rate, tag, {
            leadInMs: LEAD_IN_MS,
            atMeasure: tab ? () => tab.begin(TAB_PROFILE_DIR ? path.join(TAB_PROFILE_DIR, `tab-${tag}.cpuprofile`) : null) : undefined,
          });
          const figures = await tab?.end();
          churns.push({ ...measured, viewers, ...(figures ? { tab: figures } : {}) });
        } finally {
          for (const other of others) other.close();
        }
        out(`  N=${held}, ${rate}/s, ${viewers} viewer(s): done`);
      }
    }
    } finally {
      await tab?.close();
    }
    // The peak of the measured churns, the bars' (the probes past them, and a node's pause, report their own).
    const hwmMb = procStats(child.pid!).hwmMb;
    const maxRate = MAX_RATE ? { ...(await findMaxRate(clients, stream, child.pid!, port, held, churns)), hwmMb: procStats(child.pid!).hwmMb } : undefined;
    const nodePause = NODE_PAUSE ? await pauseNode(nodes, port, child.pid!) : undefined;
    stream.close();
    const history = HISTORY ? await historyCounts(port) : undefined;
    return { held, reconcileMs, reconcileCpu, nodeP99DuringReconcileMs, bytesPerLock, snapshotMs, restMs, scrapeMs, rssAfterSnapshotMb, churns, hwmMb, ...(history ? { history } : {}), ...(maxRate ? { maxRate } : {}), ...(nodePause ? { nodePause } : {}) };
  } finally {
    await stopConsole(child);
    for (const c of clients) c.disconnect();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  if (!ensureBuild(ROOT)) throw new Error("`npm run build` failed; see the output above");
  const stopHistoryDb = await startHistoryDb();
  // (Removed at exit, and a signal to this process still runs the exit hooks that stop the nodes and the console.)
  const dir = scratchDir();
  const nodes = await startRedisNodes(3, { dir });
  if (PIN) pinCpus(nodes);
  const started = Date.now();
  const results: PhaseResult[] = [];
  try {
    await measureBaseline(nodes);
    for (const held of HELD_COUNTS) {
      out(`phase: ${held} locks held`);
      results.push(await phase(nodes, held));
    }
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
    await stopHistoryDb();
  }
  const f = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : "–");
  out("");
  out(`Live view: 3 local redis-server nodes, console as a child process, one stream client, locks ${STREAM_ENCODING === "compact" ? "compact (as a browser tab takes them)" : "whole (--full-locks)"} (${((Date.now() - started) / 1000).toFixed(0)} s in all)`);
  out("");
  out("| locks held | changes/s asked | viewers | achieved | changes | delivered | p50 ms | p99 ms | max ms | not seen individually | lost (final state wrong) | server CPU % | CPU µs per change | server RSS MB | server loop delay p99 / max ms | bench loop delay p99 / max ms | slowest change written at ms |");
  out("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of results) {
    for (const c of r.churns) {
      out(`| ${r.held} | ${c.rate} | ${c.viewers ?? 1} | ${f(c.achievedRate, 0)} | ${c.changes} | ${c.seen} | ${f(c.p50)} | ${f(c.p99)} | ${f(c.max)} | ${c.coalesced} | ${c.lost} | ${f(c.cpuPct, 0)} | ${f(c.cpuUsPerChange, 0)} | ${f(c.rssMb, 0)} | ${f(c.serverLoopP99)} / ${f(c.serverLoopMax)} | ${f(c.benchLoopP99)} / ${f(c.benchLoopMax)} | ${f(c.worstAtMs, 0)} |`);
    }
  }
  const tabs = results.flatMap((r) => r.churns.flatMap((c) => (c.tab ? [{ held: r.held, rate: c.rate, tab: c.tab }] : [])));
  if (tabs.length > 0) {
    out("");
    out("The Chromium tab on the Locks page, its table scrolling during each churn:");
    out("");
    out("| locks held | changes/s | view | JS heap max MB | long tasks (≥ 50 ms) | longest task ms | frame interval p99 / max ms | Chromium CPU % of a core |");
    out("|---:|---:|---|---:|---:|---:|---:|---:|");
    for (const { held, rate, tab } of tabs) out(`| ${held} | ${rate} | ${tab.view} | ${f(tab.heapMaxMb)} | ${tab.longTasks} | ${f(tab.longTaskMaxMs, 0)} | ${f(tab.frameP99Ms)} / ${f(tab.frameMaxMs)} | ${f(tab.cpuPct, 0)} |`);
  }
  if (MAX_RATE) {
    out("");
    out(`The highest churn rate sustained (written at 98 % of the rate or more, nothing lost, p99 delivery ≤ ${SUSTAINED_P99_MS} ms; ${PROBE_MS / 1_000} s probes):`);
    out("");
    out("| locks held | highest rate sustained | probes: rate (p99 ms, written per s) | peak RSS (VmHWM) after the probes MB |");
    out("|---:|---:|---|---:|");
    for (const r of results) {
      if (!r.maxRate) continue;
      const probes = r.maxRate.probes.map((p) => `${p.rate} ${p.sustained ? "✓" : "✗"} (${f(p.p99)}, ${f(p.achieved, 0)}${p.lost > 0 ? `, ${p.lost} lost` : ""})`).join("; ");
      out(`| ${r.held} | ${r.maxRate.sustained === null ? "none probed held" : `${r.maxRate.sustained}/s`} | ${probes} | ${f(r.maxRate.hwmMb, 0)} |`);
    }
  }
  if (NODE_PAUSE) {
    out("");
    out(`One node paused (SIGSTOP) for ${NODE_PAUSE_MS / 1000} s with every lock held, then let go; from the pause to ${NODE_PAUSE_AFTER_MS / 1000} s after it:`);
    out("");
    out("| locks held | console loop delay max ms | /api/health answers calling another node down | console RSS peak MB |");
    out("|---:|---:|---:|---:|");
    for (const r of results) if (r.nodePause) out(`| ${r.held} | ${f(r.nodePause.loopMaxMs, 0)} | ${r.nodePause.othersDown} of ${r.nodePause.healthReads} | ${f(r.nodePause.rssPeakMb, 0)} |`);
  }
  out("");
  out(`An empty console: ${f(baselineRssMb, 0)} MB RSS. A "—" for the console's CPU per lock: less than the spread of an empty console's own start.`);
  out("");
  out("| locks held | reconcile s | CPU µs per lock: console (main thread) / nodes | node PING p99 during it ms | RSS per held lock (above an empty console) | stream snapshot ms | REST /api/locks ms | /metrics scrape ms | RSS after snapshot MB | peak RSS (VmHWM) MB |");
  out("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  // (The console's own CPU above an empty console's start: with few locks, less than the spread of that start.)
  const above = (us: number) => (us > 0 ? f(us) : "—");
  for (const r of results) out(`| ${r.held} | ${f(r.reconcileMs / 1000)} | ${above(r.reconcileCpu.consoleUsPerLock)} (${above(r.reconcileCpu.mainUsPerLock)}) / ${f(r.reconcileCpu.nodesUsPerLock)} | ${f(r.nodeP99DuringReconcileMs, 2)} | ${f(r.bytesPerLock, 0)} B | ${f(r.snapshotMs, 0)} | ${f(r.restMs, 0)} | ${f(r.scrapeMs, 0)} | ${f(r.rssAfterSnapshotMb, 0)} | ${f(r.hwmMb, 0)} |`);
  if (HISTORY) {
    out("");
    out("| locks held | history events written | dropped | still queued at the end | PostgreSQL CPU % during each churn |");
    out("|---:|---:|---:|---:|---|");
    for (const r of results) {
      const db = r.churns.map((c) => `${c.rate}/s: ${f(c.dbCpuPct ?? Number.NaN, 0)}`).join(", ");
      out(`| ${r.held} | ${r.history?.written ?? "–"} | ${r.history?.dropped ?? "–"} | ${r.history?.queued ?? "–"} | ${db} |`);
    }
  }
  // The first bars are of the default sizes (up to 100,000 locks held); the scale bars are checked where the run
  // measured their sizes (1,000 or 1,000,000 held, 5,000 or 10,000 changes/s, 100 viewers).
  const small = results.filter((r) => r.held <= 100_000);
  const churnsOf = (rs: readonly PhaseResult[], rate: number, viewers = 1) => rs.flatMap((r) => r.churns.filter((c) => c.rate === rate && (c.viewers ?? 1) === viewers));
  type Bar = { bar: string; value: string; ok: boolean; limit: string };
  /** A p99 delivery bar over `cs` (none when the run measured none of them): the worst p99 within the limit. */
  const p99Bar = (bar: string, cs: readonly ChurnResult[], limitMs: number, inclusive = true): Bar[] => {
    if (cs.length === 0) return [];
    const worst = Math.max(...cs.map((c) => c.p99));
    return [{ bar, value: `${f(worst)} ms`, ok: inclusive ? worst <= limitMs : worst < limitMs, limit: `${inclusive ? "≤" : "<"} ${limitMs} ms` }];
  };
  const bars: Bar[] = [...p99Bar("p99 delivery at 5,000 changes/s", churnsOf(small, 5_000), 100, false)];
  bars.push({ bar: "events lost", value: String(results.flatMap((r) => r.churns).reduce((a, c) => a + c.lost, 0)), ok: results.every((r) => r.churns.every((c) => c.lost === 0)), limit: "0" });
  const biggestSmall = small[small.length - 1];
  if (biggestSmall) {
    bars.push({ bar: `snapshot of ${biggestSmall.held} locks`, value: `${f(biggestSmall.snapshotMs, 0)} ms`, ok: biggestSmall.snapshotMs < 3_000, limit: "< 3000 ms" });
    bars.push({ bar: "server peak RSS", value: `${f(Math.max(...small.map((r) => r.hwmMb)), 0)} MB`, ok: small.every((r) => r.hwmMb < 400), limit: "< 400 MB" });
  }
  const thousand = results.filter((r) => r.held === 1_000);
  const million = results.filter((r) => r.held === 1_000_000);
  const scale: Bar[] = [
    ...p99Bar("p99 delivery at 5,000 changes/s, 1,000 held", churnsOf(thousand, 5_000), 20),
    ...p99Bar("p99 delivery at 5,000 changes/s, 1,000,000 held", churnsOf(million, 5_000), 50),
    ...p99Bar("p99 delivery at 10,000 changes/s", churnsOf([...thousand, ...million], 10_000), 100),
  ];
  // The fan-out: each churn with 100 streams against the same size and rate with one.
  const fanOut = results.flatMap((r) =>
    r.churns.flatMap((c) => {
      const one = (c.viewers ?? 1) === 100 ? r.churns.find((o) => o.rate === c.rate && (o.viewers ?? 1) === 1) : undefined;
      return one ? [c.cpuPct / one.cpuPct] : [];
    }),
  );
  if (fanOut.length > 0) scale.push({ bar: "server CPU, 100 viewers / 1", value: f(Math.max(...fanOut), 2), ok: fanOut.every((x) => x <= 1.5), limit: "≤ 1.5" });
  for (const r of million) {
    scale.push({ bar: "reconcile of 1,000,000 locks", value: `${f(r.reconcileMs / 1000)} s`, ok: r.reconcileMs <= 20_000, limit: "≤ 20 s" });
    scale.push({ bar: "node PING p99 during it", value: `${f(r.nodeP99DuringReconcileMs, 2)} ms`, ok: r.nodeP99DuringReconcileMs <= 5, limit: "≤ 5 ms" });
    scale.push({ bar: "RSS per held lock, 1,000,000 held", value: `${f(r.bytesPerLock, 0)} B`, ok: r.bytesPerLock <= 1_000, limit: "≤ 1,000 B" });
    scale.push({ bar: "peak RSS, 1,000,000 held", value: `${f(r.hwmMb, 0)} MB`, ok: r.hwmMb <= 1_200, limit: "≤ 1,200 MB" });
  }
  if (tabs.length > 0) {
    scale.push({ bar: "browser tab JS heap", value: `${f(Math.max(...tabs.map((t) => t.tab.heapMaxMb)), 0)} MB`, ok: tabs.every((t) => t.tab.heapMaxMb <= 300), limit: "≤ 300 MB" });
    scale.push({ bar: "browser tab longest task", value: `${f(Math.max(...tabs.map((t) => t.tab.longTaskMaxMs)), 0)} ms`, ok: tabs.every((t) => t.tab.longTaskMaxMs <= 100), limit: "≤ 100 ms" });
  }
  bars.push(...scale.map((b) => ({ ...b, bar: `scale: ${b.bar}` })));
  out("");
  out("| bar | value | limit | result |");
  out("|---|---:|---|---|");
  for (const b of bars) out(`| ${b.bar} | ${b.value} | ${b.limit} | ${b.ok ? "PASS" : "FAIL"} |`);
  if (JSON_OUT) process.stdout.write(`${JSON.stringify({ results, bars }, null, 2)}\n`);
}

/** Leases held through the soak, each renewed every second. */
const SOAK_LEASES = 1_000;
/** Longer than the soak: every renewal moves the lease's expiry, and none expires meanwhile. */
const SOAK_LEASE_TTL_MS = 15 * 60_000;
/** Short locks taken and released alongside (ended locks, timelines, the stream's frames). */
const SOAK_CHURN_PER_SEC = 100;
/** Memory is sampled this often. */
const SOAK_SAMPLE_MS = 5_000;
/**
 * The first two minutes are warm-up: every lease's timeline fills to its 100 entries and the ended locks kept
 * for their pages to their 10,000 in about 100 s. The rest is split in two halves, compared below.
 */
const SOAK_WARMUP_MIN = 2;
/**
 * V8 lets the heap grow by a hundred MB or more between major collections and keeps pages for a while, so
 * single samples say little. A leak of JavaScript objects raises the heap's floor (its lowest sample, right
 * after a collection); RSS (which also holds buffers and pages V8 has not returned yet) is compared by its
 * median. Allowed growth from the first half to the second.
 */
const SOAK_MARGIN = { heapFloorMb: 8, rssMedianMb: 50 };

/** The console's heap in use and external memory (MB), from its own /metrics (prom-client's Node.js defaults). */
async function serverMemoryMb(port: number): Promise<{ heapMb: number; externalMb: number }> {
  const text = await scrape(port);
  const read = (name: string) => {
    const value = new RegExp(`^lockscope_nodejs_${name} (\\S+)$`, "m").exec(text)?.[1];
    return value === undefined ? Number.NaN : Number(value) / 1024 / 1024;
  };
  return { heapMb: read("heap_size_used_bytes"), externalMb: read("external_memory_bytes") };
}

/**
 * The memory soak: SOAK_LEASES leases held by every node and renewed (PEXPIRE) every second for the whole
 * run, plus SOAK_CHURN_PER_SEC short locks taken and released, with one stream client reading. The
 * console's RSS and heap are sampled every 5 s; after the warm-up, memory is flat when the second half's heap
 * floor and RSS median are within SOAK_MARGIN of the first half's.
 */
async function soak(minutes: number): Promise<void> {
  if (!ensureBuild(ROOT)) throw new Error("`npm run build` failed; see the output above");
  const dir = scratchDir();
  const nodes = await startRedisNodes(3, { dir });
  const clients = nodes.map((n) => new Redis(n.port, "127.0.0.1", { enableAutoPipelining: true }));
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-bench-console-"));
  const leases = Array.from({ length: SOAK_LEASES }, (_, i) => `lock:lease:${i}`);
  await Promise.all(clients.map(async (c) => {
    const p = c.pipeline();
    leases.forEach((key, i) => p.set(key, `lease-${i}`, "PX", SOAK_LEASE_TTL_MS));
    await p.exec();
  }));
  const { child, port } = await startConsole(nodes.map((n) => n.url), dataDir);
  const pid = child.pid!;
  const stream = new StreamClient(port);
  const samples: Array<{ atMin: number; rssMb: number; heapMb: number; externalMb: number }> = [];
  const started = performance.now();
  const endAt = started + minutes * 60_000;
  let renewals = 0;
  let churned = 0;
  let nextSample = started;
  try {
    for (let second = 0; performance.now() < endAt; second++) {
      const tickStart = started + second * 1_000;
      for (const c of clients) {
        const p = c.pipeline();
        for (const key of leases) p.pexpire(key, SOAK_LEASE_TTL_MS);
        void p.exec();
      }
      renewals += SOAK_LEASES;
      // Short locks: taken now, released a second later (by the next round).
      for (let i = 0; i < SOAK_CHURN_PER_SEC; i++) {
        const key = `lock:soak:${second}:${i}`;
        for (const c of clients) void c.set(key, `t-${second}-${i}`, "PX", 30_000);
        const old = `lock:soak:${second - 1}:${i}`;
        for (const c of clients) void c.del(old);
      }
      churned += SOAK_CHURN_PER_SEC;
      if (performance.now() >= nextSample) {
        nextSample += SOAK_SAMPLE_MS;
        const atMin = (performance.now() - started) / 60_000;
        const sample = { atMin, rssMb: procStats(pid).rssMb, ...(await serverMemoryMb(port)) };
        samples.push(sample);
        out(`  ${atMin.toFixed(1)} min: RSS ${sample.rssMb.toFixed(0)} MB, heap ${sample.heapMb.toFixed(1)} MB, external ${sample.externalMb.toFixed(1)} MB, ${stream.locks.size} locks in the stream's view`);
      }
      const wait = tickStart + 1_000 - performance.now();
      if (wait > 0) await sleep(wait);
    }
  } finally {
    stream.close();
    await stopConsole(child);
    for (const c of clients) c.disconnect();
    await Promise.all(nodes.map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  }
  const within = (from: number, to: number) => samples.filter((x) => x.atMin >= from && x.atMin < to);
  const middle = SOAK_WARMUP_MIN + (minutes - SOAK_WARMUP_MIN) / 2;
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? Number.NaN;
  const halves = [within(SOAK_WARMUP_MIN, middle), within(middle, Infinity)].map((h) => ({
    heapFloorMb: Math.min(...h.map((x) => x.heapMb)),
    heapPeakMb: Math.max(...h.map((x) => x.heapMb)),
    rssMedianMb: median(h.map((x) => x.rssMb)),
    rssMinMb: Math.min(...h.map((x) => x.rssMb)),
    rssMaxMb: Math.max(...h.map((x) => x.rssMb)),
    externalMedianMb: median(h.map((x) => x.externalMb)),
  }));
  const [first, second] = halves as [(typeof halves)[number], (typeof halves)[number]];
  const growth = { heapFloorMb: second.heapFloorMb - first.heapFloorMb, rssMedianMb: second.rssMedianMb - first.rssMedianMb };
  const f = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : "–");
  const span = (a: number, b: number) => `${f(a, 1)}–${f(b, 1)} min`;
  const verdict = (ok: boolean) => (ok ? "PASS" : "FAIL");
  out("");
  out(`Live view soak: ${minutes} min, ${SOAK_LEASES} leases renewed every second (${renewals} renewals per node), ${churned} short locks taken and released, one stream client`);
  out("");
  out(`| | first half (${span(SOAK_WARMUP_MIN, middle)}) | second half (${span(middle, minutes)}) | growth | allowed | result |`);
  out("|---|---:|---:|---:|---:|---|");
  out(`| heap floor MB (lowest sample) | ${f(first.heapFloorMb)} | ${f(second.heapFloorMb)} | ${f(growth.heapFloorMb)} | < ${SOAK_MARGIN.heapFloorMb} | ${verdict(growth.heapFloorMb < SOAK_MARGIN.heapFloorMb)} |`);
  out(`| RSS MB, median | ${f(first.rssMedianMb, 0)} | ${f(second.rssMedianMb, 0)} | ${f(growth.rssMedianMb)} | < ${SOAK_MARGIN.rssMedianMb} | ${verdict(growth.rssMedianMb < SOAK_MARGIN.rssMedianMb)} |`);
  out(`| RSS MB, lowest – highest | ${f(first.rssMinMb, 0)} – ${f(first.rssMaxMb, 0)} | ${f(second.rssMinMb, 0)} – ${f(second.rssMaxMb, 0)} | | | |`);
  out(`| heap peak MB (highest sample) | ${f(first.heapPeakMb)} | ${f(second.heapPeakMb)} | | | |`);
  out(`| external memory MB, median | ${f(first.externalMedianMb)} | ${f(second.externalMedianMb)} | | | |`);
  if (JSON_OUT) process.stdout.write(`${JSON.stringify({ minutes, samples, halves, growth, margin: SOAK_MARGIN }, null, 2)}\n`);
}

(SOAK ? soak(SOAK_MINUTES) : main()).catch((error: unknown) => {
  // (fetch's own error says only "fetch failed"; its cause says why: refused, reset, timed out.)
  const cause = error instanceof Error && error.cause instanceof Error ? `\ncaused by: ${error.cause.stack ?? error.cause.message}` : "";
  process.stderr.write(`bench:live failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}${cause}\n`);
  process.exit(1);
});
