import type Redis from "ioredis";
import type { TestCluster } from "./redis.ts";

/** Waits until an ioredis client is connected (needed when its offline queue is off). */
export async function ready(client: Redis): Promise<void> {
  if (client.status === "ready") return;
  await new Promise<void>((resolve) => {
    const check = () => {
      if (client.status === "ready") {
        client.off("ready", check);
        resolve();
      }
    };
    client.on("ready", check);
    check();
  });
}

/**
 * Clients that fail at once on a dead node instead of queueing commands to replay later: a command the
 * engine gave up on must not land on a node after the test moved on.
 */
export async function failFastClients(cluster: TestCluster): Promise<Redis[]> {
  const clients = cluster.clients({ enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 20 });
  await Promise.all(clients.map(ready));
  return clients;
}

/** Resolves once `signal` has aborted (at once if it already has). */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}
