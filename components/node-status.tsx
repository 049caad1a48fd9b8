"use client";

import { useQuery } from "@tanstack/react-query";
import type { WatcherStatus } from "@/lib/locks/types";
import { apiFetch } from "./api-client";
import { useLiveNodes } from "./locks/use-live-locks";

export interface HealthNode {
  id: string;
  /** The node's deployment (node ids repeat across deployments where the console watches several). */
  deployment?: string;
  url: string;
  up: boolean;
  latencyMs: number | null;
  notifications: "on" | "enabled-by-console" | "unavailable";
}

export interface HealthResponse {
  status: "ok" | "degraded" | "down";
  quorum: { size: number; up: number; ok: boolean };
  nodes: HealthNode[];
}

export function useHealth(options: { enabled?: boolean } = {}) {
  return useQuery({
    queryKey: ["health"],
    queryFn: () => apiFetch<HealthResponse>("/api/health"),
    refetchInterval: 5_000,
    enabled: options.enabled ?? true,
  });
}

/**
 * How a node whose readings do not count is shown: still reading its locks (start-up, a reconnect: not down),
 * not answering, or down.
 */
export function notUpText(node: Pick<WatcherStatus, "reading" | "answering">): string {
  return node.reading ? "reading its locks" : node.answering ? "down" : "not answering";
}

interface PillNode {
  id: string;
  up: boolean;
  /** How it is not up (`notUpText`). */
  notUp: string;
  /** Not up because its locks are still being read: shown amber, not red. */
  reading?: boolean;
  notifications: HealthNode["notifications"];
  /** Up, but some lock patterns are refused to the console (its ACL user): shown amber. */
  refused?: boolean;
  title: string;
}

function Pills({ nodes, summary, status }: { nodes: PillNode[]; summary: string; status: string }) {
  return (
    <div className="node-status" role="status" aria-label="Lock nodes">
      {nodes.map((node) => (
        <span key={node.id} className="node-pill" title={node.title} aria-label={`${node.id} ${node.up ? "up" : node.notUp}`}>
          <span className={`dot ${node.up ? (node.notifications === "unavailable" || node.refused ? "degraded" : "up") : node.reading ? "degraded" : "down"}`} aria-hidden />
          {node.id}
        </span>
      ))}
      <span className={`status-text ${status}`}>{summary}</span>
    </div>
  );
}

/**
 * The nodes' status in the header: one pill per node, the quorum, and the overall status as text. It takes
 * node state from the tab's live stream, the same source as the page below it, so the two never disagree
 * (a node kill shows in both at once); /api/health is only the fallback where the stream is not open to
 * this visitor (signed out).
 */
export function NodeStatus() {
  const live = useLiveNodes();
  const stream = live.data && live.data.status !== "signed-out" && live.data.nodes.length > 0 ? live.data : null;
  const { data, isError } = useHealth({ enabled: stream === null });
  if (stream) {
    const total = stream.nodes.length;
    const up = stream.stats?.nodesUp ?? stream.nodes.filter((n) => n.up).length;
    const quorumOk = up >= Math.floor(total / 2) + 1;
    const degraded = stream.nodes.some((n) => !n.up || n.notifications === "unavailable" || (n.refusedPatterns?.length ?? 0) > 0);
    // A node whose locks are still being read (start-up, a reconnect) is not down: it is not counted yet.
    const reading = stream.nodes.filter((n) => !n.up && n.reading).length;
    const status = reading > 0 ? "degraded" : !quorumOk ? "down" : degraded ? "degraded" : "ok";
    const nodes = stream.nodes.map((n): PillNode => {
      const notUp = notUpText(n);
      const refused = n.refusedPatterns?.length ? ` · refuses the console the lock patterns ${[...new Set(n.refusedPatterns.map((r) => r.glob))].join(", ")}` : "";
      return { id: n.nodeId, up: n.up, notUp, reading: n.reading !== undefined, notifications: n.notifications, refused: refused !== "", title: `${n.nodeId} · ${n.up ? `${n.latencyMs ?? "?"} ms round trip` : notUp} · notifications ${n.notifications}${refused}` };
    });
    const summary = reading > 0 ? `${up}/${total} up · reading the locks of ${reading} ${reading === 1 ? "node" : "nodes"}` : `${up}/${total} up · quorum ${quorumOk ? "ok" : "lost"} · ${status}`;
    return <Pills nodes={nodes} status={status} summary={summary} />;
  }
  if (isError) {
    return (
      <div className="node-status" role="status" aria-label="Lock nodes">
        <span className="status-text down">Console unreachable</span>
      </div>
    );
  }
  if (!data) {
    return (
      <div className="node-status" role="status" aria-label="Lock nodes">
        <span className="muted">Checking nodes…</span>
      </div>
    );
  }
  const nodes = data.nodes.map(
    (n): PillNode => ({ id: n.id, up: n.up, notUp: "down", notifications: n.notifications, title: `${n.url} · ${n.up ? `${n.latencyMs ?? "?"} ms` : "down"} · notifications ${n.notifications}` }),
  );
  return <Pills nodes={nodes} status={data.status} summary={`${data.quorum.up}/${data.nodes.length} up · quorum ${data.quorum.ok ? "ok" : "lost"} · ${data.status}`} />;
}
