/**
 * What the live view's lock table costs the garbage collector (not a test): `npm run bench:live:heap [-- --held
 * 1000000] [-- --rounds 9]`.
 *
 * In this one process, the console's own lock store (no Redis, no stream): `--held` plain-token locks held on three
 * nodes, each node's reading made and decoded as a watcher decodes it (each node's value its own string, as each
 * node's reply is). Then the heap used per lock after two full collections, and the time of each of `--rounds` more
 * full collections (`gc()`, the whole heap marked and swept at once, the collector's helper threads included): the
 * median and the least. Compare builds by running it on each, alternately, on a quiet machine.
 */
import { EventEmitter } from "node:events";
import { decodeReading } from "../lib/locks/formats";
import type { LiveEventMap } from "../server/live/events";
import { LockStore, type NodeSample } from "../server/live/store";
import { median, numberArg } from "./support";

const argv = process.argv.slice(2);
const HELD = numberArg(argv, "--held", 1_000_000, 1);
const ROUNDS = numberArg(argv, "--rounds", 9, 1);
const NODES = ["node-0", "node-1", "node-2"];

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("Expected to run with `--expose-gc` (use `npm run bench:live:heap`)");

const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>());
const now = Date.now();
for (let i = 0; i < HELD; i++) {
  const key = `lock:orders/${i}`;
  const samples: NodeSample[] = NODES.map((_, node) => {
    // (A string of its own per node, as each node's reply is.)
    const value = [`tok-${i.toString(36)}`, "abcdefghijklmnop"].join("-");
    const reading = decodeReading({ key, at: now, raw: { type: "string", pttlMs: 3_600_000, size: value.length, value, extras: {} } }, { now });
    if (reading === null) throw new Error(`Expected a reading of ${key}`);
    return { node, reading, value: reading.fingerprint, expiry: reading.expiresAt, cause: null };
  });
  store.apply(key, samples, now);
}
gc();
gc();
const used = process.memoryUsage().heapUsed;
const times: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  const started = performance.now();
  gc();
  times.push(performance.now() - started);
}
const held = store.counts().held;
if (held !== HELD) throw new Error(`Expected ${HELD} locks held, the store counts ${held}`);
process.stdout.write(
  `${HELD} plain-token locks on three nodes: heap ${Math.round(used / HELD)} B per lock; a full collection ${median(times).toFixed(0)} ms (median of ${ROUNDS}), ${Math.min(...times).toFixed(0)} ms at least\n`,
);
