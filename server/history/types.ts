import "server-only";
import type { TimelineType } from "@/lib/locks/types";

/** One lifecycle event of one lock, as the live view saw it (a timeline entry with the value it concerns). */
export interface LockHistoryEvent {
  /** Epoch ms on the console's clock. */
  at: number;
  resource: string;
  type: TimelineType;
  node?: string | null;
  /** The lock value the event concerns (the holder's token); null when none is known. */
  token?: string | null;
  detail?: string | null;
}

/** A stored event, as the history routes return it. */
export interface StoredLockEvent {
  /** `<epoch ms>-<row id>`: pass as `before` for older events. */
  id: string;
  at: number;
  resource: string;
  type: string;
  node: string | null;
  token: string | null;
  /** Holder decoded from an engine-made value ("label @ host:pid"), null for foreign values. */
  holder: string | null;
  fence: string | null;
  detail: string | null;
}

export interface HistoryPage {
  events: StoredLockEvent[];
  /** Pass as `before` for the next (older) page; null on the last page. */
  next: string | null;
}

/** One hold: a lock value from its acquisition to its end (null while held, or when its end was not seen). */
export interface LockHold {
  /** `<acquired epoch ms>-<row id>`: pass as `before` for older holds. */
  id: string;
  resource: string;
  token: string;
  holder: string | null;
  fence: string | null;
  acquiredAt: number;
  endedAt: number | null;
  /** released, expired, evicted, force-released; null while open. */
  endType: string | null;
}

export interface HistoryFilters {
  /** Exact resource. */
  resource?: string;
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
  heldAt(options: { at: number; resource?: string; limit: number; before?: string }): Promise<{ holds: LockHold[]; next: string | null }>;
  /** Deletes events and ended holds older than `cutoff` (epoch ms), `batch` rows at a time; returns rows deleted. */
  prune(cutoff: number, batch?: number): Promise<number>;
}
