import "server-only";
import { setTimeout as sleep } from "node:timers/promises";
import type { Cluster } from "ioredis";
import { keySlot } from "@lockscope/redlock";
import { servingShards, shardOfSlot, type ClusterShard } from "@/lib/locks/cluster";
import { parseReplicationInfo, readReplicationInfo, type ReplicationReading, type ReplicationState } from "@/lib/locks/replication";
import type { LockReplication } from "@/lib/locks/types";
import { healthContributors } from "../health";
import { getLogger } from "../logger";
import { clusterNodeAt } from "./cluster";
import { sentinelsAnswering } from "./sentinel";
import { getDeploymentNodes, nodesOf, type LockNode } from "../nodes";

/** How often each node's `INFO replication` is read. */
const POLL_MS = 2_000;
/**
 * A reading older than this (three polls missed: the node away, INFO refused, its client not connected) is no
 * longer shown: a replication the console cannot read now is not reported as if it were current.
 */
const STALE_MS = 3 * POLL_MS + 500;
/** How long a lock's page waits for replicas to acknowledge the primary's offset (they do about once a second). */
const ACK_WAIT_MS = 1_200;

/** A node that is a replica now, following `primary` (null where it does not say); `writable`: it takes writes (`replica-read-only no`). */
export interface ReadOnlyNode {
  primary: string | null;
  writable?: true;
}

/**
 * Each node's role and its replicas' acknowledged offsets, read every 2 s and shown in `GET /api/health`
 * (`replication`): where a deployment has replicas, how many bytes of writes each has not copied yet, the
 * window in which a failover would lose locks. `onReadOnly` is told when a node becomes a replica (read-only),
 * and when it is no longer known to be one (a primary again, or its reading stale), for the header and the
 * metrics. Returns a stop function.
 */
