import type { ContentionSource, FormatHolder, FormatName, LockScope, LockWarning } from "./formats/types";

/** The shapes the live view serves (see docs/api.md), shared by the server and the browser. */
export type { ContentionSource, FormatHolder, FormatName, LockScope, LockWarning } from "./formats/types";

export const LOCK_STATES = ["held", "partial", "elapsed", "released", "expired", "force-released", "lost"] as const;
export type LockState = (typeof LOCK_STATES)[number];
/** States of a lock some node still holds. */
export type LiveState = "held" | "partial" | "elapsed";
/**
 * How a lock ended. `lost`: a node lost its keys while their TTL ran (it restarted without them, or a failover
 * promoted a replica that never had them): nobody released it, and its holder may still think it holds it.
 */
export type EndedState = "released" | "expired" | "force-released" | "lost";

/**
 * The longest lock key whose page opens (its detail, history and force release are addressed by the key in
 * the URL). A longer key is still listed, without a link, and said so.
 */
export const MAX_ADDRESSED_KEY_CHARS = 1_024;
/**
 * A key's length in characters (Unicode code points), as the routes addressed by a key count it against
 * `MAX_ADDRESSED_KEY_CHARS`: an emoji is one character, though two UTF-16 units.
 */
export function keyChars(resource: string): number {
  if (resource.length <= MAX_ADDRESSED_KEY_CHARS) return resource.length;
  let chars = 0;
  for (const _ of resource) chars++;
  return chars;
}

/** Why a key longer than `MAX_ADDRESSED_KEY_CHARS` cannot be opened, as a viewer or a script is told. */
export const KEY_TOO_LONG_TO_OPEN = `a lock key longer than ${MAX_ADDRESSED_KEY_CHARS.toLocaleString("en-US")} characters is listed but cannot be opened, released or looked up here`;

/** The order the tables sort states in: the live ones needing a look first, then the ends, the unplanned first. */
export const STATE_ORDER: Readonly<Record<LockState, number>> = { partial: 0, elapsed: 1, held: 2, lost: 3, "force-released": 4, expired: 5, released: 6 };

export const isLive = (state: LockState): state is LiveState => state === "held" || state === "partial" || state === "elapsed";

export interface LockHolder {
  label?: string;
  host?: string;
  pid?: number;
}

export interface LockNodeView {
  id: string;
  /** False when the console's watcher has no connection to the node: its value is unknown. */
  up: boolean;
  /** The value this node holds, null when it holds nothing (or is down). */
  token: string | null;
  /** Time to live left on this node when the lock was served, null when absent or without a TTL. */
  pttlMs: number | null;
}

export interface LockContention {
  /** Failed acquisition attempts over the last 60 s (engine telemetry); null where they cannot be seen (a foreign client's failed SET NX leaves no trace). */
  attemptsPerMin: number | null;
  /** Engine: distinct clients that tried within the last few seconds and do not hold the lock; queue: live entries of the library's queue; null: not visible. */
  waiters: number | null;
  /** Where the figures come from; null: this format's contention cannot be seen. */
  source: ContentionSource | null;
  /** Attempts per 5 s over the last minute, oldest first; present when there were any. */
  recent?: number[];
}

export interface Lock {
  resource: string;
  /** The name of the deployment the lock is on (`default` for the one the environment variables describe). */
  deployment: string;
  state: LockState;
  /** The layout recognised (docs/formats.md). */
  format: FormatName;
  /** The key's Redis type (for `unknown`, the type that was found). */
  redisType: string;
  /** `quorum`: a Redlock over the node set; `single`: a lock on one instance by design, held while its node holds it. */
  scope: LockScope;
  /**
   * Who holds it, as the format decodes it; `id` is what force release compares. On a split vote with no side
   * ahead, every side's holders, each with `nodes`: the nodes holding it, in node order.
   */
  holders: Array<FormatHolder & { nodes?: string[] }>;
  /** `no-ttl`: never expires by itself; `stale-entries`; `truncated` (see docs/formats.md). */
  warnings: LockWarning[];
  /** The value held by a quorum of nodes; null when no value has a quorum. */
  token: string | null;
  /**
   * Without a quorum (`partial`), the value the lock is shown with: the one held by the most nodes (where several
   * are, the one the lock was held with before, if it is one of them). Absent while `token` is set, and for a split
   * vote with no side ahead: no value leads, and the locks table names no holder.
   */
  leading?: string;
  /** Decoded from engine-made values; null for foreign values (node-redlock, redlock-py, SETNX scripts). */
  holder: LockHolder | null;
  /** Fencing token where the engine issued one. */
  fence: string | null;
  nodes: LockNodeView[];
  /** How many nodes hold the leading value (`token` when held; the most widely held value when partial). */
  quorumHeld: number;
  /** Nodes needed for it to be held: a majority for a `quorum` lock, 1 for a `single` one. */
  quorum: number;
  /** Epoch ms (server clock) when the lock stops being held by a quorum; null for a key without a TTL. */
  expiresAt: number | null;
  /** Epoch ms: from the holder's value where the engine wrote it, else when the console first saw it. */
  acquiredAt?: number;
  /** The TTL the lock was last set or extended with, for drawing the remaining fraction. */
  ttlMs: number | null;
  /** Epoch ms when it ended (released, expired, force-released, lost). */
  endedAt?: number;
  /** The value that was held when it ended. */
  endedToken?: string | null;
  /**
   * Present when every node that held it cannot be read right now (down, or not answering): the state and
   * values are the last ones read, not current. It is neither counted as ended nor dropped; the next
   * reading of those nodes settles it.
   */
  unreadable?: true;
  contention: LockContention;
}

