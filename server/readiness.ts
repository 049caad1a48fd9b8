import "server-only";
import { ApiError } from "./errors";
import { getHealth } from "./health";
import { waitUntilReconciled } from "./live";
import { isShuttingDown } from "./shutdown";

export interface Readiness {
  ready: true;
  quorum: { size: number; up: number; ok: boolean };
  reconciled: true;
}

/**
 * Ready to serve: a quorum of lock nodes answers and every node's watcher has read the locks once
 * (subscribed and reconciled with a SCAN), so the first page a load balancer sends here is not an
 * empty or half-filled table. Throws a 503 saying which part is missing; also 503 while shutting down.
 */
export async function getReadiness(): Promise<Readiness> {
  if (isShuttingDown()) throw new ApiError("unavailable", "The console is shutting down.", { shuttingDown: true }, { "Retry-After": "5" });
  const [health, reconciled] = await Promise.all([getHealth(), waitUntilReconciled(0)]);
  const missing: string[] = [];
  if (!health.quorum.ok) missing.push(`only ${health.quorum.up} of ${health.nodes.length} lock nodes answer and a quorum needs ${health.quorum.size}`);
  if (!reconciled) missing.push("the keyspace watchers have not finished reading the locks on every node yet");
  if (missing.length > 0) {
    throw new ApiError("unavailable", `Not ready: ${missing.join("; ")}.`, { quorum: health.quorum, reconciled }, { "Retry-After": "1" });
  }
  return { ready: true, quorum: health.quorum, reconciled: true };
}
