import "server-only";
import type { HistoryPage, LockHold } from "@/lib/history/types";
import type { TimelineType } from "@/lib/locks/types";

export type { HistoryPage, LockHold, StoredLockEvent } from "@/lib/history/types";

/** One lifecycle event of one lock, as the live view saw it (a timeline entry with the value it concerns). */
export interface LockHistoryEvent {
  /** Epoch ms on the console's clock. */
  at: number;
  resource: string;
  /** The deployment whose live view saw it (`default` for the one the environment variables describe). */
  deployment: string;
  type: TimelineType;
  node?: string | null;
  /** The lock value the event concerns (the holder's token); null when none is known. */
  token?: string | null;
  detail?: string | null;
  /**
   * Set on a correction: the lock's end recorded as this type (its value's, within seconds of `at`) turned out to
   * be `type` (a force release, a loss, learnt a moment later). The stored end is changed, not added to.
   */
  relabels?: TimelineType;
}

/** Who held what at an instant: of one resource, of one deployment, or both. */
export interface HeldAtOptions {
  /** Epoch ms. */
  at: number;
  resource?: string;
  deployment?: string;
  limit: number;
  before?: string;
}

export interface HistoryFilters {
  /** Exact resource. */
  resource?: string;
  /** Exact deployment name. */
  deployment?: string;
  /** Epoch ms, inclusive. */
  from?: number;
  /** Epoch ms, exclusive. */
  to?: number;
}

/** Where lock history is kept. One kind per file: `postgres.ts`. */
export interface HistoryStore {
  insert(events: readonly LockHistoryEvent[]): Promise<void>;
  /** Events newest first, keyset-paged by `before` (a previous page's `next`). */
  events(options: { limit: number; before?: string; filters: HistoryFilters }): Promise<HistoryPage>;
  /** Holds that covered the instant `at`, newest acquisition first (keyset-paged by `before`, a hold's acquisition ms). */
  heldAt(options: HeldAtOptions): Promise<{ holds: LockHold[]; next: string | null }>;
  /** Deletes events and ended holds older than `cutoff` (epoch ms), `batch` rows at a time; returns rows deleted. */
  prune(cutoff: number, batch?: number): Promise<number>;
  /**
   * Holds still open of one deployment acquired before `acquiredBefore` (epoch ms), by resource: those after
   * `after` (a previous page's last resource), at most `limit` resources' worth (every open hold of each).
   */
  openHolds(options: { deployment: string; acquiredBefore: number; after: string | null; limit: number }): Promise<OpenHold[]>;
  /** Ends these open holds at `at` (epoch ms) as `unseen`: their end happened while no console saw it. Returns how many. */
  endUnseen(deployment: string, holds: readonly OpenHold[], at: number): Promise<number>;
  /** Notes that a console watches these deployments at `at` (epoch ms). */
  markWatched(deployments: readonly string[], at: number): Promise<void>;
  /**
   * Ends as `unwatched`, at the time each deployment was last watched, the open holds of every deployment no console
   * has watched since `watchedBefore` (epoch ms); a deployment with open holds never noted counts as watched `now`.
   * Returns how many holds were ended.
   */
  endUnwatched(watchedBefore: number, now: number): Promise<number>;
}

export interface OpenHold {
  resource: string;
  token: string;
}
