// The console's tests start Redis Clusters with the engine package's helper (the same processes and waits).
export { startRedisCluster, type RedisClusterSet } from "../../lib/redlock/test/support/redis-cluster.ts";
