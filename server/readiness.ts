import "server-only";
import { ApiError } from "./errors";
import { getHealth, type Quorum } from "./health";
import { getWatcherStatus, waitUntilReconciled } from "./live";
import { isShuttingDown } from "./shutdown";

export interface Readiness {
  ready: true;
  /** Informative: a lost quorum is the incident a console is for, not a reason to take it out of service. */
  quorum: Quorum;
  reconciled: true;
  /** Where the console watches several deployments: each one's status and quorum (as in `/api/health`). */
  deployments?: NonNullable<Awaited<ReturnType<typeof getHealth>>["deployments"]>;
}

/**
 * Ready means this console can serve: its runtime is up, every node's watcher has either read the locks
 * once (subscribed and reconciled with a SCAN) or given up on its node for the moment, and at least one node
 * has been read, so the first page a load balancer sends here is not an empty table. A quorum is not
 * needed: with 2 of 3 nodes down the console is exactly what an operator needs, and a load balancer must
 * keep it (`/api/health` says how the nodes are). Throws a 503 saying what is missing; also while shutting down.
 */
export async function getReadiness(): Promise<Readiness> {
  if (isShuttingDown()) throw new ApiError("unavailable", "The console is shutting down.", { shuttingDown: true }, { "Retry-After": "5" });
  const [health, reconciled] = await Promise.all([getHealth(), waitUntilReconciled(0)]);
  const read = getWatcherStatus().filter((w) => w.up).length;
  const missing: string[] = [];
  if (!reconciled) missing.push("the keyspace watchers have not finished reading the locks on the nodes that answer yet");
  else if (read === 0) missing.push(`${health.nodes.length === 1 ? "the lock node does not answer" : `none of the ${health.nodes.length} lock nodes answers`}, so this console has nothing to show`);
  if (missing.length > 0) {
    throw new ApiError("unavailable", `Not ready: ${missing.join("; ")}.`, { quorum: health.quorum, reconciled, nodesRead: read }, { "Retry-After": "1" });
  }
  return { ready: true, quorum: health.quorum, reconciled: true, ...(health.deployments ? { deployments: health.deployments } : {}) };
}
