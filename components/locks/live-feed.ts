"use client";

import type { QueryClient } from "@tanstack/react-query";
import type { Lock, LockContention, LiveStats, WatcherStatus } from "@/lib/locks/types";

export type FeedStatus = "connecting" | "live" | "reconnecting" | "signed-out";

/** What the locks table reads from the query cache under `LIVE_LOCKS_KEY`. */
export interface LiveLocks {
  status: FeedStatus;
  /** Set once the first snapshot arrived. */
  ready: boolean;
  locks: Lock[];
  nodes: WatcherStatus[];
  stats: LiveStats | null;
  /** serverTime − Date.now(): add to the browser's clock to count TTLs on the server's. */
  offsetMs: number;
  version: number;
}

export const LIVE_LOCKS_KEY = ["live-locks"] as const;
export const lockDetailKey = (resource: string) => ["lock", resource] as const;

/** Messages are applied to the cache at most this often (the server already coalesces per lock). */
const APPLY_MS = 100;
/** A page change keeps the stream open this long, so navigating between pages does not reconnect. */
const LINGER_MS = 5_000;

/**
 * The tab's one EventSource on /api/locks/stream (browsers allow six connections per origin), shared by
 * every component that needs live locks and written into the react-query cache. Opened when the first
 * user mounts and closed a little after the last one leaves.
 */
class LiveFeed {
  private source: EventSource | null = null;
  private users = 0;
  private closeTimer: ReturnType<typeof setTimeout> | null = null;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private applyTimer: ReturnType<typeof setTimeout> | null = null;
  private retries = 0;
  private lastEventId: string | null = null;
  private readonly locks = new Map<string, Lock>();
  private snapshot: Map<string, Lock> | null = null;
  private status: FeedStatus = "connecting";
  private ready = false;
  private nodes: WatcherStatus[] = [];
  private stats: LiveStats | null = null;
  private offsetMs = 0;
  private version = 0;
  private touched = new Set<string>();

  constructor(private readonly client: QueryClient) {}

  acquire(): () => void {
    this.users += 1;
    if (this.closeTimer) {
      clearTimeout(this.closeTimer);
      this.closeTimer = null;
    }
    if (!this.source && !this.retryTimer) this.connect();
    return () => {
      this.users -= 1;
      if (this.users === 0) this.closeTimer = setTimeout(() => this.shutdown(), LINGER_MS);
    };
  }

