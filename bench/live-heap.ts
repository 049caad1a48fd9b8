/**
 * What the live view's lock table costs the garbage collector (not a test): `npm run bench:live:heap [-- --held
 * 1000000] [-- --rounds 9]`.
 *
 * In this one process, the console's own lock store (no Redis, no stream): `--held` plain-token locks found held on
 * three nodes as the console starts, each node's reading made and decoded as a watcher decodes it (each node's value
 * its own string, as each node's reply is). Then the heap used per lock after two full collections, and the time of
 * each of `--rounds` more full collections (`gc()`, the whole heap marked and swept at once, the collector's helper
 * threads included): the median and the least. Measured in two stores, one after the other: one that keeps every lock
 * whole (an object each), and the console's own, which keeps cold the locks it finds once it holds `COLD_ABOVE`
 * (each as soon as it is merged). The time each took to find them (their readings applied) is reported. Compare
 * builds by running it on each, alternately, on a quiet machine.
 *
 * First, what a lock churned through a watching console costs while it is held and once it ended and is kept for its
 * page (10,000 such locks, as many as are kept, in a store of their own): every lock a churn takes and releases is kept so.
 */
import { EventEmitter } from "node:events";
import { decodeReading } from "../lib/locks/formats";
import type { LiveEventMap } from "../server/live/events";
import { COLD_ABOVE, LINGER_MS, LockStore, RECENT_CAP, type NodeSample } from "../server/live/store";
import { median, numberArg } from "./support";

const argv = process.argv.slice(2);
const HELD = numberArg(argv, "--held", 1_000_000, 1);
const ROUNDS = numberArg(argv, "--rounds", 9, 1);
/** As many as the console keeps for their pages once ended. */
const CHURNED = RECENT_CAP;
const NODES = ["node-0", "node-1", "node-2"];

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("Expected to run with `--expose-gc` (use `npm run bench:live:heap`)");
const fullGc: () => void = gc;

const now = Date.now();
/** Each node's reading of a plain-token lock, a string of its own per node (as each node's reply is). */
const heldOnEvery = (key: string, i: number, pttlMs: number): NodeSample[] =>
  NODES.map((_, node) => {
    const value = [`tok-${i.toString(36)}`, "abcdefghijklmnop"].join("-");
    const reading = decodeReading({ key, at: now, raw: { type: "string", pttlMs, size: value.length, value, extras: {} } }, { now });
    if (reading === null) throw new Error(`Expected a reading of ${key}`);
    return { node, reading, value: reading.fingerprint, expiry: reading.expiresAt, cause: null };
  });

/** Heap per lock of `CHURNED` locks taken while the console watches, then once released and kept for their pages. */
function churnedLocks(): { held: number; kept: number } {
  const churned = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>());
  NODES.forEach((_, node) => churned.setNodeUp(node, true, now));
  churned.watching = true;
  fullGc();
  fullGc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < CHURNED; i++) churned.apply(`lock:churn/${i}`, heldOnEvery(`lock:churn/${i}`, i, 30_000), now + 1);
  churned.drain(now + 2, 0, Number.MAX_SAFE_INTEGER);
  fullGc();
  fullGc();
  const held = process.memoryUsage().heapUsed;
  const gone = NODES.map((_, node): NodeSample => ({ node, value: null, expiry: Number.NaN, cause: "del" }));
  for (let i = 0; i < CHURNED; i++) churned.apply(`lock:churn/${i}`, gone, now + 200);
  churned.tick(now + 200 + LINGER_MS);
  churned.drain(now + 201 + LINGER_MS, 0, Number.MAX_SAFE_INTEGER);
  const sizes = churned.sizes();
  if (sizes.recent !== CHURNED || sizes.live !== 0) throw new Error(`Expected ${CHURNED} ended locks kept, the store has ${JSON.stringify(sizes)}`);
  fullGc();
  fullGc();
  const kept = process.memoryUsage().heapUsed;
  return { held: Math.round((held - before) / CHURNED), kept: Math.round((kept - before) / CHURNED) };
}
const churnedCost = churnedLocks();

/**
 * A store that finds `HELD` locks held while the console starts, and how long that took this thread (the readings
 * made beforehand). `coldAbove`: Infinity keeps every lock whole; the console's own keeps them cold as it finds them.
 */
function found(coldAbove: number): { store: LockStore; applyMs: number } {
  const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>(), coldAbove);
  let applyMs = 0;
  for (let from = 0; from < HELD; from += 10_000) {
    // The readings of 10,000 locks at a time, made before they are timed (as a watcher's are before it applies them).
    const batch = Array.from({ length: Math.min(10_000, HELD - from) }, (_, j) => heldOnEvery(`lock:orders/${from + j}`, from + j, 3_600_000));
    const started = performance.now();
    for (let j = 0; j < batch.length; j++) store.apply(`lock:orders/${from + j}`, batch[j] as NodeSample[], now, true);
    applyMs += performance.now() - started;
  }
  NODES.forEach((_, node) => store.setNodeUp(node, true, now));
  store.watching = true;
  store.drain(now, 0, Number.MAX_SAFE_INTEGER);
  return { store, applyMs };
}

/** Heap per lock of `store` after two full collections, and the times of `ROUNDS` more (with how long it took to find them). */
function collections({ store, applyMs }: { store: LockStore; applyMs: number }): { perLock: number; times: number[]; applyMs: number } {
  fullGc();
  fullGc();
  const used = process.memoryUsage().heapUsed;
  const times: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const started = performance.now();
    fullGc();
    times.push(performance.now() - started);
  }
  const held = store.counts().held;
  if (held !== HELD) throw new Error(`Expected ${HELD} locks held, the store counts ${held}`);
  return { perLock: Math.round(used / HELD), times, applyMs };
}
const line = (what: string, { perLock, times, applyMs }: ReturnType<typeof collections>) =>
  `${HELD} plain-token locks on three nodes, ${what}: found in ${applyMs.toFixed(0)} ms; heap ${perLock} B per lock; a full collection ${median(times).toFixed(0)} ms (median of ${ROUNDS}), ${Math.min(...times).toFixed(0)} ms at least\n`;

// One store at a time: the first is let go before the second finds its locks.
const whole = collections(found(Number.POSITIVE_INFINITY));
const second = found(COLD_ABOVE);
const cold = collections(second);
if (HELD >= COLD_ABOVE && second.store.sizes().cold < HELD - COLD_ABOVE) throw new Error(`Expected the locks found past ${COLD_ABOVE} kept cold, the store has ${JSON.stringify(second.store.sizes())}`);
process.stdout.write(
  `${CHURNED} locks taken while the console watches: heap ${churnedCost.held} B per lock held, ${churnedCost.kept} B per lock once ended and kept for its page\n` +
    line("each kept whole", whole) +
    (HELD < COLD_ABOVE ? `(fewer than ${COLD_ABOVE} locks: none kept cold)\n` : line(`kept cold as found (${second.store.sizes().cold} of them)`, cold)),
);
