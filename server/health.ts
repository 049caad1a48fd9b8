import "server-only";
import { singleton } from "./global";
import { getNodes, quorumOf } from "./nodes";

export type NotificationStatus = "on" | "enabled-by-console" | "unavailable";

export interface NodeHealth {
  id: string;
  url: string;
  up: boolean;
  latencyMs: number | null;
  notifications: NotificationStatus;
  /** Filled in by the keyspace watcher where it runs. */
  [extra: string]: unknown;
}

export interface Health {
  status: "ok" | "degraded" | "down";
  quorum: { size: number; up: number; ok: boolean };
  nodes: NodeHealth[];
}

/** Extra per-node facts other parts (the watcher) contribute to health, keyed by node id. */
type Contributor = (nodeId: string) => Partial<NodeHealth> & { degraded?: boolean };

export function healthContributors(): Map<string, Contributor> {
  return singleton("health-contributors", () => new Map<string, Contributor>());
}

async function probe(client: ReturnType<typeof getNodes>[number]["client"]): Promise<number | null> {
  if (client.status !== "ready") return null;
  const started = performance.now();
  try {
    await client.ping();
    return Math.round((performance.now() - started) * 100) / 100;
  } catch {
    return null;
  }
}

export async function getHealth(): Promise<Health> {
  const nodes = getNodes();
  const contributors = [...healthContributors().values()];
  let degraded = false;
  const results = await Promise.all(
    nodes.map(async (node): Promise<NodeHealth> => {
      const latencyMs = await probe(node.client);
      let base: NodeHealth = { id: node.id, url: node.maskedUrl, up: latencyMs !== null, latencyMs, notifications: "unavailable" };
      for (const contribute of contributors) {
        const { degraded: d, ...extra } = contribute(node.id);
        if (d) degraded = true;
        base = { ...base, ...extra };
      }
      return base;
    }),
  );
  const up = results.filter((n) => n.up).length;
  const size = quorumOf(nodes.length);
  const ok = up >= size;
  const allUp = up === nodes.length;
  const status = !ok ? "down" : !allUp || degraded ? "degraded" : "ok";
  return { status, quorum: { size, up, ok }, nodes: results };
}
