import "server-only";
import Redis from "ioredis";
import { maskRedisUrl } from "@/lib/config";
import { getConfig } from "./config";
import { singleton } from "./global";
import { getLogger } from "./logger";
import { onShutdown } from "./shutdown";

/** One independent lock node, as named in `REDIS_URLS` (or embedded), with the console's command connection. */
export interface LockNode {
  /** Stable id used in the API: `node-<index>`, index 0-based in `REDIS_URLS` order. */
  id: string;
  index: number;
  url: string;
  maskedUrl: string;
  /** Commands only; never subscribe on it (watchers `duplicate()` their own). Fails fast when the node is down. */
  client: Redis;
}

/** Connection options for every console connection to a lock node: fail fast, never queue while down. */
export function nodeClientOptions(timeoutMs: number) {
  return {
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: Math.max(1000, timeoutMs * 4),
    commandTimeout: Math.max(timeoutMs, 250),
    enableAutoPipelining: true,
    retryStrategy: (times: number) => Math.min(100 * 2 ** Math.min(times, 5), 2000),
  } as const;
}

export function getNodes(): LockNode[] {
  return singleton("lock-nodes", () => {
    const config = getConfig();
    const urls = config.redisUrls;
    if (!urls) {
      throw new Error("No lock nodes configured: start the console with `npm start` (embedded nodes) or set REDIS_URLS.");
    }
    const log = getLogger();
    const nodes = urls.map((url, index): LockNode => {
      const client = new Redis(url, { ...nodeClientOptions(config.nodeTimeoutMs), connectionName: "lockscope:console" });
      const id = `node-${index}`;
      let wasUp: boolean | null = null;
      client.on("ready", () => {
        if (wasUp !== true) log.info({ node: id, url: maskRedisUrl(url) }, "lock node up");
        wasUp = true;
      });
      client.on("error", (err: Error) => {
        if (wasUp !== false) log.warn({ node: id, url: maskRedisUrl(url), err: err.message }, "lock node unreachable");
        wasUp = false;
      });
      return { id, index, url, maskedUrl: maskRedisUrl(url), client };
    });
    onShutdown("lock-node-clients", 50, async () => {
      await Promise.allSettled(nodes.map((n) => n.client.quit()));
      for (const n of nodes) n.client.disconnect();
    });
    return nodes;
  });
}

// The engine's quorum rule, so the console never counts a quorum differently from the locks it explains.
export { quorumOf } from "@lockscope/redlock";
