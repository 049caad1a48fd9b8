import "server-only";
import { setReplyDeadline } from "@lockscope/redlock";
import { getConfig } from "./config";
import { isCommandRefused } from "./deployments/cluster";
import { singleton } from "./global";
import { getDeploymentNodes, quorumOf, type LockNode } from "./nodes";

import type { NotificationStatus } from "@/lib/locks/node-state";

export type { NotificationStatus } from "@/lib/locks/node-state";

export interface NodeHealth {
  /** `node-<i>` within its deployment. */
  id: string;
  deployment: string;
  url: string;
  up: boolean;
  latencyMs: number | null;
  notifications: NotificationStatus;
  /** Filled in by the keyspace watcher where it runs. */
  [extra: string]: unknown;
}

export interface Quorum {
  size: number;
  /** Nodes that count towards it: up and taking writes (a read-only replica answers but takes no lock). */
  up: number;
  ok: boolean;
  /** Nodes up but read-only replicas, not counted in `up`; absent when none. */
  readOnly?: number;
}

export interface Health {
  status: "ok" | "degraded" | "down";
  /** With several deployments: their sizes and nodes up added, `ok` when every one has its quorum. */
  quorum: Quorum;
  nodes: NodeHealth[];
  /** Present where the console watches several deployments: each one's status and quorum. */
  deployments?: Array<{ name: string; kind: string; status: Health["status"]; quorum: Quorum }>;
}

/** Extra per-node facts other parts (the watcher) contribute to health, by node id and deployment (ids repeat across deployments). */
type Contributor = (nodeId: string, deployment: string) => Partial<NodeHealth> & { degraded?: boolean };

export function healthContributors(): Map<string, Contributor> {
  return singleton("health-contributors", () => new Map<string, Contributor>());
}

type NodeClient = LockNode["client"];

/**
 * Resolves true once the client is ready, false after `timeoutMs` (a node still connecting counts as down). The
 * handshake replies already received by then are read first (`setReplyDeadline`): a stall of the console's own
 * event loop does not make a node that answered in time look down.
 */
export function whenReady(client: NodeClient, timeoutMs: number): Promise<boolean> {
  if (client.status === "ready") return Promise.resolve(true);
  if (client.status === "end") return Promise.resolve(false);
  return new Promise((resolve) => {
    const onReady = () => {
      cancel();
      resolve(true);
    };
    const cancel = setReplyDeadline(() => {
      client.off("ready", onReady);
      resolve(false);
    }, timeoutMs);
    client.once("ready", onReady);
  });
}

/**
 * The node's PING round trip in ms; null when it does not answer. A cluster answers PING on every node even
 * while it refuses every command on a key (`cluster_state:fail`: slots without a primary, with full coverage
 * required): then it is down to the console, as the node that answered says (`CLUSTER INFO`).
 */
async function probe(node: LockNode, timeoutMs: number): Promise<number | null> {
  const client = node.client;
  if (!(await whenReady(client, timeoutMs))) return null;
  const started = performance.now();
  try {
    await client.ping();
    const latencyMs = Math.round((performance.now() - started) * 100) / 100;
    if (node.cluster && !(await clusterServes(client))) return null;
    return latencyMs;
  } catch {
    return null;
  }
}

/** Whether the cluster node the client asks says the cluster serves; true where CLUSTER INFO is refused (an ACL without it: PING alone tells then). */
async function clusterServes(client: NodeClient): Promise<boolean> {
  try {
    return /^cluster_state:ok\r?$/m.test(String(await client.call("CLUSTER", "INFO")));
  } catch (error) {
    if (isCommandRefused(error)) return true;
    throw error;
  }
}

/**
 * How long `/api/health` waits for a node at most, whatever `LOCKSCOPE_NODE_TIMEOUT_MS` (up to 60 s): a container's
 * or a load balancer's health check gives up after a few seconds (3 s in the Dockerfile), and a console that
 * answered it only after a hung node's timeout would be taken for dead while it serves. A node that has not
 * answered by then is reported not up.
 */
export const HEALTH_NODE_WAIT_MAX_MS = 1_000;

/** What `work` resolves to, or null when it fails or has not settled within `ms` (replies already received count: `setReplyDeadline`). */
function withinDeadline<T>(work: Promise<T>, ms: number): Promise<T | null> {
  return new Promise((resolve) => {
    const cancel = setReplyDeadline(() => resolve(null), ms);
    work.then(
      (value) => {
        cancel();
        resolve(value);
      },
      () => {
        cancel();
        resolve(null);
      },
    );
  });
}

/**
 * Every deployment's nodes, probed now, with what the live view and the replication watch add. `nodeWaitMs`: how
 * long to wait for a node before reporting it not up (default: the node timeout, at most `HEALTH_NODE_WAIT_MAX_MS`).
 */
export async function getHealth(options: { nodeWaitMs?: number } = {}): Promise<Health> {
  const contributors = [...healthContributors().values()];
  const waitMs = options.nodeWaitMs ?? Math.min(getConfig().nodeTimeoutMs, HEALTH_NODE_WAIT_MAX_MS);
  const deployments = await Promise.all(
    getDeploymentNodes().map(async ({ deployment, nodes }) => {
      let degraded = false;
      const results = await Promise.all(
        nodes.map(async (node): Promise<NodeHealth> => {
          // The probe as a whole, its PING too (whose own timeout is the node timeout), within the wait.
          const latencyMs = await withinDeadline(probe(node, waitMs), waitMs);
          let base: NodeHealth = { id: node.id, deployment: node.deployment, url: node.maskedUrl, up: latencyMs !== null, latencyMs, notifications: "unavailable" };
          for (const contribute of contributors) {
            const { degraded: d, ...extra } = contribute(node.id, node.deployment);
            if (d) degraded = true;
            base = { ...base, ...extra };
          }
          return base;
        }),
      );
      const answering = results.filter((n) => n.up).length;
      const readOnly = results.filter((n) => n.up && n.readOnly === true).length;
      const up = answering - readOnly;
      const size = quorumOf(nodes.length);
      const ok = up >= size;
      // Down: fewer than a quorum answer. A quorum lost to read-only replicas is degraded: they answer, and their
      // locks are shown, but no lock can be taken.
      const status: Health["status"] = answering < size ? "down" : !ok || answering !== nodes.length || degraded ? "degraded" : "ok";
      return { name: deployment.name, kind: deployment.kind, status, quorum: { size, up, ok, ...(readOnly > 0 ? { readOnly } : {}) }, nodes: results };
    }),
  );
  const only = deployments.length === 1 ? deployments[0] : undefined;
  if (only) return { status: only.status, quorum: only.quorum, nodes: only.nodes };
  // Several: down only when every deployment is (the console still shows the others); degraded when any is not ok.
  const status: Health["status"] = deployments.every((d) => d.status === "down") ? "down" : deployments.every((d) => d.status === "ok") ? "ok" : "degraded";
  return {
    status,
    quorum: {
      size: deployments.reduce((n, d) => n + d.quorum.size, 0),
      up: deployments.reduce((n, d) => n + d.quorum.up, 0),
      ok: deployments.every((d) => d.quorum.ok),
      ...(deployments.some((d) => d.quorum.readOnly) ? { readOnly: deployments.reduce((n, d) => n + (d.quorum.readOnly ?? 0), 0) } : {}),
    },
    nodes: deployments.flatMap((d) => d.nodes),
    deployments: deployments.map(({ name, kind, status: s, quorum }) => ({ name, kind, status: s, quorum })),
  };
}
