/**
 * Profiling aid for the engine's hot path: `node --import tsx --cpu-prof bench/engine-profile.ts [seconds]`.
 * Runs uncontended acquire+release cycles (concurrency 50, random keys) on three nodes it starts
 * (`NODES=1` for one; `DIST=1` runs the package's build, as `npm run bench:engine` does, after
 * `npm run build -w @lockscope/redlock`).
 */
import Redis from "ioredis";
import type { Redlock as RedlockT } from "@lockscope/redlock";
import { startRedisNodes } from "@/lib/redis-node";
import { scratchDir } from "./support";

async function main(): Promise<void> {
  const seconds = Number(process.argv[2] ?? 3);
  const { Redlock } = (await import(process.env.DIST ? "../lib/redlock/dist/index.js" : "@lockscope/redlock")) as { Redlock: typeof RedlockT };
  const nodes = await startRedisNodes(Number(process.env.NODES ?? 3), { dir: scratchDir() });
  const clients = nodes.map((n) => new Redis(n.port, "127.0.0.1", { enableAutoPipelining: true }));
  try {
    const engine = new Redlock(clients, { retryCount: 0 });
    let cycles = 0;
    let n = 0;
    const end = performance.now() + seconds * 1000;
    const cpu = process.cpuUsage();
    await Promise.all(
      Array.from({ length: 50 }, async () => {
        while (performance.now() < end) {
          const lock = await engine.acquire([`p:${n++}`], 10_000);
          await engine.release(lock);
          cycles += 1;
        }
      }),
    );
    const used = process.cpuUsage(cpu);
    console.log(`${Math.round(cycles / seconds)} cycles/s, ${((used.user + used.system) / cycles).toFixed(1)} us CPU/cycle`);
    await engine.quit();
  } finally {
    for (const c of clients) c.disconnect();
    await Promise.all(nodes.map((node) => node.stop()));
  }
}
void main();
