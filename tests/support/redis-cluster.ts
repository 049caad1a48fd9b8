// The console's tests start Redis Clusters with the engine package's helper (the same processes and waits).
import { readShards, startRedisCluster, type RedisClusterSet } from "../../lib/redlock/test/support/redis-cluster.ts";
import { setUpConsole } from "./console";
import type { TestCluster } from "./redis";

export { readShards, startRedisCluster, type RedisClusterSet };

/**
 * A console that watches a Redis Cluster (three primaries, a replica each) and no plain nodes, given two of the
 * cluster's addresses as its seeds: `unused` (no nodes) is what `tearDownConsole` takes, `set` the cluster.
 */
export async function setUpConsoleOverCluster(options: {
  consoleNodeTimeoutMs: number;
  clusterNodeTimeoutMs: number;
  /** `cluster-require-full-coverage no`: the cluster serves the slots it still covers when a shard is lost. */
  partialCoverage?: boolean;
}): Promise<{ unused: TestCluster; set: RedisClusterSet }> {
  const unused = await setUpConsole({ nodes: 0, env: { LOCKSCOPE_NODE_TIMEOUT_MS: String(options.consoleNodeTimeoutMs) } });
  const set = await startRedisCluster({ nodeTimeoutMs: options.clusterNodeTimeoutMs });
  if (options.partialCoverage) for (const node of set.nodes) await set.direct(node.port).config("SET", "cluster-require-full-coverage", "no");
  delete process.env.REDIS_URLS;
  process.env.REDIS_CLUSTER_URLS = set.urls.slice(0, 2).join(",");
  return { unused, set };
}
