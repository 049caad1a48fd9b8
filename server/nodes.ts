import "server-only";
import type Redis from "ioredis";
import type { Cluster, Command, RedisOptions } from "ioredis";
import { setReplyDeadline } from "@lockscope/redlock";
import type { Deployment } from "@/lib/deployment-config";
import { getConfig } from "./config";
import { endpointsOf, type LockClient } from "./deployments";
import { ClusterTopology } from "./deployments/cluster";
import { singleton } from "./global";
import { getLogger } from "./logger";
import { onShutdown } from "./shutdown";

/** One independent lock node, as named in `REDIS_URLS` (or embedded), with the console's command connection. */
export interface LockNode {
  /** Stable id used in the API: `node-<index>`, index 0-based in `REDIS_URLS` order (within its deployment). */
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

/** Connections of each client seen dropping since `connectionDrops` first looked at it. */
const drops = new WeakMap<LockClient, { count: number }>();

/**
 * How many times a connection of `client` dropped since it was first asked about (a cluster client: any of its node
 * connections). A command out across a drop may have run and had its answer lost, and ioredis sends what a dropped
 * connection left unanswered again once it reconnects (a cluster client, to whichever node serves the slot then):
 * the answer that comes is the second run's, not the first's.
 */
export function connectionDrops(client: LockClient): number {
  let seen = drops.get(client);
  if (!seen) {
    const counter = { count: 0 };
    seen = counter;
    drops.set(client, counter);
    eachConnection(client, (connection) => connection.on("close", () => (counter.count += 1)));
  }
  return seen.count;
}

/** Calls `take` with each connection of `client`: itself, or a cluster client's node connections, now and as they come. */
function eachConnection(client: LockClient, take: (connection: Redis) => void): void {
  if ((client as Cluster).isCluster === true) {
    const cluster = client as Cluster;
    for (const connection of cluster.nodes("all")) take(connection);
    cluster.on("+node", (connection: Redis) => take(connection));
  } else {
    take(client as Redis);
  }
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

/** Commands a timer of `timeCommands` covers (a command sent again after a reconnect or a redirection keeps its first). */
const timedCommands = new WeakSet<Command>();

/**
 * Takes over the `commandTimeout` of `client`'s connections (a cluster client's: each node's, as it connects):
 * ioredis' own timer fires before replies already in the socket are read, so a stall of this process's event
 * loop past the timeout (a GC pause, a long synchronous task) made a node that answered in time look silent (a
 * force release refused with 503, an audit write lost). Here a command still unanswered once the timeout passed
 * and the replies received by then were read (`setReplyDeadline`) fails as with ioredis' own: "Command timed out".
 */
export function timeCommands(client: LockClient): void {
  const take = (connection: Redis) => {
    const timeoutMs = connection.options.commandTimeout;
    if (typeof timeoutMs !== "number") return;
    connection.options.commandTimeout = undefined;
    const send = connection.sendCommand.bind(connection);
    connection.sendCommand = (command, stream) => {
      if (!timedCommands.has(command)) {
        timedCommands.add(command);
        const cancel = setReplyDeadline(() => {
          if (!command.isResolved) command.reject(new Error("Command timed out"));
        }, timeoutMs);
        command.promise.then(cancel, cancel);
      }
      return send(command, stream);
    };
  };
  eachConnection(client, take);
}

/** One deployment the console watches, with its nodes (ids `node-<i>` within it). */
export interface DeploymentNodes {
  deployment: Deployment;
  nodes: LockNode[];
}

/**
 * Every deployment the console watches, in the configuration's order, each with its node connections (opened
 * once per process). Node ids are `node-<index>` within a deployment: `node-0` names one node of each.
 */
export function getDeploymentNodes(): readonly DeploymentNodes[] {
  return singleton("lock-deployments", () => {
    const config = getConfig();
    const deployments: Deployment[] =
      config.deployments ?? (config.redisUrls ? [{ name: "default", kind: "redlock", urls: config.redisUrls, tls: null, auth: { username: null, passwordFile: null } }] : []);
    if (deployments.length === 0) {
      throw new Error("No lock nodes configured: start the console with `npm start` (embedded nodes) or set REDIS_URLS.");
    }
    const log = getLogger();
    const all = deployments.map((deployment): DeploymentNodes => ({ deployment, nodes: openNodes(deployment, config.nodeTimeoutMs, log) }));
    onShutdown("lock-node-clients", 50, async () => {
      const nodes = all.flatMap((d) => d.nodes);
      for (const n of nodes) n.cluster?.topology.stop();
      await Promise.allSettled(nodes.map((n) => n.client.quit()));
      for (const n of nodes) n.client.disconnect();
    });
    return all;
  });
}

/** The names of the deployments the console watches, in the configuration's order. */
export function watchedDeploymentNames(): string[] {
  return getDeploymentNodes().map((d) => d.deployment.name);
}

/**
 * The nodes of the first deployment: where the console keeps what it shares with other consoles (the audit
 * stream, session revocations, the console registry and its leases, the wrong-token counts). With one
 * deployment, simply the lock nodes. (What concerns one deployment's locks, such as first sightings of foreign
 * locks and revocations, stays on that deployment's nodes.)
 */
export function getNodes(): LockNode[] {
  return (getDeploymentNodes()[0] as DeploymentNodes).nodes;
}

/** The named deployment's nodes; undefined for a name the console does not watch. */
export function nodesOf(name: string): DeploymentNodes | undefined {
  return getDeploymentNodes().find((d) => d.deployment.name === name);
}

function openNodes(deployment: Deployment, nodeTimeoutMs: number, log: ReturnType<typeof getLogger>): LockNode[] {
  return endpointsOf(deployment).map((endpoint, index): LockNode => {
    const client = endpoint.connect({ ...nodeClientOptions(nodeTimeoutMs), connectionName: "lockscope:console" });
    timeCommands(client);
    const id = `node-${index}`;
    const url = endpoint.label;
    let wasUp: boolean | null = null;
    client.on("ready", () => {
      if (wasUp !== true) log.info({ node: id, deployment: deployment.name, url }, "lock node up");
      wasUp = true;
    });
    client.on("error", (err: Error & { lastNodeError?: unknown }) => {
      // A cluster client says only "Failed to refresh slots cache."; the seeds' own answer says why (a node
      // without cluster support, a wrong password, a refused connection).
      const why = err.lastNodeError instanceof Error ? `${err.message.replace(/\.$/, "")}: ${err.lastNodeError.message}` : err.message;
      if (wasUp !== false) log.warn({ node: id, deployment: deployment.name, url, err: why }, "lock node unreachable");
      wasUp = false;
    });
    const node: LockNode = { id, index, url: endpoint.url ?? "", maskedUrl: endpoint.label, deployment: deployment.name, connect: endpoint.connect, client };
    if (endpoint.connectTo) {
      const topology = new ClusterTopology(client as Cluster, (reason) =>
        log.warn({ node: id, deployment: deployment.name, err: reason }, "CLUSTER SHARDS refused (a server before Redis 7.0, or the ACL): the topology is read with CLUSTER SLOTS, without the members' health and replication offsets"),
      );
      node.cluster = { topology, connectTo: endpoint.connectTo };
    }
    return node;
  });
}

// The engine's quorum rule, so the console never counts a quorum differently from the locks it explains.
export { quorumOf } from "@lockscope/redlock";