export const TIMELINE_TYPES = [
  "acquired",
  "extended",
  "released",
  "expired",
  "evicted",
  "force-released",
  "lost",
  "elapsed",
  "partial",
  "quorum",
  "attempts",
  "holders",
  "gap",
  "lost-in-failover",
  "lost-in-restart",
  "failover",
  "release-undone",
] as const;
export type TimelineType = (typeof TIMELINE_TYPES)[number];

/** A lock a node lost while its TTL ran: it restarted without it, or a failover promoted a replica without it (`GET /api/losses`). */
export interface LockLoss {
  /** Epoch ms (server clock) when the console found it lost. */
  at: number;
  resource: string;
  deployment: string;
  /** The node that lost it (on a Redis Cluster the node watched; the detail names the primary). */
  node: string;
  kind: "restart" | "failover";
  /** The timeline entry's words. */
  detail: string;
  /** The value it was held with there (for whom it was lost). */
  token: string;
  /**
   * When the loss was found, the lock was still held with that value (a Redlock that kept its quorum on the other
   * nodes); false: it was gone (it ended, or no quorum held that value). How it ends later does not change it.
   */
  wentOn: boolean;
}

export interface TimelineEntry {
  at: number;
  type: TimelineType;
  node?: string;
  detail?: string;
}

export interface LockDetail extends Lock {
  timeline: TimelineEntry[];
  /** Failed attempts per 10 s over the last 10 minutes, oldest first, for the contention chart. */
  contentionHistory: { bucketMs: number; endsAt: number; attempts: number[] };
  /** On a cluster, and where the deployment has replicas: the primary that holds the lock and whether each replica has it; null elsewhere. */
  replication?: LockReplication | null;
  /** The lock's group, as the grouped view names it (`GET /api/locks/{resource}`): a lock's page follows that group's changes. */
  group?: string;
}

/**
 * A lock's copies, WAIT-style: the primary serving the key (on a cluster, its slot's primary) and each
 * replica with the bytes of the primary's stream (as of the reading) it has not acknowledged. A replica that
 * acknowledged it all has every write so far, this lock's included: a failover to it keeps the lock. One behind
 * may not have it.
 */
export interface LockReplication {
  /** The key's hash slot, on a cluster. */
  slot?: number;
  /** The primary's address (`host:port`). */
  primary: string;
  replicas: Array<{ address: string; state: string; lagBytes: number; hasLock: boolean }>;
  /** When the primary was read (epoch ms, server clock). */
  readAt: number;
}

export interface WatcherStatus {
  nodeId: string;
  /** The node's deployment, where the console watches several (node ids repeat across them); absent with one. */
  deployment?: string;
  /** Subscribed, reconciled and answering: its readings count. */
  up: boolean;
  /** False while the node holds a command past the per-node deadline (frozen, overloaded): not readable now. */
  answering: boolean;
  /**
   * A lock can be shown with its readings now: once the console watches, a node up and answering (its readings
   * count in the merge); while it starts, a node connected (or still connecting) and answering. A lock is sent
   * again when a node it is held on stops or starts counting, not when any node does: where this is false the
   * node is down in every lock.
   */
  counted: boolean;
  notifications: "on" | "enabled-by-console" | "unavailable";
  lastEventAt: number | null;
  reconnects: number;
  gaps: number;
  latencyMs?: number;
  /**
   * Present while the console reads this node's lock keys (a SCAN at start-up, after a reconnect or a
   * pattern change): until then the list lacks some of the locks the node holds. `keysRead`: so far.
   */
  reading?: { since: number; keysRead: number };
  /**
   * Present while the node does not let the console's Redis user watch some lock patterns (their keyspace
   * channel or their keys refused by its ACL): their locks are not read on this node. `rule`: what the ACL user needs.
   */
  refusedPatterns?: Array<{ glob: string; rule: string }>;
  /** On a cluster, present while slots have no primary serving them (a shard lost, none promoted): how many. Their locks read unreadable. */
  unservedSlots?: number;
  /**
   * Present while the node is a replica (its last `INFO replication`, read every 2 s, says so: a failover demoted
   * it, or its URL names a replica): read-only, no lock can be taken, extended or force-released there. `primary`:
   * the primary it follows (`host:port`), null where it does not say. `writable`: the replica takes writes
   * (`replica-read-only no`): a lock written there stays there, never seen by its primary, and the console
   * releases nothing there.
   */
  readOnly?: { primary: string | null; writable?: true };
}

export interface LiveStats {
  serverTime: number;
  held: number;
  locks: number;
  acquisitionsPerSec: number;
  contentionPerSec: number;
  expirationsPerSec: number;
  /** Nodes whose readings count (subscribed, reconciled and answering). */
  nodesUp: number;
  nodesTotal: number;
  /** Connected nodes that hold a command past the per-node deadline. */
  nodesNotAnswering: number;
  /** Nodes without keyspace notifications (watched by periodic SCAN instead). */
  nodesWithoutNotifications: number;
  degraded: boolean;
}
