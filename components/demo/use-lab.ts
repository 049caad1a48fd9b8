"use client";

import { useQuery } from "@tanstack/react-query";
import type { LabInfo, RunRecord } from "@/lib/lab/types";
import { apiFetch } from "../api-client";

export const RUNS_KEY = ["lab", "runs"] as const;
export const runKey = (id: string) => ["lab", "run", id] as const;

/**
 * Every run the lab keeps (the API's default: its last 50), newest first, so runs are compared side by side without
 * the older ones missing; and what a run would run on. Polled faster while one of them runs.
 */
export function useRuns() {
  return useQuery({
    queryKey: RUNS_KEY,
    queryFn: () => apiFetch<{ runs: RunRecord[]; lab: LabInfo }>("/api/demo/runs"),
    refetchInterval: (query) => (query.state.data?.runs.some((r) => r.status === "running") ? 1500 : 10_000),
  });
}

/** One run with its chart series, polled twice a second until it ends. */
export function useRun(id: string | null) {
  return useQuery({
    queryKey: runKey(id ?? "none"),
    queryFn: () => apiFetch<RunRecord>(`/api/demo/runs/${encodeURIComponent(id!)}`),
    enabled: id !== null,
    refetchInterval: (query) => (query.state.data && query.state.data.status !== "running" ? false : 500),
    staleTime: 0,
  });
}
