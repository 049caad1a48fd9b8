import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis, { type RedisOptions } from "ioredis";
import { startRedisNodes, type RedisNode } from "@/lib/redis-node";

/**
 * Real redis-server processes for a test file, on free ports (never 6379), with helpers to stop, kill,
 * pause (SIGSTOP) and restart a single node. Call `await cluster.close()` in `afterAll`.
 */
export interface TestCluster {
  nodes: RedisNode[];
  urls: string[];
  /** A fresh ioredis client per node (closed by `close()`). */
  clients(options?: RedisOptions): Redis[];
  client(index: number, options?: RedisOptions): Redis;
  kill(index: number): Promise<void>;
  pause(index: number): void;
  resume(index: number): void;
  restart(index: number): Promise<void>;
  flushAll(): Promise<void>;
  close(): Promise<void>;
}

export async function startCluster(count: number, extraArgs: readonly string[] = []): Promise<TestCluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-test-"));
  const nodes = await startRedisNodes(count, { dir, extraArgs });
  const opened: Redis[] = [];
  const node = (i: number): RedisNode => {
    const n = nodes[i];
    if (!n) throw new RangeError(`no node ${i} in a cluster of ${nodes.length}`);
    return n;
  };
  const client = (i: number, options: RedisOptions = {}) => {
    const c = new Redis(node(i).port, "127.0.0.1", { lazyConnect: false, maxRetriesPerRequest: 1, ...options });
    c.on("error", () => {
      // Nodes are killed on purpose in these tests; connection errors surface through commands.
    });
    opened.push(c);
    return c;
  };
  return {
    nodes,
    urls: nodes.map((n) => n.url),
    client,
    clients: (options) => nodes.map((_, i) => client(i, options)),
    kill: (i) => node(i).kill(),
    pause: (i) => node(i).pause(),
    resume: (i) => node(i).resume(),
    restart: (i) => node(i).restart(),
    flushAll: async () => {
      await Promise.all(
        nodes.filter((n) => n.running && !n.isPaused).map(async (n) => {
          const c = new Redis(n.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
          try {
            await c.flushall();
          } finally {
            c.disconnect();
          }
        }),
      );
    },
    close: async () => {
      for (const c of opened) c.disconnect();
      await Promise.all(nodes.map((n) => n.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