export function watchReplication(nodes: readonly LockNode[], onReadOnly: (nodeId: string, readOnly: ReadOnlyNode | null) => void = () => undefined): () => void {
  const states = new Map<string, ReplicationReading & { readAt: number }>();
  /** The node's reading, while fresh. */
  const current = (nodeId: string) => {
    const reading = states.get(nodeId);
    return reading && Date.now() - reading.readAt <= STALE_MS ? reading : undefined;
  };
  /**
   * Nodes whose URL names a node of a Redis Cluster (`cluster_enabled:1`) where the deployment is not a cluster: the
   * console sees only the keys of the slots that node serves, and every other key answers MOVED there.
   */
  const clusterNodes = new Set<string>();
  /**
   * Nodes whose URL names a sentinel (its address given where a Redis instance's was meant): it answers PING and
   * INFO, but holds no key and runs no lock command, so no lock can be seen, taken or released there.
   */
  const sentinelNodes = new Set<string>();
  const clusterChecked = new Set<string>();
  /**
   * Each node's run id (INFO server), read every poll where a deployment has several nodes: two URLs that reach one
   * server (another name or address for it, a proxy in front of it) share it, and that server would count twice
   * towards the quorum.
   */
  const runIds = new Map<string, { runId: string; readAt: number }>();
  const sameServerLogged = new Set<string>();
  const told = new Map<string, string | null>();
  /** Tells `onReadOnly` of a change of what the fresh reading says (`primary`, or "" for a replica that does not say). */
  const tell = (nodeId: string) => {
    const role = current(nodeId)?.role;
    const readOnly = role?.kind === "replica" ? { primary: role.primary, ...(role.readOnly === false ? { writable: true as const } : {}) } : null;
    const key = readOnly === null ? null : `${readOnly.primary ?? ""}${readOnly.writable ? " writable" : ""}`;
    if ((told.get(nodeId) ?? null) === key) return;
    told.set(nodeId, key);
    onReadOnly(nodeId, readOnly);
  };
  const read = () => {
    for (const node of nodes) {
      // (A reading gone stale since the last poll no longer says the node is a replica.)
      tell(node.id);
      // A cluster client would answer from any node: a cluster's replication is read per lock (below).
      if (node.client.status !== "ready" || node.cluster) continue;
      if (!clusterChecked.has(node.id)) {
        clusterChecked.add(node.id);
        node.client.info("cluster").then(
          (info) => {
            if (!/^cluster_enabled:1\r?$/m.test(info)) return;
            clusterNodes.add(node.id);
            getLogger().warn(
              { node: node.id, deployment: node.deployment, url: node.maskedUrl },
              "the node is a Redis Cluster node: only the keys of the slots it serves are watched; describe the deployment as a cluster (REDIS_CLUSTER_URLS, or kind cluster with seeds in the deployments file)",
            );
          },
          // (INFO refused or the node away: asked again once it is ready.)
          () => clusterChecked.delete(node.id),
        );
        node.client.info("server").then(
          (info) => {
            if (!/^redis_mode:sentinel\r?$/m.test(info) || sentinelNodes.has(node.id)) return;
            sentinelNodes.add(node.id);
            getLogger().warn(
              { node: node.id, deployment: node.deployment, url: node.maskedUrl },
              "the node is a sentinel, not a Redis instance: it holds no locks, and is counted down; describe the deployment as Sentinel (REDIS_SENTINELS and REDIS_SENTINEL_MASTER, or kind sentinel with sentinels and master in the deployments file)",
            );
          },
          () => clusterChecked.delete(node.id),
        );
      }
      if (nodes.length > 1) {
        node.client.info("server").then(
          (info) => {
            const runId = /^run_id:([0-9a-f]+)\r?$/m.exec(info)?.[1];
            if (runId) runIds.set(node.id, { runId, readAt: Date.now() });
          },
          () => undefined,
        );
      }
      node.client.info("replication").then(
        (info) => {
          states.set(node.id, { ...readReplicationInfo(info), readAt: Date.now() });
          tell(node.id);
        },
        // INFO refused or the node away: the last reading stays until it is stale (see the health below).
        () => undefined,
      );
    }
  };
  /** The id of the first node before `nodeId` that answers with the same run id now (both read fresh), if any. */
  const sameServerBefore = (nodeId: string): string | undefined => {
    const fresh = (id: string) => {
      const r = runIds.get(id);
      return r && Date.now() - r.readAt <= STALE_MS ? r.runId : undefined;
    };
    const own = fresh(nodeId);
    if (own === undefined) return undefined;
    const at = nodes.findIndex((n) => n.id === nodeId);
    const same = nodes.slice(0, Math.max(0, at)).find((n) => fresh(n.id) === own);
    if (same && !sameServerLogged.has(nodeId)) {
      sameServerLogged.add(nodeId);
      const node = nodes[at];
      getLogger().warn(
        { node: nodeId, deployment: node?.deployment, url: node?.maskedUrl, sameServerAs: same.id },
        "two URLs of the deployment reach the same server (the same run id): it is counted once, the second URL down; give each node of a Redlock set its own server",
      );
    }
    return same?.id;
  };
  read();
  const timer = setInterval(read, POLL_MS);
  timer.unref();
  const deployment = nodes[0]?.deployment ?? "default";
  healthContributors().set(`replication:${deployment}`, (nodeId, of) => {
    if (of !== deployment) return {};
    const reading = current(nodeId);
    const state = reading ? { ...reading.state, readAt: reading.readAt } : undefined;
    const node = nodes.find((n) => n.id === nodeId);
    // A cluster: its shards, each primary with its replicas and how far behind each is.
    const cluster = node?.cluster ? { cluster: { shards: servingShards(node.cluster.topology.shards).map(shardHealth) } } : {};
    // A node that is a replica now (a manual failover demoted it, or its URL names a replica) is read-only: no lock
    // can be taken, extended or force-released there, nor the console's own records written.
    const readOnly = reading?.role.kind === "replica";
    // (It answers, but takes no lock: it counts for no quorum. A replica that takes writes, `replica-read-only no`, does.)
    const takesNoWrites = reading?.role.kind === "replica" && reading.role.readOnly !== false;
    // A node of a Redis Cluster watched as a standalone instance or a Redlock node: its other shards' locks are not seen.
    const clusterNode = clusterNodes.has(nodeId);
    // A sentinel answers PING: it is no lock node all the same, and counts as down (health, readiness, /metrics).
    const sentinelNode = sentinelNodes.has(nodeId);
    // A node that is the same server as one before it in the list counts once, as that one: not up here.
    const sameServerAs = sameServerBefore(nodeId);
    // A Sentinel deployment's sentinels: with none answering, a failover would go unheard (and none can happen).
    const sentinels = sentinelsAnswering(deployment);
    return {
      ...(sentinels ? { sentinels } : {}),
      ...(sentinelNode ? { up: false, latencyMs: null, sentinelNode: true } : {}),
      ...(sameServerAs ? { up: false, latencyMs: null, sameServerAs } : {}),
      ...(node ? { deployment: node.deployment } : {}),
      ...(state ? { replication: state } : {}),
      ...cluster,
      ...(clusterNode ? { clusterNode: true } : {}),
      ...(takesNoWrites ? { readOnly: true } : {}),
      ...(readOnly || clusterNode || sameServerAs || sentinels?.answering === 0 ? { degraded: true } : {}),
    };
  });
  return () => clearInterval(timer);
}

