"use client";

import { useQuery } from "@tanstack/react-query";
import { nodePills, notUpText, pillLabel, type PillNode } from "@/lib/locks/node-pills";
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
  quorum: { size: number; up: number; ok: boolean; readOnly?: number };
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

export { notUpText };

function Pills({ nodes, summary, status }: { nodes: PillNode[]; summary: string; status: string }) {
  return (
    <div className="node-status" role="status" aria-label="Lock nodes">
      {nodes.map((node) => (
        <span key={node.name} className="node-pill" role="img" title={node.title} aria-label={node.label}>
          <span className={`dot ${node.up ? (node.notifications === "unavailable" || node.partial ? "degraded" : "up") : node.reading ? "degraded" : "down"}`} aria-hidden />
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
 * (a node kill shows in both at once); /api/health is the fallback where the stream is not open to this
 * visitor (signed out) and while it reconnects: what it told last may be stale by then (the console stopped,
 * restarting or out of reach), and is shown only until /api/health answers or fails.
 */
export function NodeStatus() {
  const live = useLiveNodes();
  const told = live.data && live.data.status !== "signed-out" && live.data.nodes.length > 0 ? live.data : null;
  const stream = told && told.status !== "reconnecting" ? told : null;
  const { data, isError } = useHealth({ enabled: stream === null });
  if (stream) {
    const { nodes, status, summary } = nodePills(stream.nodes, stream.stats?.nodesUp);
    return <Pills nodes={nodes} status={status} summary={summary} />;
  }
  if (isError) {
    return (
      <div className="node-status" role="status" aria-label="Lock nodes">
        <span className="status-text down">Console unreachable</span>
      </div>
    );
  }
  if (!data && told) {
    const { nodes, status, summary } = nodePills(told.nodes, told.stats?.nodesUp);
    return <Pills nodes={nodes} status={status} summary={summary} />;
  }
  if (!data) {
    return (
      <div className="node-status" role="status" aria-label="Lock nodes">
        <span className="muted">Checking nodes…</span>
      </div>
    );
  }
  const nodes = data.nodes.map((n): PillNode => {
    const name = data.nodes.some((other) => other.deployment !== n.deployment) ? `${n.deployment ?? ""} ${n.id}` : n.id;
    const label = pillLabel(name, n.up, "down", n.notifications);
    return { id: n.id, name, up: n.up, notUp: "down", notifications: n.notifications, title: `${name === n.id ? "" : `${n.deployment ?? ""} `}${n.url} · ${n.up ? `${n.latencyMs ?? "?"} ms` : "down"} · notifications ${n.notifications}`, label };
  });
  return <Pills nodes={nodes} status={data.status} summary={`${data.quorum.up + (data.quorum.readOnly ?? 0)}/${data.nodes.length} up${data.quorum.readOnly ? `, ${data.quorum.readOnly} read-only` : ""} · quorum ${data.quorum.ok ? "ok" : "lost"} · ${data.status}`} />;
}
