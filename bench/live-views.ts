/**
 * What a stream's view costs the console per lock change (not a test): `npm run bench:live:views [-- --held
 * 1000] [-- --rounds 15] [-- --json]`.
 *
 * In this one process, the console's own lock store and stream hub (no Redis: the nodes' readings are made
 * here, as the watchers decode them), with `--held` locks held in the group `held` and a churn of 10,000
 * changes a second (simulated time: each 10 ms tick applies 100 changes on three nodes, half acquisitions and
 * half releases of locks held 1 s, in turn a plain token, a Redisson hash and a redis-semaphore permit, in the
 * group `churn`), then the hub's tick, as the console runs them. One stream is open, read to its end and
 * dropped, with one of four views: every lock (the flat table, a script), no lock (the grouped view: nodes and
 * counts), the group `held` (a group's table where nothing changes), the group `churn` (the group that
 * changes). Each round runs every view for 3 s of churn (simulated: well under a second of CPU), in a rotating order,
 * after one unmeasured pass over them all; the figures are the process's CPU time per change, the median of
 * the rounds, and the median of each view's ratio to "every lock" in the same round.
 */
import { EventEmitter } from "node:events";
import { decodeReading } from "../lib/locks/formats";
import type { RawReading } from "../lib/locks/formats/types";
import { NO_LOCKS, StreamHub } from "../server/live/hub";
import type { LiveEventMap } from "../server/live/events";
import { LockStore, type NodeSample } from "../server/live/store";
import type { LiveStats } from "../lib/locks/types";
import { median, numberArg } from "./support";

const argv = process.argv.slice(2);
const JSON_OUT = argv.includes("--json");
const HELD = numberArg(argv, "--held", 1_000, 0);
const ROUNDS = numberArg(argv, "--rounds", 15, 1);
const out = (line = "") => (JSON_OUT ? process.stderr : process.stdout).write(`${line}\n`);

const RATE = 10_000;
const TICK_MS = 10;
const SECONDS_PER_RUN = 3;
const NODES = ["node-0", "node-1", "node-2"];
const REDISSON_CLIENT = "5b0d3c2a-9e1f-4a7b-8c6d-2f4e1a3b5c7d";
const STATS: LiveStats = { serverTime: 0, held: 0, locks: 0, acquisitionsPerSec: 0, contentionPerSec: 0, expirationsPerSec: 0, nodesUp: 3, nodesTotal: 3, nodesNotAnswering: 0, nodesWithoutNotifications: 0, degraded: false };

const VIEWS = [
  { name: "every lock", group: null },
  { name: "no lock (grouped view)", group: NO_LOCKS },
  { name: "group `held` (no change)", group: "held" },
  { name: "group `churn`", group: "churn" },
] as const;

let now = Date.now();
const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>());
const hub = new StreamHub({ store, groupOf: (resource) => resource.slice(0, resource.indexOf("/")), watcherStatus: () => [], stats: () => ({ ...STATS, serverTime: now }) });

/** Three nodes' readings of one key, decoded as a watcher decodes them. */
function apply(key: string, raw: RawReading | null): void {
  const samples: NodeSample[] = NODES.map((_, node) => {
    const decoded = raw === null ? null : decodeReading({ key, at: now, raw }, { now });
    return decoded === null ? { node, reading: null, value: null, expiry: Number.NaN, cause: "del" } : { node, reading: decoded, value: decoded.fingerprint, expiry: decoded.expiresAt, cause: null };
  });
  store.apply(key, samples, now);
}

for (let i = 0; i < HELD; i++) {
  const token = `held-${i}-7c2f9a41`;
  apply(`held/${i}`, { type: "string", pttlMs: 3_600_000, size: token.length, value: token, extras: {} });
}
NODES.forEach((_, i) => store.setNodeUp(i, true, now));
store.watching = true;

let n = 0;
let changes = 0;
const releases: Array<{ at: number; key: string }> = [];
function churnFor(seconds: number): number {
  const before = changes;
  for (let t = 0; t < (seconds * 1_000) / TICK_MS; t++) {
    now += TICK_MS;
    for (let i = 0; i < (RATE * TICK_MS) / 1_000; i++) {
      const release = releases[0];
      if (release && release.at <= now && changes % 2 === 1) {
        releases.shift();
        apply(release.key, null);
      } else {
        n += 1;
        const key = `churn/${n}`;
        const id = `t-${n}-${((n * 2654435761) >>> 0).toString(16)}`;
        const kind = n % 3;
        apply(
          key,
          kind === 0
            ? { type: "string", pttlMs: 60_000, size: id.length, value: id, extras: {} }
            : kind === 1
              ? { type: "hash", pttlMs: 60_000, size: 1, fields: [[`${REDISSON_CLIENT}:${n}`, "1"]], extras: {} }
              : { type: "zset", pttlMs: 60_000, size: 1, members: [[id, now]], extras: {} },
        );
        releases.push({ at: now + 1_000, key });
      }
      changes += 1;
    }
    store.tick(now);
    hub.tick(now);
  }
  return changes - before;
}

