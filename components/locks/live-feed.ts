"use client";

import type { QueryClient } from "@tanstack/react-query";
import { lockOf, type CompactLock } from "@/lib/locks/compact-lock";
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

/**
 * What a user of the feed needs from the stream: every lock (the locks table of a small fleet, a lock's page),
 * one group's changes (the grouped view's drill-down, which pages the rows from the server), or no lock at all
 * (the header's node pills and counts).
 */
export type FeedScope = { locks: "all" } | { locks: "group"; group: string } | { locks: "none" };

/** Told of each lock change in a group the tab follows (the feed keeps no rows for it). */
export type GroupListener = (
  change: { lock: Lock } | { removed: string; deployment?: string } | { contention: { resource: string; deployment?: string } & LockContention } | { resync: true },
) => void;
/** A lock page's query: the resource, and the deployment its URL names (null: the console resolves it). */
export const lockDetailKey = (resource: string, deployment: string | null = null) => ["lock", resource, deployment] as const;

/** A lock's row in the tab: (deployment, resource), since the same resource may be a lock on several deployments. */
const rowKey = (deployment: string, resource: string) => `${deployment}\u0000${resource}`;

/** Messages are applied to the cache at most this often (the server already coalesces per lock). */
const APPLY_MS = 100;
/** A page change keeps the stream open this long, so navigating between pages does not reconnect. */
const LINGER_MS = 5_000;
/**
 * The console sends the counts every second and the nodes every 5 s: a stream that brought nothing for this long
 * is taken for dead (a frozen console, or a network path that drops everything without closing the connection,
 * which the browser would wait on for ever), closed and opened again, resuming from its last id.
 */
