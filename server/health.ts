import "server-only";
import { getConfig } from "./config";
import { singleton } from "./global";
import { getNodes, quorumOf } from "./nodes";

import type { NotificationStatus } from "@/lib/locks/node-state";

export type { NotificationStatus } from "@/lib/locks/node-state";

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

type NodeClient = ReturnType<typeof getNodes>[number]["client"];

/** Resolves true once the client is ready, false after `timeoutMs` (a node still connecting counts as down). */
export function whenReady(client: NodeClient, timeoutMs: number): Promise<boolean> {
  if (client.status === "ready") return Promise.resolve(true);
  if (client.status === "end") return Promise.resolve(false);
  return new Promise((resolve) => {
    const onReady = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      client.off("ready", onReady);
      resolve(false);
    }, timeoutMs);
    client.once("ready", onReady);
  });
}

async function probe(client: NodeClient, timeoutMs: number): Promise<number | null> {
  if (!(await whenReady(client, timeoutMs))) return null;
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
      const latencyMs = await probe(node.client, getConfig().nodeTimeoutMs);
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
