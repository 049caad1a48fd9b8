import "server-only";
import { parseReplicationInfo, type ReplicationState } from "@/lib/locks/replication";
import { healthContributors } from "../health";
import type { LockNode } from "../nodes";

/** How often each node's `INFO replication` is read. */
const POLL_MS = 2_000;

/**
 * Each node's role and its replicas' acknowledged offsets, read every 2 s and shown in `GET /api/health`
 * (`replication`): where a deployment has replicas, how many bytes of writes each has not copied yet, the
 * window in which a failover would lose locks. Returns a stop function.
 */
export function watchReplication(nodes: readonly LockNode[]): () => void {
  const states = new Map<string, ReplicationState>();
  const read = () => {
    for (const node of nodes) {
      if (node.client.status !== "ready") continue;
      node.client.info("replication").then(
        (info) => states.set(node.id, parseReplicationInfo(info)),
        // INFO refused or the node away: the last reading stays until the next one.
        () => undefined,
      );
    }
  };
  read();
  const timer = setInterval(read, POLL_MS);
  timer.unref();
  healthContributors().set("replication", (nodeId) => {
    const state = states.get(nodeId);
    const node = nodes.find((n) => n.id === nodeId);
    return { ...(node ? { deployment: node.deployment } : {}), ...(state ? { replication: state } : {}) };
  });
  return () => clearInterval(timer);
}
