// Run by compat.test.ts in a process of its own, with `--expose-gc`: acquires and releases `count` locks through one
// compat Redlock, each with per-call settings of its own (a retry delay computed per call, say), and prints how much
// the heap grew, in bytes, once the work is done and collected.
import Redis from "ioredis";
import Redlock from "../../compat.ts";

const [port, count] = process.argv.slice(2).map(Number) as [number, number];
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error("run with --expose-gc");
const client = new Redis(port, "127.0.0.1");
const redlock = new Redlock([client]);
const run = async (from: number, to: number) => {
  for (let i = from; i < to; i++) {
    const lock = await redlock.acquire(["compat-settings-heap"], 10_000, { retryDelay: 100 + i });
    await lock.release();
  }
};
// A warm-up first, so what is measured is what each further call adds.
await run(0, 50);
gc();
const before = process.memoryUsage().heapUsed;
await run(50, 50 + count);
gc();
const after = process.memoryUsage().heapUsed;
process.stdout.write(JSON.stringify({ grewBytes: after - before }));
await redlock.quit();
