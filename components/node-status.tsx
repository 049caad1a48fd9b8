"use client";

import { useQuery } from "@tanstack/react-query";
import { apiFetch } from "./api-client";

export interface HealthNode {
  id: string;
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

export function useHealth() {
  return useQuery({
    queryKey: ["health"],
    queryFn: () => apiFetch<HealthResponse>("/api/health"),
    refetchInterval: 5_000,
  });
}

/** The nodes' status in the header: one pill per node, the quorum, and the overall status as text. */
export function NodeStatus() {
  const { data, isError } = useHealth();
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
  return (
    <div className="node-status" role="status" aria-label="Lock nodes">
      {data.nodes.map((node) => (
        <span
          key={node.id}
          className="node-pill"
          title={`${node.url} · ${node.up ? `${node.latencyMs ?? "?"} ms` : "down"} · notifications ${node.notifications}`}
          aria-label={`${node.id} ${node.up ? "up" : "down"}`}
        >
          <span className={`dot ${node.up ? (node.notifications === "unavailable" ? "degraded" : "up") : "down"}`} aria-hidden />
          {node.id}
        </span>
      ))}
      <span className={`status-text ${data.status}`}>
        {data.quorum.up}/{data.nodes.length} up · quorum {data.quorum.ok ? "ok" : "lost"} · {data.status}
      </span>
    </div>
  );
}
