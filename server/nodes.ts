import "server-only";
import type Redis from "ioredis";
import type { Cluster, RedisOptions } from "ioredis";
import type { Deployment } from "@/lib/deployment-config";
import { getConfig } from "./config";
import { endpointsOf, type LockClient } from "./deployments";
import { ClusterTopology } from "./deployments/cluster";
import { singleton } from "./global";
import { getLogger } from "./logger";
import { onShutdown } from "./shutdown";

/** One independent lock node, as named in `REDIS_URLS` (or embedded), with the console's command connection. */
export interface LockNode {
  /** Stable id used in the API: `node-<index>`, index 0-based in `REDIS_URLS` order. */
  id: string;
  index: number;
  /** A URL other processes may dial (the lab's workers); "" where the deployment has none (Sentinel). */
  url: string;
  /** How the node is shown: its URL with the password masked, or the sentinels and master name. */
  maskedUrl: string;
  /** The name of the deployment the node belongs to (`default` for the one the variables describe). */
  deployment: string;
  /** Opens another connection to the node (TLS, credentials and, for Sentinel, the current primary included; a cluster client for a cluster). */
  connect: (options: RedisOptions) => LockClient;
  /** Commands only; never subscribe on it (watchers `duplicate()` their own). Fails fast when the node is down. */
  client: LockClient;
  /** A cluster's: its topology (primaries, replicas, slots), followed live, and a connection to one of its nodes by address. */
  cluster?: { topology: ClusterTopology; connectTo: (host: string, port: number, options: RedisOptions) => Redis } | null;
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
    // No CLIENT SETINFO on connect: one command fewer the console's ACL user needs (see the README's ACL).
    disableClientInfo: true,
    retryStrategy: (times: number) => Math.min(100 * 2 ** Math.min(times, 5), 2000),
  } as const;
}

export function getNodes(): LockNode[] {
  return singleton("lock-nodes", () => {
    const config = getConfig();
    const deployment: Deployment | undefined =
      config.deployments?.[0] ?? (config.redisUrls ? { name: "default", kind: "redlock", urls: config.redisUrls, tls: null, auth: { username: null, passwordFile: null } } : undefined);
    if (!deployment) {
      throw new Error("No lock nodes configured: start the console with `npm start` (embedded nodes) or set REDIS_URLS.");
    }
    const log = getLogger();
    const nodes = endpointsOf(deployment).map((endpoint, index): LockNode => {
      const client = endpoint.connect({ ...nodeClientOptions(config.nodeTimeoutMs), connectionName: "lockscope:console" });
      const id = `node-${index}`;
      const url = endpoint.label;
      let wasUp: boolean | null = null;
      client.on("ready", () => {
        if (wasUp !== true) log.info({ node: id, deployment: deployment.name, url }, "lock node up");
        wasUp = true;
      });
      client.on("error", (err: Error) => {
        if (wasUp !== false) log.warn({ node: id, deployment: deployment.name, url, err: err.message }, "lock node unreachable");
        wasUp = false;
      });
      const node: LockNode = { id, index, url: endpoint.url ?? "", maskedUrl: endpoint.label, deployment: deployment.name, connect: endpoint.connect, client };
      if (endpoint.connectTo) node.cluster = { topology: new ClusterTopology(client as Cluster), connectTo: endpoint.connectTo };
      return node;
    });
    onShutdown("lock-node-clients", 50, async () => {
      for (const n of nodes) n.cluster?.topology.stop();
      await Promise.allSettled(nodes.map((n) => n.client.quit()));
      for (const n of nodes) n.client.disconnect();
    });
    return nodes;
  });
}

// The engine's quorum rule, so the console never counts a quorum differently from the locks it explains.
export { quorumOf } from "@lockscope/redlock";