/** Reads the stream to its end, dropping what comes (the consumer's side of a socket). */
function readAway(stream: ReadableStream<Uint8Array>): { bytes: () => number; close: () => Promise<void> } {
  const reader = stream.getReader();
  let bytes = 0;
  let open = true;
  void (async () => {
    while (open) {
      const { value, done } = await reader.read();
      if (done) return;
      bytes += value.byteLength;
    }
  })();
  return {
    bytes: () => bytes,
    close: async () => {
      open = false;
      await reader.cancel();
    },
  };
}

/** Past the hub's resume grace: the last view's frames stop before the next view is measured. */
const AFTER_GRACE_MS = 61_000;

async function measure(view: (typeof VIEWS)[number]): Promise<{ cpuUsPerChange: number; bytesPerChange: number }> {
  const stream = readAway(hub.open(null, null, null, view.group));
  // Warm-up, and the snapshot read.
  churnFor(1);
  await new Promise((resolve) => setImmediate(resolve));
  const bytes0 = stream.bytes();
  const cpu0 = process.cpuUsage();
  let done = 0;
  for (let s = 0; s < SECONDS_PER_RUN; s++) {
    done += churnFor(1);
    // The stream's reader runs between the seconds, as a socket drains between ticks.
    await new Promise((resolve) => setImmediate(resolve));
  }
  const cpu = process.cpuUsage(cpu0);
  const bytes = stream.bytes() - bytes0;
  await stream.close();
  // A tick notes the view closed, then its grace passes.
  churnFor(0.01);
  now += AFTER_GRACE_MS;
  churnFor(0.1);
  return { cpuUsPerChange: (cpu.user + cpu.system) / done, bytesPerChange: bytes / done };
}

async function main(): Promise<void> {
  // One unmeasured pass over every view first (the compiler's warm-up).
  for (const view of VIEWS) await measure(view);
  const results = new Map<string, Array<{ cpuUsPerChange: number; bytesPerChange: number; ratio: number }>>();
  for (let round = 0; round < ROUNDS; round++) {
    const order = VIEWS.map((_, i) => VIEWS[(i + round) % VIEWS.length] as (typeof VIEWS)[number]);
    const got = new Map<string, { cpuUsPerChange: number; bytesPerChange: number }>();
    for (const view of order) got.set(view.name, await measure(view));
    const base = got.get(VIEWS[0].name)?.cpuUsPerChange ?? Number.NaN;
    for (const [name, r] of got) results.set(name, [...(results.get(name) ?? []), { ...r, ratio: r.cpuUsPerChange / base }]);
    out(`round ${round + 1}: ${[...got].map(([name, r]) => `${name} ${r.cpuUsPerChange.toFixed(1)} µs`).join(", ")}`);
  }

  const rows = VIEWS.map((view) => {
    const rs = results.get(view.name) ?? [];
    return { view: view.name, cpuUsPerChange: median(rs.map((r) => r.cpuUsPerChange)), ratio: median(rs.map((r) => r.ratio)), streamBytesPerChange: median(rs.map((r) => r.bytesPerChange)) };
  });
  out();
  out(`What a stream's view costs per change: ${HELD.toLocaleString("en")} locks held, ${RATE.toLocaleString("en")} changes/s, ${ROUNDS} rounds of ${SECONDS_PER_RUN} s per view (medians)`);
  out();
  out("| the one stream's view | CPU µs per change (store and hub) | / every lock | stream bytes per change |");
  out("|---|---:|---:|---:|");
  for (const r of rows) out(`| ${r.view} | ${r.cpuUsPerChange.toFixed(1)} | ${r.ratio.toFixed(2)} | ${r.streamBytesPerChange.toFixed(0)} |`);
  if (JSON_OUT) process.stdout.write(`${JSON.stringify({ held: HELD, rate: RATE, rounds: ROUNDS, views: rows })}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
