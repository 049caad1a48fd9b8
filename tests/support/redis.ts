import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis, { type RedisOptions } from "ioredis";
import { startRedisNodes, type RedisNode } from "@/lib/redis-node";
import { flushPorts, type TestCluster as PackageTestCluster } from "../../lib/redlock/test/support/redis.ts";

/**
 * The engine package's test cluster (the same helpers: stop, kill, pause/SIGSTOP, restart), on the
 * console's redis-server process helper, with its nodes exposed. Call `await cluster.close()` in `afterAll`.
 */
export interface TestCluster extends PackageTestCluster {
  nodes: RedisNode[];
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
    ports: nodes.map((n) => n.port),
    client,
    clients: (options) => nodes.map((_, i) => client(i, options)),
    kill: (i) => node(i).kill(),
    pause: (i) => node(i).pause(),
    resume: (i) => node(i).resume(),
    paused: (i) => node(i).isPaused,
    restart: (i) => node(i).restart(),
    flushAll: () => flushPorts(nodes.filter((n) => n.running && !n.isPaused).map((n) => n.port)),
    close: async () => {
      for (const c of opened) c.disconnect();
      await Promise.all(nodes.map((n) => n.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Holds `count` locks `<prefix>/<j>` on one node, the value `token(j)` and a 10-minute TTL, in pipelines of 5,000. */
export async function holdLocks(client: Redis, prefix: string, count: number, token = (j: number) => `token-${j}`): Promise<void> {
  for (let i = 0; i < count; i += 5_000) {
    const pipeline = client.pipeline();
    for (let j = i; j < Math.min(count, i + 5_000); j++) pipeline.set(`${prefix}/${j}`, token(j), "PX", 600_000);
    await pipeline.exec();
  }
}
