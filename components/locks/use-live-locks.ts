"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import type { Lock, WatcherStatus } from "@/lib/locks/types";
import { apiFetch } from "../api-client";
import { INITIAL_LIVE_LOCKS, LIVE_LOCKS_KEY, liveFeed, type FeedScope, type LiveLocks } from "./live-feed";

const NO_LOCKS: FeedScope = { locks: "none" };

/**
 * Live locks for this tab: the REST snapshot first (`GET /api/locks`), then the event stream keeps the
 * same cache entry current. Any number of components may call it; the tab keeps one stream, carrying every
 * lock while a user asks for them all (`scope`, the default), else only nodes and counts (`locks` stays empty).
 */
export function useLiveLocks(scope: FeedScope = ALL) {
  const client = useQueryClient();
  const scopeKey = scope.locks === "group" ? `group:${scope.group}` : scope.locks;
  // (The scope is compared by its key: a new object with the same meaning keeps the stream.)
  useEffect(() => liveFeed(client).acquire(scope), [client, scopeKey]);
  return useQuery({
    queryKey: LIVE_LOCKS_KEY,
    queryFn: async (): Promise<LiveLocks> => {
      const all = liveFeed(client).currentScope.locks === "all";
      const body = await apiFetch<{ serverTime: number; nodes: WatcherStatus[]; locks: Lock[] }>(all ? "/api/locks" : "/api/locks?limit=1");
      // The stream may have delivered newer data while this request was in flight: keep that.
      const current = client.getQueryData<LiveLocks>(LIVE_LOCKS_KEY);
      if (current && current.version > 0) return current;
      return { ...INITIAL_LIVE_LOCKS, ready: all, locks: all ? body.locks : [], nodes: body.nodes, offsetMs: body.serverTime - Date.now() };
    },
    staleTime: Infinity,
    refetchOnWindowFocus: false,
    retry: false,
  });
}

const ALL: FeedScope = { locks: "all" };

/** Nodes and live counts only (the header): never holds a lock row. */
export function useLiveNodes() {
  return useLiveLocks(NO_LOCKS);
}

/** Re-renders every `ms`: the TTL bars and texts and the "held for" times move with it. */
export function useNow(ms = 250): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(timer);
  }, [ms]);
  return now;
}
