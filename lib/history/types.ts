/**
 * Lock history's wire shapes: what the history routes answer and the browser reads. They live in lib/ so client
 * components can import them without pulling in server code.
 */

/** A stored event, as the history routes return it. */
export interface StoredLockEvent {
  /** `<epoch ms>-<row id>`: pass as `before` for older events. */
  id: string;
  at: number;
  resource: string;
  /** The deployment the lock is on (`default` for the one the environment variables describe). */
  deployment: string;
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
  deployment: string;
  token: string;
  holder: string | null;
  fence: string | null;
  acquiredAt: number;
  endedAt: number | null;
  /** released, expired, evicted, force-released, lost (`holders`: a holder set that changed; `unseen`, `unwatched`); null while open. */
  endType: string | null;
}

/**
 * `GET /api/locks/{resource}/history` and `GET /api/history` (events). `recording`: whether history is kept;
 * `deployments`: the deployments the console watches (where there are several, each row's `deployment` tells
 * them apart).
 */
export type EventsAnswer = HistoryPage & { recording: boolean; deployments: string[] };

/** The same routes with `?at=`: the holds that covered that instant. */
export type HoldsAnswer = { at: number; holds: LockHold[]; next: string | null; recording: boolean; deployments: string[] };