  private shutdown(): void {
    this.closeTimer = null;
    this.source?.close();
    this.source = null;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  private connect(): void {
    this.retryTimer = null;
    const url = this.lastEventId ? `/api/locks/stream?lastEventId=${encodeURIComponent(this.lastEventId)}` : "/api/locks/stream";
    const source = new EventSource(url, { withCredentials: true });
    this.source = source;
    source.addEventListener("open", () => {
      this.retries = 0;
      if (this.ready) this.setStatus("live");
    });
    source.addEventListener("snapshot", (e) => this.onSnapshot(e));
    source.addEventListener("lock", (e) => {
      const lock = JSON.parse(e.data as string) as Lock;
      this.track(e);
      (this.snapshot ?? this.locks).set(lock.resource, lock);
      this.touched.add(lock.resource);
      this.schedule();
    });
    source.addEventListener("lock-removed", (e) => {
      const { resource } = JSON.parse(e.data as string) as { resource: string };
      this.track(e);
      (this.snapshot ?? this.locks).delete(resource);
      this.schedule();
    });
    source.addEventListener("contention", (e) => {
      const figures = JSON.parse(e.data as string) as { resource: string } & LockContention;
      this.track(e);
      const map = this.snapshot ?? this.locks;
      const lock = map.get(figures.resource);
      if (lock) {
        const { resource: _resource, ...contention } = figures;
        map.set(figures.resource, { ...lock, contention });
        this.schedule();
      }
    });
    source.addEventListener("node", (e) => {
      const body = JSON.parse(e.data as string) as { serverTime: number; nodes: WatcherStatus[] };
      this.nodes = body.nodes;
      this.offsetMs = body.serverTime - Date.now();
      this.schedule();
    });
    source.addEventListener("stats", (e) => {
      this.stats = JSON.parse(e.data as string) as LiveStats;
      this.offsetMs = this.stats.serverTime - Date.now();
      this.schedule();
    });
    source.addEventListener("end", () => {
      // The server ends streams at shutdown and after their lifetime: resume after a pause.
      this.reconnectLater();
    });
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CONNECTING) {
        // The browser retries by itself, sending Last-Event-ID.
        this.setStatus("reconnecting");
        return;
      }
      this.reconnectLater();
    });
  }

  private reconnectLater(): void {
    this.source?.close();
    this.source = null;
    if (this.retryTimer || this.users === 0) return;
    this.retries += 1;
    const delay = Math.min(1_000 * 2 ** Math.min(this.retries - 1, 4), 15_000);
    this.setStatus("reconnecting");
    this.retryTimer = setTimeout(() => {
      // A stream refused with 401 looks like any other failure to EventSource: ask the API why.
      void fetch("/api/locks?limit=1", { credentials: "same-origin" })
        .then((res) => {
          if (res.status === 401) {
            this.retryTimer = null;
            this.setStatus("signed-out");
            return;
          }
          this.connect();
        })
        .catch(() => this.connect());
    }, delay);
  }

  private track(e: MessageEvent): void {
    if (e.lastEventId) this.lastEventId = e.lastEventId;
  }

  private onSnapshot(e: MessageEvent): void {
    const body = JSON.parse(e.data as string) as { serverTime: number; part: number; parts: number; nodes?: WatcherStatus[]; locks: Lock[] };
    if (body.part === 0) this.snapshot = new Map();
    if (body.nodes) this.nodes = body.nodes;
    this.offsetMs = body.serverTime - Date.now();
    const target = this.snapshot ?? new Map<string, Lock>();
    for (const lock of body.locks) target.set(lock.resource, lock);
    if (body.part === body.parts - 1) {
      this.track(e);
      this.locks.clear();
      for (const [k, v] of target) this.locks.set(k, v);
      this.snapshot = null;
      this.ready = true;
      this.status = "live";
      this.schedule(true);
    }
  }

  private setStatus(status: FeedStatus): void {
    if (this.status === status) return;
    this.status = status;
    this.schedule(true);
  }

  private schedule(now = false): void {
    if (this.snapshot && !now) return;
    if (this.source && this.source.readyState === EventSource.OPEN && this.ready && this.status !== "live") this.status = "live";
    if (now) {
      if (this.applyTimer) clearTimeout(this.applyTimer);
      this.applyTimer = null;
      this.apply();
      return;
    }
    this.applyTimer ??= setTimeout(() => {
      this.applyTimer = null;
      this.apply();
    }, APPLY_MS);
  }

  private apply(): void {
    this.version += 1;
    const data: LiveLocks = {
      status: this.status,
      ready: this.ready,
      locks: [...this.locks.values()],
      nodes: this.nodes,
      stats: this.stats,
      offsetMs: this.offsetMs,
      version: this.version,
    };
    this.client.setQueryData(LIVE_LOCKS_KEY, data);
    // A lock page open in this tab: patch its live fields now, refetch its timeline soon.
    for (const resource of this.touched) {
      const key = lockDetailKey(resource);
      if (this.client.getQueryData(key) === undefined) continue;
      const lock = this.locks.get(resource);
      if (lock) this.client.setQueryData(key, (old: object | undefined) => (old ? { ...old, ...lock } : old));
      void this.client.invalidateQueries({ queryKey: key });
    }
    this.touched.clear();
  }
}

const feeds = new WeakMap<QueryClient, LiveFeed>();

/** The tab's feed for this query client (one per tab). */
export function liveFeed(client: QueryClient): LiveFeed {
  let feed = feeds.get(client);
  if (!feed) {
    feed = new LiveFeed(client);
    feeds.set(client, feed);
  }
  return feed;
}

export const INITIAL_LIVE_LOCKS: LiveLocks = { status: "connecting", ready: false, locks: [], nodes: [], stats: null, offsetMs: 0, version: 0 };