const SILENT_MS = 20_000;
/** The events that show a stream is alive (its heartbeat comments never reach the page). */
const STREAM_EVENTS = ["open", "snapshot", "lock", "lock-removed", "contention", "node", "stats", "end"] as const;

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
  /** Checks, while a stream is open, that it still brings something (see `SILENT_MS`). */
  private watchdog: ReturnType<typeof setInterval> | null = null;
  /** When the open stream last brought an event (epoch ms, the browser's clock). */
  private heardAt = 0;
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
  /**
   * Locks changed since the last apply, whose page may be open in this tab (see `apply`), each with when the stream
   * told it (the console's clock): its nodes' TTLs were read then, and the page counts them down from it.
   */
  private touched = new Map<string, { lock: Lock; serverTime: number }>();
  /**
   * The deployment of the locks seen: a console of one deployment names it on locks but not on removals and
   * contention figures, which then belong to it.
   */
  private soleDeployment = "default";
  /** The scope each user asked for; the stream carries the widest (see `wanted`). */
  private readonly scopes = new Map<number, FeedScope>();
  private nextUser = 1;
  private scope: FeedScope = { locks: "none" };
  private readonly groupListeners = new Set<GroupListener>();

  constructor(private readonly client: QueryClient) {}

  /** The scope the stream carries now. */
  get currentScope(): FeedScope {
    return this.scope;
  }

  /** Follows the changes of the group the tab is scoped to (see `acquire`). */
  listen(listener: GroupListener): () => void {
    this.groupListeners.add(listener);
    return () => this.groupListeners.delete(listener);
  }

  /**
   * Every lock when any user needs them all; else the group a user follows (one at a time: the last asked);
   * else none. A change of scope opens a new stream (its snapshot replaces what the tab held).
   */
  private wanted(): FeedScope {
    let wanted: FeedScope = { locks: "none" };
    for (const scope of this.scopes.values()) {
      if (scope.locks === "all") return scope;
      if (scope.locks === "group") wanted = scope;
    }
    return wanted;
  }

  private rescope(): void {
    const next = this.wanted();
    const same = next.locks === this.scope.locks && (next.locks !== "group" || (this.scope.locks === "group" && next.group === this.scope.group));
    if (same) return;
    this.scope = next;
    this.lastEventId = null;
    this.ready = false;
    this.locks.clear();
    this.snapshot = null;
    if (this.source) {
      this.source.close();
      this.source = null;
      this.connect();
    }
    this.schedule(true);
  }

  acquire(scope: FeedScope = { locks: "all" }): () => void {
    const user = this.nextUser++;
    this.scopes.set(user, scope);
    this.users += 1;
    this.rescope();
    if (this.closeTimer) {
      clearTimeout(this.closeTimer);
      this.closeTimer = null;
    }
    if (!this.source && !this.retryTimer) this.connect();
    return () => {
      this.scopes.delete(user);
      this.users -= 1;
      // (With nobody left the stream closes soon anyway: keep its scope for a quick return.)
      if (this.users > 0) this.rescope();
      if (this.users === 0) this.closeTimer = setTimeout(() => this.shutdown(), LINGER_MS);
    };
  }

  private shutdown(): void {
    this.closeTimer = null;
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = null;
    this.source?.close();
    this.source = null;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
  }

  private connect(): void {
    this.retryTimer = null;
    const params = new URLSearchParams();
    if (this.scope.locks === "none") params.set("locks", "none");
    // A group's rows are paged from the server: its stream brings their changes, not a snapshot of them.
    if (this.scope.locks === "group") {
      params.set("group", this.scope.group);
      params.set("locks", "changes");
    }
    // Locks come compact: about half the bytes for the console to write to every tab, and for this one to read.
    if (this.scope.locks !== "none") params.set("encoding", "compact");
    if (this.lastEventId) params.set("lastEventId", this.lastEventId);
    const url = `/api/locks/stream${params.size > 0 ? `?${params.toString()}` : ""}`;
    const source = new EventSource(url, { withCredentials: true });
    this.source = source;
    this.heardAt = Date.now();
    for (const type of STREAM_EVENTS) source.addEventListener(type, this.heard);
    // (A stream still connecting counts too: a request the console never answers is waited on for ever as well.)
    this.watchdog ??= setInterval(() => {
      if (this.source && this.source.readyState !== EventSource.CLOSED && Date.now() - this.heardAt > SILENT_MS) this.reconnectLater();
    }, SILENT_MS / 4);
    source.addEventListener("open", () => {
      this.retries = 0;
      if (this.ready) this.setStatus("live");
    });
    source.addEventListener("snapshot", (e) => this.onSnapshot(e));
    source.addEventListener("lock", (e) => {
      const lock = lockOf(JSON.parse(e.data as string) as CompactLock | Lock);
      this.track(e);
      const key = rowKey(lock.deployment, lock.resource);
      const told = { lock, serverTime: Date.now() + this.offsetMs };
      if (this.tell({ lock })) {
        // A lock's page follows its group's stream: its lock is patched as with every lock (see `apply`).
        if (this.detailShown(lock)) {
          this.touched.set(key, told);
          this.schedule();
        }
        return;
      }
      this.soleDeployment = lock.deployment;
      (this.snapshot ?? this.locks).set(key, lock);
      this.touched.set(key, told);
      this.schedule();
    });
    source.addEventListener("lock-removed", (e) => {
      const removal = JSON.parse(e.data as string) as { resource: string; deployment?: string };
      this.track(e);
      if (this.tell({ removed: removal.resource, ...(removal.deployment !== undefined ? { deployment: removal.deployment } : {}) })) return;
      (this.snapshot ?? this.locks).delete(rowKey(removal.deployment ?? this.soleDeployment, removal.resource));
      this.schedule();
    });
    source.addEventListener("contention", (e) => {
      const figures = JSON.parse(e.data as string) as { resource: string; deployment?: string } & LockContention;
      this.track(e);
      if (this.tell({ contention: figures })) return;
      const map = this.snapshot ?? this.locks;
      const key = rowKey(figures.deployment ?? this.soleDeployment, figures.resource);
      const lock = map.get(key);
      if (lock) {
        const { resource: _resource, deployment: _deployment, ...contention } = figures;
        map.set(key, { ...lock, contention });
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
    source.addEventListener("end", (e) => {
      // The server ends streams at shutdown and after their lifetime (resume after a pause), and when the session
      // that opened it was signed out or expired: the header asks who is signed in again. Where reading is open
      // the stream comes back as anyone's, and nothing else would tell the page the operator is no longer signed in.
      if (endReason(e) === "signed-out") void this.client.invalidateQueries({ queryKey: ["session"] });
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

  private readonly heard = (): void => {
    this.heardAt = Date.now();
  };

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
            // The session ended: the header asks who is signed in again.
            void this.client.invalidateQueries({ queryKey: ["session"] });
            return;
          }
          this.connect();
        })
        .catch(() => this.connect());
    }, delay);
  }

  /** Whether a page of this lock (its URL naming the deployment or not) is open in this tab. */
  private detailShown(lock: Lock): boolean {
    return this.client.getQueryData(lockDetailKey(lock.resource)) !== undefined || this.client.getQueryData(lockDetailKey(lock.resource, lock.deployment)) !== undefined;
  }

  /** A group's change goes to its listeners, not into the tab's rows; true when it did. */
  private tell(change: Parameters<GroupListener>[0]): boolean {
    if (this.scope.locks !== "group") return false;
    for (const listener of this.groupListeners) listener(change);
    return true;
  }

  private track(e: MessageEvent): void {
    if (e.lastEventId) this.lastEventId = e.lastEventId;
  }

  private onSnapshot(e: MessageEvent): void {
    const body = JSON.parse(e.data as string) as { serverTime: number; part: number; parts: number; nodes?: WatcherStatus[]; locks: Array<CompactLock | Lock> };
    if (body.part === 0) this.snapshot = new Map();
    if (body.nodes) this.nodes = body.nodes;
    this.offsetMs = body.serverTime - Date.now();
    const target = this.snapshot ?? new Map<string, Lock>();
    // A group's rows are paged from the server, not kept here.
    if (this.scope.locks === "all") {
      for (const sent of body.locks) {
        const lock = lockOf(sent);
        this.soleDeployment = lock.deployment;
        target.set(rowKey(lock.deployment, lock.resource), lock);
      }
    }
    if (body.part === body.parts - 1) {
      this.track(e);
      // A new stream of the group: whatever changed before it is not in it (a lock's page open on it reads its lock again).
      if (this.tell({ resync: true })) void this.client.invalidateQueries({ queryKey: ["lock"] });
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
    // A lock page open in this tab (its URL naming the deployment or not): patch its live fields now, refetch its
    // timeline soon. A page showing the same resource on another deployment is left alone. The page's server time
    // moves with its nodes' TTLs: kept from its last read, every node's TTL read short by the time since.
    for (const { lock, serverTime } of this.touched.values()) {
      for (const key of [lockDetailKey(lock.resource), lockDetailKey(lock.resource, lock.deployment)]) {
        const shown = this.client.getQueryData<Lock>(key);
        if (shown === undefined || shown.deployment !== lock.deployment) continue;
        this.client.setQueryData(key, (old: object | undefined) => (old ? { ...old, ...lock, serverTime } : old));
        void this.client.invalidateQueries({ queryKey: key });
      }
    }
    this.touched.clear();
  }
}

/** The reason an `end` event gives (`shutdown`, `lifetime`, `signed-out`), or null. */
function endReason(e: MessageEvent): string | null {
  try {
    const reason = (JSON.parse(e.data as string) as { reason?: unknown }).reason;
    return typeof reason === "string" ? reason : null;
  } catch {
    return null;
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
