"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import type { Lock, WatcherStatus } from "@/lib/locks/types";
import { apiFetch } from "../api-client";
import { INITIAL_LIVE_LOCKS, LIVE_LOCKS_KEY, liveFeed, type LiveLocks } from "./live-feed";

/**
 * Live locks for this tab: the REST snapshot first (`GET /api/locks`), then the event stream keeps the
 * same cache entry current. Any number of components may call it; the tab keeps one stream.
 */
export function useLiveLocks() {
  const client = useQueryClient();
  useEffect(() => liveFeed(client).acquire(), [client]);
  return useQuery({
    queryKey: LIVE_LOCKS_KEY,
    queryFn: async (): Promise<LiveLocks> => {
      const body = await apiFetch<{ serverTime: number; nodes: WatcherStatus[]; locks: Lock[] }>("/api/locks");
      // The stream may have delivered newer data while this request was in flight: keep that.
      const current = client.getQueryData<LiveLocks>(LIVE_LOCKS_KEY);
      if (current && current.version > 0) return current;
      return { ...INITIAL_LIVE_LOCKS, ready: true, locks: body.locks, nodes: body.nodes, offsetMs: body.serverTime - Date.now() };
    },
    staleTime: Infinity,
    refetchOnWindowFocus: false,
    retry: false,
  });
}

/** Re-renders every `ms` (TTL and "held for" text); the bars animate by themselves in between. */
export function useNow(ms = 250): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return now;
}