/**
 * The replication of the node that holds `resource`, read now: on a cluster the primary of the key's slot
 * (with the slot), elsewhere the single node of a standalone or Sentinel deployment; with no replica listed
 * where none is connected. Null where there is no replica to speak of (a Redlock set of independent nodes,
 * a standalone instance without replicas) or the primary cannot be read.
 */
export async function lockReplication(resource: string, deployment?: string): Promise<LockReplication | null> {
  const entry = deployment === undefined ? getDeploymentNodes()[0] : nodesOf(deployment);
  if (!entry) return null;
  const nodes = entry.nodes;
  const node = nodes[0];
  if (!node || nodes.length !== 1) return null;
  let slot: number | undefined;
  let primary: LockNode["client"] | undefined = node.client;
  let address: string | undefined;
  if (node.cluster) {
    slot = keySlot(resource);
    const member = shardOfSlot(node.cluster.topology.shards, slot)?.primary;
    address = member?.address;
    primary = address === undefined ? undefined : clusterNodeAt(node.client as Cluster, address);
  }
  // (A cluster's node connections connect on their first command.)
  if (!primary || (!node.cluster && primary.status !== "ready")) return null;
  const reader = primary;
  const read = async () => parseReplicationInfo(await reader.info("replication"));
  let state: ReplicationState;
  try {
    state = await read();
  } catch {
    return null;
  }
  // A cluster's or a Sentinel primary's lock page says so when no replica is connected (the lock is on the
  // primary alone); a standalone instance without replicas has none by design.
  const replicated = node.cluster !== undefined || entry.deployment.kind === "sentinel";
  if (state.role !== "master" || state.offset === null || (state.replicas.length === 0 && !replicated)) return null;
  // WAIT-style: the lock was written before the primary's offset now; a replica has it once it acknowledges
  // that offset. Replicas acknowledge about once a second, so give them that long before saying one has not.
  const target = state.offset;
  const behind = (s: ReplicationState) => s.replicas.filter((r) => r.offset < target);
  const deadline = Date.now() + ACK_WAIT_MS;
  while (behind(state).length > 0 && Date.now() < deadline) {
    await sleep(100);
    try {
      state = await read();
    } catch {
      break;
    }
  }
  return {
    ...(slot === undefined ? {} : { slot }),
    primary: address ?? node.maskedUrl,
    replicas: state.replicas.map((r) => ({ address: r.address, state: r.state, lagBytes: Math.max(0, target - r.offset), hasLock: r.state === "online" && r.offset >= target })),
    readAt: Date.now(),
  };
}

function shardHealth(shard: ClusterShard) {
  const primary = shard.primary;
  return {
    slots: shard.slots,
    primary: primary?.address ?? null,
    // (Offsets are unknown where the topology came from CLUSTER SLOTS: no lag is given rather than none.)
    replicas: shard.replicas.map((r) => ({ address: r.address, health: r.health, lagBytes: primary && Number.isFinite(primary.offset) && Number.isFinite(r.offset) ? Math.max(0, primary.offset - r.offset) : null })),
  };
}
