import "server-only";
import { randomBytes } from "node:crypto";
import { Cluster, type Redis } from "ioredis";
import { isLabResource } from "@/lib/lab/keys";
import { readInSlots, servedShards, servingShards, slotIn, unservedSlots, type ClusterMember } from "@/lib/locks/cluster";
import { decodeReading, isAccessRefused, readLockKeysAsAllowed, type DecodeContext, type KeyReading, type ReadRefusals } from "@/lib/locks/formats";
import { flushedSince, parseFlushCalls, type FlushCalls } from "@/lib/locks/flush-calls";
import { FAIR_TIMEOUTS_GLOB, fairLockNames } from "@/lib/locks/formats/redisson";
import { earlierOverlaps, globSamples, lockKeyMatcher } from "@/lib/locks/glob";
import type { EndCause } from "@/lib/locks/merge";
import { INITIAL_RUN_FACTS, nextAnswering, nextNotificationStatus, nextRunFacts, restartRisk, uptimeMsAt, type NodeRunFacts } from "@/lib/locks/node-state";
import { NodeClock } from "@/lib/locks/node-clock";
import { EXTEND_SLACK_MS } from "@/lib/locks/merge";
import { mergedNotifyFlags, missingNotifyFlags, REQUIRED_NOTIFY_FLAGS } from "@/lib/locks/notify";
import { CONTENTION_CHANNEL, REVOKE_CHANNEL, keySlot, parseContentionMessage, parseGaveUpMessage, parseRevokeMessage, setReplyDeadline } from "@lockscope/redlock";
import type { NotificationStatus } from "../health";
import type { Logger } from "pino";
import type { LockClient } from "../deployments";
import { clusterNodeAt, isCommandRefused } from "../deployments/cluster";
import type { ServerChange } from "../deployments/failover";
import { connectionDrops, nodeClientOptions, type LockNode } from "../nodes";
import { replyOf } from "../errors";
import { ClusterSubscriber, type WatchSubscriber } from "./cluster-subscriber";
import type { LiveEvents } from "./events";
import type { LockStore, NodeSample } from "./store";

/** The longest the first reconcile waits for room in the history queue, in all (see `HistorySink.room`). */
const ROOM_WAIT_TOTAL_MS = 60_000;
/** Keys read per command when reading the keys that changed. */
export const READ_BATCH = 1_000;
/** Distinct key names that are not UTF-8 text counted per node, at most. */
const NOT_TEXT_KEPT = 10_000;
/**
 * A reconcile's SCAN page and read batch: small enough that the node serves its other clients between two of
 * them (at a million keys, a page of 1,000 took the node ~0.9 ms and a read of 1,000 keys ~1.8 ms, and other
 * clients' PING p99 went to 12-14 ms; at 500 and 200, ~5 ms), large enough that commands stay few.
 */
const SCAN_COUNT = 500;
const RECONCILE_BATCH = 200;
/** The longest a node's first reconcile waits for the other nodes' watchers to subscribe (see `peersSubscribed`). */
const PEER_WAIT_MS = 2_000;
/** A start-up batch waits this many node deadlines for its turn on another node (see `readForPeer`). */
const TURN_WAIT_DEADLINES = 4;
/** The longest a restart's check waits for the other nodes' notifications to be read (see `drainPeers`). */
const DRAIN_MS = 5_000;
/** How often the subscriber connection is asked a PING (see `checkSubscriber`). */
const SUB_PING_MS = 5_000;
/** A subscriber PING unanswered this long while the node answers the reader: the connection is taken for dead. */
const SUB_SILENT_MS = 10_000;
/** ...and still unanswered this much later, the reader having answered again meanwhile (see `checkSubscriber`). */
const SUB_CONFIRM_MS = 1_000;

export interface WatcherContext {
  store: LockStore;
  /** The lock patterns in force now (an operator may change them live: see `resubscribe`). */
  patterns: () => readonly string[];
  isLockKey: (key: string) => boolean;
  events: LiveEvents;
  log: Logger;
  timeoutMs: number;
  /** How long a node may keep a command before it counts as not answering (frozen, overloaded). */
  deadlineMs: number;
  /** Every watcher of the deployment (this one included): while the console starts, keys found are read on all. */
  peers?: () => readonly NodeWatcher[];
  /** A notification marked a key dirty (the runtime reads it in its next batch). */
  onDirty?: () => void;
  /**
   * Resolves once the runtime has read every key dirty on the nodes it reads now, or at `until` (epoch ms) if it
   * has not by then (see `NodeWatcher.drainPeers`).
   */
  drained?: (until: number) => Promise<void>;
  /**
   * The reader reached another server, already running, where it had read another: a Sentinel deployment's
   * promoted replica, or the server a standalone instance's endpoint (a managed service's primary endpoint, a
   * virtual IP) moved to. Called before that server is read, so the view is still the old server's. A sentinel that
   * leads a failover names the promoted replica to clients before it announces `+switch-master`, so this can come
   * first; behind an endpoint, nothing else tells.
   */
  onServerReplaced?: (change: ServerChange) => void;
}

/**
 * Where CONFIG is refused (managed Redis), whether keyspace notifications are on is told by a probe: the
 * console's own short-lived keys under this prefix (never locks: `lockscope:*`), written and deleted by it.
 */
export const PROBE_PREFIX = "lockscope:probe:";
/**
 * Each `notify-keyspace-events` flag a probe can show, with the event its commands make (see `probeNotifications`).
 * `K` shows in any of them arriving; `e` (evictions) cannot be shown without evicting, and is taken on trust.
 */
const PROBED_EVENTS: Readonly<Record<string, string>> = Object.freeze({ g: "del", x: "expired", $: "set", h: "hset", z: "zadd" });

/** A lock pattern a node does not let the console's Redis user watch (see `NodeWatcher.tryPatterns`). */
export interface PatternRefusal {
  /** The node as the nodes panel shows it (its URL, password masked). */
  node: string;
  glob: string;
  /** `channel`: it may not subscribe to the pattern's keyspace channel; `keys`: it may not read the keys. */
  refused: "channel" | "keys";
  /** What the node's ACL needs for it: `&<channel>` or `~<glob>`. */
  rule: string;
}

/** One node's answer to a pattern change's check (see `NodeWatcher.tryPatterns`). */
export interface PatternCheck {
  /** The node as the nodes panel shows it. */
  node: string;
  refusals: PatternRefusal[];
  /** False when the node could not be asked about every glob by the deadline (unreachable, frozen, slow). */
  checked: boolean;
}

/** What `tryPatterns` throws at its deadline. */
class PastDeadline extends Error {
  override name = "PastDeadline";
}

/** What a read throws when its connection dropped while it was out (see `NodeWatcher.read`). */
class ReadAcrossDrop extends Error {
  override name = "ReadAcrossDrop";
}

/** A list of refusals as text, to tell whether it changed. */
function refusalsText(refusals: readonly PatternRefusal[]): string {
  return refusals.map((r) => `${r.glob} ${r.rule}`).join("\n");
}

/** A restart the next reconcile settles (see `NodeWatcher.restartLosses`). */
interface RestartLoss {
  /** A cluster's primary by address; null: the node itself. */
  server: string | null;
  before: Map<string, { value: string; expiresAt: number }>;
  restartedAt: number;
}

/** The address a connection is connected to now (its socket's peer); null while it has none. */
function remoteAddressOf(client: Redis): { host: string; port: number } | null {
  const socket = client.stream as { remoteAddress?: string; remotePort?: number } | undefined;
  return socket?.remoteAddress !== undefined && socket.remotePort !== undefined ? { host: socket.remoteAddress, port: socket.remotePort } : null;
}

/** Whether INFO persistence says AOF is on, as CONFIG GET appendonly would (`yes`, `no`); null when it does not say. */
function appendonlyFromInfo(persistence: string): string | null {
  const aof = /aof_enabled:(\d)/.exec(persistence)?.[1];
  return aof === undefined ? null : aof === "1" ? "yes" : "no";
}

/** What a restart check needs of INFO server. */
function runReading(info: string): { runId: string | null; uptimeSec: number | null } {
  const uptime = /uptime_in_seconds:(\d+)/.exec(info)?.[1];
  return { runId: /run_id:([0-9a-f]+)/.exec(info)?.[1] ?? null, uptimeSec: uptime ? Number(uptime) : null };
}

const CAUSES: Record<string, EndCause> = { del: "del", expired: "expired", evicted: "evicted" };

/**
 * The keyspace watcher of one lock node: a subscriber connection (keyspace notifications for the lock
 * patterns, the engine's contention and revocation channels) and a reader connection (CONFIG, SCAN,
 * batched GET/PTTL). Notifications only mark keys dirty; the runtime reads dirty keys in batches.
 */
export class NodeWatcher {
  readonly id: string;
  readonly index: number;
  readonly sub: WatchSubscriber;
  /** One instance's connection, or a cluster client (every key read on its slot's primary). */
  readonly reader: LockClient;
  /** A cluster's topology (the watcher subscribes to and scans every primary); null for one instance. */
  private readonly cluster: LockNode["cluster"] | null;
  notifications: NotificationStatus = "unavailable";
  /** Subscribed and reconciled. */
  up = false;
  /** False while a command has waited on the node past the deadline. Its samples count only when up and answering. */
  answering = true;
  /** A read batch still out past its deadline: later batches leave this node out until it answers. */
  busy = false;
  /** The last start-up read sent to this node (settled or not): the next waits for it (see `inTurn`). */
  private turn: Promise<unknown> = Promise.resolve();
  /** Connected (or failed to) at least once. */
  attempted = false;
  reconnects = 0;
  gaps = 0;
  /**
   * Keys under the patterns whose names are not UTF-8 text, found on this node since the console started
   * (distinct, counted up to NOT_TEXT_KEPT). The console reads key names as text: such a name comes with U+FFFD
   * in place of its bytes, names no key, and the lock cannot be shown or released. Counted and logged instead
   * of left out unsaid.
   */
  private readonly namesNotText = new Set<string>();
  private namesNotTextLoggedAt = 0;
  lastEventAt: number | null = null;
  /**
   * Set while a reconcile reads the node's lock keys (at start-up, after a reconnect, after a pattern
   * change): until it ends, the locks this node holds are not all listed yet.
   */
  reading: { since: number; keysRead: number } | null = null;
  /**
   * A reconcile is owed: the patterns changed while another was reading or while the node did not answer,
   * or one failed (after a notification gap, say). Run by the next periodic check that can.
   */
  private reconcileOwed = false;

  /** Whether this node has read every key under the patterns in force (no reconcile running or owed). */
  get reconciled(): boolean {
    return this.reading === null && !this.reconcileOwed;
  }
  /** The flush commands' counts last read (on a cluster, on each primary, by address): see `checkFlushes`. */
  private flushCalls = new Map<string, FlushCalls>();
  /** INFO commandstats refused (an ACL) or not understood: flushes go unnoticed until a bring-up tries again. */
  private flushCallsUnreadable = false;
  private flushCallsRefusalLogged = false;
  /** A notification came since `stampEvents` last ran (the time is taken there, not per notification). */
  private eventsUnstamped = false;
  latencyMs: number | null = null;
  private readonly rtts: number[] = [];
  longestTtlMs = 0;
  /** What `sampleOf` decodes with, refilled each time (the decoders keep nothing of it). */
  private readonly decodeContext: DecodeContext = { now: 0 };
  /** Every lock key of the node was read once (a reconcile finished): until then `longestTtlMs` is unknown, not 0. */
  ttlsRead = false;
  facts: { appendonly: string | null; save: string | null; skewMs: number | null } = { appendonly: null, save: null, skewMs: null };
  run: NodeRunFacts = INITIAL_RUN_FACTS;
  /** `host:port` of the server the reader was on when its run facts were last read; null before. */
  private serverAddress: string | null = null;
  /**
   * Restarts seen (the run id changed) that the next reconcile settles: what the node held before, and when it
   * started again. On a cluster, one per primary that restarted (`server`, its address): the locks in its slots.
   */
  private restartLosses: RestartLoss[] = [];
  /** On a cluster, each primary's run facts, by address (a cluster client asks any node: `run` stays unread). */
  private clusterRuns = new Map<string, NodeRunFacts>();
  /** The notification probe's own events (see `probeNotifications`), while one runs; its channel subscribed on this subscriber generation. */
  private notifyProbe: { seen: Set<string>; expected: number; done: () => void } | null = null;
  private probeSubscribedGeneration = -1;
  private readonly probeId = randomBytes(6).toString("hex");
  private probeVerifiedLogged = false;
  /** Probes in a row that missed events (see `checkNotifications`), and the probe running now. */
  private probeMisses = 0;
  private probing: Promise<{ missing: string; why: string }> | null = null;
  /** INFO server was refused (an ACL) and said so in the log once. */
  private runFactsRefusalLogged = false;
  /** When the oldest command still waiting on the reader was sent (liveness probe or read batch). */
  private waitingSince = new Map<number, number>();
  private nextWaitId = 1;
  private lastAnswerAt: number | null = null;
  private answeringSince = 0;
  /** The PING out on the subscriber connection (see `checkSubscriber`); `suspectAt`: when it was first found late. */
  private subPing: { sentAt: number; generation: number; suspectAt: number | null } | null = null;
  private subPingSettledAt = 0;
  private counted = false;
  /** Keys to read, with the end a notification gave (replaced by a fresh map when a batch takes them all). */
  dirty = new Map<string, EndCause>();
  /**
   * Dirty keys whose latest notification here was an end (del, expired, evicted): gone from this node, so the
   * batch reads them as absent without asking. Notifications on one connection come in the node's order, so a
   * later write would have come after it. On a cluster the batch reads them all the same (a slot moving between
   * primaries notifies on two connections, in no order between them): there they are kept only for a drop (see
   * `applyEndsAtDrop`), each the word of the primary that owns the key.
   */
  private ended = new Map<string, EndCause>();
  /**
   * The ends (see `ended`) the batch read last took, which it gives as readings without asking the node: applied
   * again should the connection drop (see `applyEndsAtDrop`) in case that batch's readings never were. A later
   * notification of the key takes it out (what the node said last is what stands). On a cluster, only while the
   * batch that took them is out (see `readClusterDirty`).
   */
  private endsInFlight = new Map<string, EndCause>();
  /** Keyspace notifications received, by event name: counted here and read by the metrics when scraped (nothing per notification beyond this). */
  readonly keyspaceEvents = new Map<string, number>();
  /** This node's clock on the console's, so every read of a key agrees on when its TTL ends. */
  private readonly clock = new NodeClock();
  private readonly channelPrefix: string;
  /** This watcher's notification probe keys' channels, and the pattern it hears them by (see `probeNotifications`). */
  private readonly probeChannelPrefix: string;
  private readonly probePattern: string;
  /** The keyspace channels of every console's probe keys: `probePattern` without its `*`. */
  private readonly probeKeyspacePrefix: string;
  /** Redisson's fair-lock waiting times, watched beside the patterns (see `onFairQueue`). */
  private readonly fairTimeoutsChannel: string;
  private fairQueuesRefused = false;
  private downSince: number | null = null;
  private everUp = false;
  private enabledByUs = false;
  private notificationsChecked = false;
  private subGeneration = 0;
  /** Epoch ms when the subscriber's current connection became ready. */
  private subReadyAt = 0;
  /** Epoch ms when the reader's last connection ended. */
  private readerClosedAt = 0;
  /** Since when the bring-up has waited for a subscriber connection to a restarted server's earlier run to end (see `refuseStaleSubscriber`). */
  private staleSubSince: number | null = null;
  private subscribedGeneration = -1;
  /** The keyspace channels subscribed on the current subscriber connection. */
  private subscribedChannels: string[] = [];
  /** A judgement of the patterns is running after a refused read (see `judgeAgain`). */
  private judging = false;
  /** The `resubscribe` running, which the next waits for (see there). */
  private resubscribeTurn: Promise<unknown> = Promise.resolve();
  /** For each subscribed pattern, the earlier ones that may match the same keys (see `earlierOverlaps`). */
  private overlaps = new Map<string, Array<(key: string) => boolean>>();
  private bringingUp = false;
  private again = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private stopped = false;
  /**
   * The lock patterns this node does not let the console's Redis user watch (its keyspace channel or its keys
   * refused): their keys are not watched here, and the node's status and the log say so, until the node allows
   * them (tried again with the facts read every few rounds).
   */
  private refusals: PatternRefusal[] = [];
  /** Null while every pattern in force is watched here; else the patterns that are. */
  private watchedMatch: ((key: string) => boolean) | null = null;
  /** On a cluster: the slots no primary serves now (see `followUnserved`). */
  private unserved: Array<[number, number]> = [];
  /** Set by the replication watch (`watchReplication`) while the node is a replica: see `WatcherStatus.readOnly`. */
  readOnly: { primary: string | null } | null = null;
  private readonly onTopology = () => this.followUnserved();
  /** The bring-up's last failure as logged, and the tries failed the same way since (see `noteBringUpFailure`). */
  private bringUpFailure: { err: string; loggedAt: number; since: number } | null = null;
  /** What the node refused of the ways to read lock keys (scripts, then MULTI): later reads start from what it takes. */
  private readonly readRefusals: ReadRefusals = { scripts: false, transactions: false };
  /** Called when the watcher's status changes (up, down, notifications). */
  onChange: () => void = () => {};

  constructor(
    private readonly node: LockNode,
    private readonly ctx: WatcherContext,
  ) {
    this.id = node.id;
    this.index = node.index;
    const base = nodeClientOptions(ctx.timeoutMs);
    this.cluster = node.cluster ?? null;
    const subOptions = { ...base, enableAutoPipelining: false, autoResubscribe: false, commandTimeout: undefined, connectionName: "lockscope:watcher" };
    this.sub = this.cluster ? new ClusterSubscriber(this.cluster.topology, this.cluster.connectTo, subOptions) : (node.connect(subOptions));
    this.reader = node.connect({
      ...base,
      enableAutoPipelining: false,
      commandTimeout: Math.max(5_000, ctx.timeoutMs * 4),
      connectionName: "lockscope:watcher-reader",
    });
    // A cluster has database 0 only.
    const db = this.reader instanceof Cluster ? 0 : (this.reader.options.db ?? 0);
    this.channelPrefix = `__keyspace@${db}__:`;
    this.fairTimeoutsChannel = this.channelPrefix + FAIR_TIMEOUTS_GLOB;
    this.probeChannelPrefix = `${this.channelPrefix}${PROBE_PREFIX}${this.probeId}:`;
    this.probeKeyspacePrefix = `${this.channelPrefix}${PROBE_PREFIX}`;
    this.probePattern = `${this.probeKeyspacePrefix}*`;
    this.sub.on("ready", () => {
      this.attempted = true;
      this.subGeneration += 1;
      this.subReadyAt = Date.now();
      this.staleSubSince = null;
      void this.bringUp();
    });
    this.reader.on("ready", () => {
      this.attempted = true;
      void this.bringUp();
    });
    const attempted = () => {
      this.attempted = true;
    };
    this.cluster?.topology.on("change", this.onTopology);
    this.sub.on("close", () => this.wentDown());
    this.sub.on("joined", () => this.primariesJoined());
    this.sub.on("error", attempted);
    this.reader.on("close", () => {
      this.readerClosedAt = Date.now();
      this.wentDown();
    });
    this.reader.on("error", attempted);
    this.sub.on("pmessage", (pattern: string, channel: string, event: string) => {
      if (pattern === this.fairTimeoutsChannel) {
        this.onFairQueue(channel);
        return;
      }
      // The probe's keys are never locks; a pattern as broad as `*` delivers their events too.
      // (Every console's probes are heard: an ACL lets a pattern be subscribed only as it is written there.)
      if (channel.startsWith(this.probeKeyspacePrefix)) {
        if (pattern === this.probePattern && channel.startsWith(this.probeChannelPrefix)) this.onProbeEvent(channel, event);
        return;
      }
      // Overlapping patterns (`lock:*` and `lock:orders:*`) each deliver the same notification: it counts once,
      // through the first pattern that matches its key.
      const earlier = this.overlaps.size > 0 ? this.overlaps.get(pattern.slice(this.channelPrefix.length)) : undefined;
      if (earlier !== undefined && channel.startsWith(this.channelPrefix)) {
        const key = channel.slice(this.channelPrefix.length);
        // Matched byte by byte, as Redis matched it to deliver it through each pattern; except a name with U+FFFD,
        // which may stand for bytes that are not UTF-8 (see `checkTextName`): counting such a change twice is the
        // harmless way to be wrong, dropping it would lose it.
        if (!key.includes("\uFFFD")) for (const matches of earlier) if (matches(key)) return;
      }
      this.onKeyspace(channel, event);
    });
    this.sub.on("message", (channel: string, message: string) => this.onTelemetry(channel, message));
  }

  status() {
    const refusedPatterns = this.refusedRules();
    return {
      nodeId: this.id,
      up: this.up && this.answering,
      answering: this.answering,
      // While the console starts the merge counts every node; a node it cannot reach, or that does not answer,
      // is still not one whose readings a lock can be shown with.
      counted: this.ctx.store.watching ? this.ctx.store.isNodeUp(this.index) : this.answering && !this.unreachable,
      notifications: this.notifications,
      lastEventAt: this.lastEventAt,
      reconnects: this.reconnects,
      gaps: this.gaps,
      ...(this.latencyMs !== null ? { latencyMs: this.latencyMs } : {}),
      ...(this.reading !== null ? { reading: { since: this.reading.since, keysRead: this.reading.keysRead } } : {}),
      ...(refusedPatterns ? { refusedPatterns } : {}),
      ...(this.unserved.length > 0 ? { unservedSlots: this.unserved.reduce((n, [from, to]) => n + to - from + 1, 0) } : {}),
      ...(this.readOnly ? { readOnly: this.readOnly } : {}),
    };
  }

  get readable(): boolean {
    return this.reader.status === "ready";
  }

  /**
   * Whether the runtime's batches may read this node once the console watches: not while it comes back from a
   * drop (until its bring-up has checked for a restart and reconciled). Read before, a node that restarted empty
   * would have the locks it lost read as gone with no cause, and end them as released before its restart is known.
   */
  get readInBatches(): boolean {
    return this.up || !this.everUp;
  }

  /** On a cluster: slots no primary serves now, in ranges (empty elsewhere). */
  get unservedSlots(): ReadonlyArray<[number, number]> {
    return this.unserved;
  }

  /**
   * On a cluster: a shard whose primary failed with no replica promoted serves nothing, while the cluster may
   * go on serving the other slots (`cluster-require-full-coverage no`). The locks in its slots cannot be read:
   * merged as unreadable (their last readings kept) until a primary serves them again, when the reconcile that
   * follows the new connection reads them.
   */
  private followUnserved(): void {
    if (!this.cluster) return;
    const slots = unservedSlots(this.cluster.topology.shards);
    if (JSON.stringify(slots) === JSON.stringify(this.unserved)) return;
    const before = this.unserved;
    this.unserved = slots;
    this.ctx.store.setUnreadable(slots.length === 0 ? null : (resource) => slotIn(slots, keySlot(resource)));
    if (slots.length > 0) this.ctx.log.warn({ node: this.id, slots }, "a cluster shard has no primary serving its slots: its locks are shown unreadable until one does");
    else this.ctx.log.info({ node: this.id }, "every cluster slot is served again");
    // Slots served again are read again, whichever comes first: this, or the primary's connection joining (whose
    // reconcile, run while the topology still had the slots unserved, left their keys unread).
    if (before.some(([from, to]) => !slots.some(([a, b]) => a <= from && to <= b))) this.primariesJoined();
    this.onChange();
  }

  /** Whether this watcher reads `key`: a lock key under a pattern this node lets the console watch. */
  private watches(key: string): boolean {
    return this.ctx.isLockKey(key) && (this.watchedMatch === null || this.watchedMatch(key));
  }

  /**
   * Whether this node may be read for `key`: not under a pattern it refuses the console (see `refusals`), nor, on a
   * cluster, in a slot no primary serves (see `followUnserved`: kept as last read).
   */
  private mayRead(key: string): boolean {
    return (this.watchedMatch === null || this.watchedMatch(key)) && (this.unserved.length === 0 || !slotIn(this.unserved, keySlot(key)));
  }

  /** The node's refusal of `glob`, with the ACL rule that would allow it. */
  private refusal(glob: string, refused: PatternRefusal["refused"]): PatternRefusal {
    return { node: this.node.maskedUrl, glob, refused, rule: refused === "channel" ? `&${this.channelPrefix}${glob}` : `~${glob}` };
  }

  /** Lock patterns this node refuses the console, each with the rule it needs, as the node's status and health give them; undefined while none. */
  refusedRules(): Array<{ glob: string; rule: string }> | undefined {
    return this.refusals.length === 0 ? undefined : this.refusals.map((r) => ({ glob: r.glob, rule: r.rule }));
  }

  /** Some of this node's locks are not watched now: patterns it refuses the console, a cluster's unserved slots. */
  get partlyWatched(): boolean {
    return this.refusals.length > 0 || this.unserved.length > 0;
  }

  /** How many key names under the patterns found here are not UTF-8 text (see `namesNotText`). */
  get keyNamesNotText(): number {
    return this.namesNotText.size;
  }

  /**
   * A key name with U+FFFD in it is either text with that character, or bytes that are not UTF-8 that the client
   * replaced: the second names no key. Told apart by asking whether the key the name says exists (rare keys:
   * one EXISTS each), and counted and logged (at most once a minute) when it does not.
   */
  private checkTextName(key: string): void {
    if (this.namesNotText.has(key) || this.namesNotText.size >= NOT_TEXT_KEPT || this.reader.status !== "ready") return;
    void this.reader.exists(key).then(
      (found) => {
        if (found > 0 || this.namesNotText.size >= NOT_TEXT_KEPT) return;
        this.namesNotText.add(key);
        const now = Date.now();
        if (now - this.namesNotTextLoggedAt < 60_000) return;
        this.namesNotTextLoggedAt = now;
        this.ctx.log.warn(
          { node: this.id, count: this.namesNotText.size, example: JSON.stringify(key.slice(0, 120)) },
          "keys under the lock patterns have names that are not UTF-8 text: the console cannot show or release them",
        );
      },
      () => undefined,
    );
  }

  /** Reachable by now, or given up on for the moment: what `waitUntilReconciled` waits for. */
  get settled(): boolean {
    return this.up || this.unreachable;
  }

  /** Tried and not connected now (both connections are needed): given up on for the moment. */
  private get unreachable(): boolean {
    return this.attempted && !(this.sub.status === "ready" && this.reader.status === "ready");
  }

  /**
   * Watches Redisson's fair-lock waiting times, where the node allows it: an ACL user without that channel
   * (one set up before the console watched them) keeps every other watch, and its fair locks' waiter counts
   * follow their hash's changes only. Said once in the log.
   */
  private async subscribeFairQueues(): Promise<void> {
    try {
      await this.sub.psubscribe(this.fairTimeoutsChannel);
    } catch (error) {
      if (!(error instanceof Error && /NOPERM/i.test(error.message))) throw error;
      if (this.fairQueuesRefused) return;
      this.fairQueuesRefused = true;
      this.ctx.log.warn(
        { node: this.id, channel: this.fairTimeoutsChannel, err: error.message },
        "the node refuses the console's subscription to Redisson's fair-lock queues (add this channel to its ACL user): their waiter counts follow the lock's own changes only",
      );
    }
  }

  /**
   * A fair lock's waiting times changed (a waiter joined, left or timed out): its lock, when it is one under
   * the patterns, is read again for its waiter count. What ends the companion (its `del`, its expiry) ends
   * nothing of the lock.
   */
  private onFairQueue(channel: string): void {
    if (!channel.startsWith(this.channelPrefix)) return;
    for (const key of fairLockNames(channel.slice(this.channelPrefix.length))) {
      if (!this.watches(key)) continue;
      this.dirty.set(key, this.dirty.get(key) ?? null);
      this.ctx.onDirty?.();
    }
  }

  private onKeyspace(channel: string, event: string): void {
    if (!channel.startsWith(this.channelPrefix)) return;
    const key = channel.slice(this.channelPrefix.length);
    this.eventsUnstamped = true;
    this.keyspaceEvents.set(event, (this.keyspaceEvents.get(event) ?? 0) + 1);
    // The patterns' channels also carry the keys kept beside locks (a Redisson read-write lock's lease keys
    // under `lock:*`): never read as locks.
    if (!this.watches(key)) return;
    // An end (del, expired, evicted) stays the key's cause until it is read, even if a set follows in the
    // same batch (a release that hands the lock over deletes and writes in one script).
    const cause = CAUSES[event];
    if (cause === undefined && key.includes("\uFFFD")) this.checkTextName(key);
    this.dirty.set(key, cause ?? this.dirty.get(key) ?? null);
    if (cause !== undefined) this.ended.set(key, cause);
    else this.ended.delete(key);
    if (this.endsInFlight.size > 0) this.endsInFlight.delete(key);
    this.ctx.onDirty?.();
  }

  /**
   * Gives up the keys this node owes for a reconcile, run once it answers (see `recheckNotifications`): what a
   * node kept away from the batches for long owes is cheaper read whole than remembered key by key.
   */
  oweReconcile(): void {
    this.dirty = new Map();
    this.ended = new Map();
    this.endsInFlight = new Map();
    this.ctx.store.forgetReadsAtStart(this.index);
    this.reconcileOwed = true;
  }

  /** Sets `lastEventAt` if notifications came since the last call: called every few milliseconds. */
  stampEvents(now: number): void {
    if (!this.eventsUnstamped) return;
    this.eventsUnstamped = false;
    this.lastEventAt = now;
  }

  private onTelemetry(channel: string, message: string): void {
    if (channel === CONTENTION_CHANNEL) {
      const event = parseContentionMessage(message);
      if (event) {
        if (this.ctx.isLockKey(event.resource)) this.ctx.store.recordContention(event);
      } else {
        const gone = parseGaveUpMessage(message);
        if (gone && this.ctx.isLockKey(gone.resource)) this.ctx.store.recordGaveUp(gone);
      }
    } else if (channel === REVOKE_CHANNEL) {
      const event = parseRevokeMessage(message);
      if (event && this.ctx.isLockKey(event.resource)) this.ctx.store.noteForceRelease(event.resource, { value: event.value });
    }
  }

  private wentDown(): void {
    this.attempted = true;
    // Whatever happens while we are away is lost: forget pending reads, the reconcile will cover them (all of
    // them: what was read here while the console started may be stale by then).
    this.ctx.store.forgetReadsAtStart(this.index);
    this.applyEndsAtDrop();
    this.dirty.clear();
    this.waitingSince.clear();
    // A new connection starts afresh: the bring-up's commands tell whether the node answers.
    this.answering = true;
    this.answeringSince = Date.now();
    if (!this.up) return;
    this.up = false;
    this.downSince = Date.now();
    if (this.stopped) {
      // Shutting down: nothing will read the locks again, so they are not merged again without this node
      // (at a million locks that would hold the shutdown up for seconds).
      this.ctx.log.info({ node: this.id }, "lock watcher stopped");
      return;
    }
    this.syncCounted();
    this.ctx.log.warn({ node: this.id }, "lock watcher lost its node; will reconcile on reconnect");
    this.onChange();
  }

  /**
   * The keys this node said had ended (del, expired, evicted: the latest notification of each) on the connection
   * that dropped, which no batch had read yet: the node said so before it went away, so its copy ended then, for
   * the reason given. Applied now as the batch would have; left to the reconcile, a restart that comes back
   * empty would find them gone and count them lost in it (a burst of releases the console was still reading).
   * On a cluster, the ends every primary announced (one primary's connection dropping drops the watcher's): the
   * primary that owns a key is the only one that notifies of it, so each is that shard's own word. (A key whose slot
   * was moving between two primaries that very moment may have its old primary's end come last: shown ended until
   * the reconcile that follows reads it on the new one.)
   */
  private applyEndsAtDrop(): void {
    const ends = this.endsInFlight.size === 0 ? this.ended : new Map([...this.endsInFlight, ...this.ended]);
    this.ended = new Map();
    this.endsInFlight = new Map();
    if (this.stopped || ends.size === 0) return;
    const now = Date.now();
    for (const [key, cause] of ends) this.ctx.store.apply(key, [this.sampleOf(null, cause, now)], now);
  }

  /**
   * On a cluster: primaries joined while the others stayed subscribed (a replica promoted for a primary that failed
   * earlier, the other slots served on; a new shard), their connections subscribed. No gap for the other slots: the
   * keys are read again (those in the new primaries' slots changed unheard), by the periodic check if a reconcile
   * runs now.
   */
  private primariesJoined(): void {
    if (this.stopped) return;
    this.ctx.store.forgetReadsAtStart(this.index);
    if (this.up && this.answering && this.reading === null) void this.reconcile().catch(() => undefined);
    else this.reconcileOwed = true;
  }

  /**
   * Tells the store whether this node's readings count: up and answering, and not the same server as a node before
   * it in the set (two URLs reaching one server, another name or a proxy for it: its copy of a lock is one, not two
   * towards the quorum; health counts it once too).
   */
  private syncCounted(): void {
    const counted = this.up && this.answering && !this.sameServerAsEarlier();
    if (counted !== this.counted) {
      this.counted = counted;
      this.ctx.store.setNodeUp(this.index, counted);
    }
    // A later node reaching the same server counts while this one is down, and not while it is up.
    this.recountLaterPeers(this.run.runId);
  }

  /** Later nodes of the set that answer with run id `runId` tell the store again whether they count (see `syncCounted`). */
  private recountLaterPeers(runId: string | null): void {
    if (runId === null) return;
    for (const peer of this.ctx.peers?.() ?? []) if (peer.index > this.index && peer.run.runId === runId) peer.syncCounted();
  }

  /**
   * Runs `command` on the reader, counting it as waiting on the node until it settles: a node that keeps
   * one past the deadline is marked not answering at the next `checkAnswering`.
   */
  async waitOn<T>(command: () => Promise<T>): Promise<T> {
    const id = this.nextWaitId++;
    this.waitingSince.set(id, Date.now());
    try {
      const result = await command();
      this.lastAnswerAt = Date.now();
      return result;
    } finally {
      this.waitingSince.delete(id);
      if (!this.answering) this.checkAnswering();
    }
  }

  /**
   * Re-evaluates `answering` from the oldest command still waiting (called by a timer and as commands settle).
   * Before a node is called not answering, the replies already in its socket are read (I/O is handled before
   * `setImmediate` callbacks): after a stall of this console's own event loop, a command looks late while its
   * reply only waits to be read, and every lock on the node would turn unreadable for nothing.
   */
  checkAnswering(now = Date.now(), repliesRead = false): void {
    if (!this.readable) return;
    const oldest = this.waitingSince.values().next().value ?? null;
    const next = nextAnswering({ answering: this.answering, since: this.answeringSince }, { oldestWaitingSince: oldest, lastAnswerAt: this.lastAnswerAt }, now, this.ctx.deadlineMs);
    if (this.answering && !next.answering && !repliesRead) {
      setImmediate(() => this.checkAnswering(Date.now(), true));
      return;
    }
    this.answeringSince = next.since;
    if (next.answering === this.answering) return;
    const answering = next.answering;
    this.answering = answering;
    if (answering) this.ctx.log.info({ node: this.id }, "lock node answers again");
    else this.ctx.log.warn({ node: this.id, waitingMs: oldest === null ? null : now - oldest }, "lock node does not answer; its locks are shown as not readable");
    this.syncCounted();
    this.onChange();
  }

  /** A cheap command on the reader, so a frozen node is noticed even when no lock changes. */
  probe(): void {
    if (!this.readable || this.waitingSince.size > 0) return;
    void this.waitOn(() => this.reader.ping()).catch(() => undefined);
  }

  /**
   * A subscriber connection the network dropped without a word (a NAT gateway, a firewall or a load balancer that
   * forgot an idle flow: no FIN, no RST) stays open to the client and to the node alike, and delivers nothing more:
   * every change after it unheard, the locks shown as they were until their TTL (for good without one). Called every
   * few hundred milliseconds: the subscriber is asked a PING every SUB_PING_MS (answered after every notification
   * sent before it); one still unanswered SUB_SILENT_MS after it was sent, while the node answers the reader, and
   * again SUB_CONFIRM_MS later, the reader having answered meanwhile (replies that came together after a stall are
   * read by then), means the connection is dead: it is dropped and made again, and the bring-up reconciles and marks
   * the gap. A node that answers neither (frozen, overloaded) is left alone. Not on a cluster, whose reader answers
   * from any primary, not from the one a subscriber connection is on.
   */
  checkSubscriber(now = Date.now()): void {
    if (this.cluster || this.stopped || !this.up || this.sub.status !== "ready") return;
    const ping = this.subPing;
    if (ping === null || ping.generation !== this.subGeneration) {
      if (ping === null && now - this.subPingSettledAt < SUB_PING_MS) return;
      const sent = { sentAt: now, generation: this.subGeneration, suspectAt: null };
      this.subPing = sent;
      const settled = () => {
        if (this.subPing !== sent) return;
        this.subPing = null;
        this.subPingSettledAt = Date.now();
      };
      this.sub.ping().then(settled, settled);
      return;
    }
    const answeredSince = (at: number) => this.answering && this.lastAnswerAt !== null && this.lastAnswerAt > at;
    if (ping.suspectAt === null) {
      if (answeredSince(ping.sentAt + SUB_SILENT_MS)) ping.suspectAt = now;
      return;
    }
    if (now - ping.suspectAt < SUB_CONFIRM_MS || !answeredSince(ping.suspectAt)) return;
    this.subPing = null;
    this.ctx.log.warn(
      { node: this.id, silentMs: now - ping.sentAt },
      "the watcher's subscriber connection stopped answering while the node answers (dropped on the way, as by a firewall or a NAT gateway): reconnecting it and reconciling",
    );
    // (Ended, then destroyed after ioredis' `disconnectTimeout` where the peer never answers: its `close` brings the
    // reconnect and the bring-up.)
    (this.sub as Redis).disconnect(true);
  }

  /**
   * Says that the bring-up failed (it is tried again every second): at once, then at most once a minute while it
   * fails the same way, with how many tries failed meanwhile (a Redis Cluster refusing every command while a
   * shard is lost would otherwise write a line a second for as long as it lasts).
   */
  private noteBringUpFailure(err: string): void {
    const now = Date.now();
    const same = this.bringUpFailure !== null && this.bringUpFailure.err === err;
    if (same && now - this.bringUpFailure!.loggedAt < 60_000) {
      this.bringUpFailure!.since += 1;
      return;
    }
    const tries = same ? this.bringUpFailure!.since + 1 : 1;
    this.ctx.log.warn({ node: this.id, err, ...(tries > 1 ? { triesFailed: tries } : {}) }, "lock watcher could not come up; retrying");
    this.bringUpFailure = { err, loggedAt: now, since: 0 };
  }

  /** Runs on every (re)connect of either connection: notifications, subscriptions, reconcile, then up. */
  async bringUp(): Promise<void> {
    if (this.bringingUp) {
      this.again = true;
      return;
    }
    this.bringingUp = true;
    try {
      do {
        this.again = false;
        if (this.stopped || this.sub.status !== "ready" || this.reader.status !== "ready") return;
        this.followUnserved();
        await this.checkNotifications();
        if (this.subscribedGeneration !== this.subGeneration) {
          const generation = this.subGeneration;
          const patterns = this.ctx.patterns();
          const channelRefusals = await this.subscribePatterns(patterns);
          const subscribed = patterns.filter((p) => !channelRefusals.some((r) => r.glob === p));
          this.subscribedChannels = subscribed.map((p) => this.channelPrefix + p);
          this.overlaps = earlierOverlaps(subscribed);
          this.setRefusals(patterns, [...channelRefusals, ...(await this.keyRefusals(patterns, "throw"))]);
          await this.subscribeFairQueues();
          await this.sub.subscribe(CONTENTION_CHANNEL, REVOKE_CHANNEL);
          this.subscribedGeneration = generation;
          // A pattern change made meanwhile found the node connecting and left its patterns to this: subscribed
          // now (the reconcile below reads their keys).
          if (this.ctx.patterns().join("\n") !== patterns.join("\n")) await this.resubscribeInTurn(false);
        }
        const started = Date.now();
        await this.readRunFacts();
        // Before the reconcile, which covers every flush before it: one after it is a count above this baseline.
        await this.checkFlushes(true);
        await this.reconcile({ runFactsRead: true });
        if (this.sub.status !== "ready" || this.subscribedGeneration !== this.subGeneration) {
          this.again = true;
          continue;
        }
        const wasUp = this.up;
        this.up = true;
        this.syncCounted();
        if (this.everUp && !wasUp) {
          this.reconnects += 1;
          this.gaps += 1;
          this.ctx.store.markGap(this.index, this.downSince === null ? 0 : started - this.downSince);
          this.ctx.events.emit("reconnect", { nodeId: this.id });
          this.ctx.events.emit("gap", { nodeId: this.id });
          this.ctx.log.info({ node: this.id, downMs: this.downSince === null ? null : started - this.downSince }, "lock watcher reconnected and reconciled");
        } else if (!this.everUp) {
          this.ctx.log.info({ node: this.id, notifications: this.notifications }, "lock watcher up");
        }
        this.everUp = true;
        this.downSince = null;
        this.bringUpFailure = null;
        this.onChange();
      } while (this.again);
    } catch (error) {
      this.noteBringUpFailure(error instanceof Error ? error.message : String(error));
      this.retryTimer ??= setTimeout(() => {
        this.retryTimer = null;
        void this.bringUp();
      }, 1_000);
    } finally {
      this.bringingUp = false;
    }
  }

  /**
   * Reads `notify-keyspace-events` and adds what is missing; "unavailable" where CONFIG is refused. Runs on
   * every connect and periodically (someone may switch notifications off at runtime). Returns true when
   * notifications the watcher relied on had been off: changes in that time were never announced.
   */
  async checkNotifications(): Promise<boolean> {
    const before = this.notifications;
    let check: Parameters<typeof nextNotificationStatus>[1];
    let failure: unknown = null;
    try {
      // On a cluster every node, replicas too: a replica promoted by a failover publishes at once.
      let missing = "";
      let setOk = true;
      for (const node of this.cluster ? this.clusterNodes("all") : [this.reader]) {
        const reply = await this.waitOn(() => node.config("GET", "notify-keyspace-events"));
        const current = Array.isArray(reply) && typeof reply[1] === "string" ? reply[1] : "";
        const lacking = missingNotifyFlags(current);
        if (lacking === "") continue;
        missing ||= lacking;
        try {
          await this.waitOn(() => node.config("SET", "notify-keyspace-events", mergedNotifyFlags(current)));
        } catch (error) {
          if (this.reader.status !== "ready") throw error;
          setOk = false;
          failure = error;
        }
      }
      check = { refused: false, missing, setOk };
    } catch (error) {
      if (this.reader.status !== "ready") throw error;
      // CONFIG refused (managed Redis, where a parameter group sets the flags): a probe tells whether they are on.
      // (A probe whose commands fail otherwise than by a refusal, a timeout, throws: it tells nothing.)
      const probed = await this.probeNotifications();
      // A node found on is taken off only after two probes in a row missed events: one late burst of events (a
      // stall) would otherwise cost a reconcile of every key. Switched off for real, it is found 5 s later, and
      // the reconcile then reads what was missed meanwhile.
      if (probed.missing === "" || (before !== "unavailable" && this.probeVerifiedLogged && this.probeMisses < 2)) {
        check = { refused: false, missing: "", setOk: true };
        if (!this.probeVerifiedLogged) this.ctx.log.info({ node: this.id }, "CONFIG refused; keyspace notifications verified on by a probe: watching by notifications");
        this.probeVerifiedLogged = true;
      } else {
        check = { refused: true };
        failure = new Error(`${error instanceof Error ? error.message : String(error)}; ${probed.why}`);
        this.probeVerifiedLogged = false;
      }
    }
    const next = nextNotificationStatus({ status: before, enabledByConsole: this.enabledByUs, checked: this.notificationsChecked }, check);
    this.notificationsChecked = true;
    this.notifications = next.status;
    this.enabledByUs = next.enabledByConsole;
    if (next.status === "unavailable" && (before !== "unavailable" || !this.everUp)) {
      this.ctx.log.warn(
        { node: this.id, err: failure instanceof Error ? failure.message : String(failure) },
        "keyspace notifications unavailable (CONFIG refused), watching by periodic SCAN (degraded)",
      );
    } else if (next.lost && next.status !== "unavailable") {
      this.ctx.log.warn({ node: this.id }, "keyspace notifications had been switched off on the node; turned them back on and reconciling");
    }
    if (before !== this.notifications) this.onChange();
    return next.lost;
  }

  /**
   * Whether keyspace notifications are on, where CONFIG cannot say: this watcher writes keys of its own under
   * `PROBE_PREFIX` (on a cluster, in every primary's slots) and waits for their events: `set` of a string PX 20
   * (`$`), `hset` (`h`), `zadd` (`z`), `del` of those two (`g`), and `expired` when the string is asked for
   * after its TTL (`x`, by Redis's lazy expiry). Only the flags the formats need are asked for. `missing`: the
   * flags whose events did not come ("" when all did); with `why` saying so, or why no probe could run (its
   * writes or its channel refused by the ACL).
   */
  private probeNotifications(): Promise<{ missing: string; why: string }> {
    // One at a time (a bring-up and the periodic check may ask together): they share the keys and the collector.
    this.probing ??= this.runProbe().then(
      (result) => {
        // Counted once per probe run (see `checkNotifications`).
        this.probeMisses = result.missing === "" ? 0 : this.probeMisses + 1;
        return result;
      },
    ).finally(() => {
      this.probing = null;
    });
    return this.probing;
  }

  private async runProbe(): Promise<{ missing: string; why: string }> {
    const wanted = REQUIRED_NOTIFY_FLAGS.filter((flag) => PROBED_EVENTS[flag] !== undefined);
    const tags = this.probeTags();
    if (tags === null) return { missing: wanted.join(""), why: "the cluster's topology is not known yet" };
    try {
      if (this.probeSubscribedGeneration !== this.subGeneration) {
        await this.sub.psubscribe(this.probePattern);
        this.probeSubscribedGeneration = this.subGeneration;
      }
    } catch (error) {
      return { missing: wanted.join(""), why: `no probe: its channel was refused (${error instanceof Error ? error.message : String(error)}; the README's ACL lists it)` };
    }
    const seen = new Set<string>();
    const all = new Promise<void>((resolve) => {
      this.notifyProbe = { seen, expected: wanted.length * tags.length, done: resolve };
    });
    const waitMs = Math.max(300, this.ctx.deadlineMs * 2);
    try {
      for (const tag of tags) {
        const key = (kind: string) => `${PROBE_PREFIX}${this.probeId}:${kind}{${tag}}`;
        await this.waitOn(() => this.reader.set(key("s"), "1", "PX", 20));
        // (The hash is written whether or not `h` is asked: its DEL shows `g`. Written with a TTL in one
        // transaction, so that a probe cut short leaves nothing behind for long.)
        const written = this.reader.multi().hset(key("h"), "f", "1").pexpire(key("h"), 10_000);
        if (wanted.includes("z")) written.zadd(key("z"), 1, "m").pexpire(key("z"), 10_000);
        const replies = await this.waitOn(() => written.exec());
        const failed = replies?.find(([error]) => error !== null)?.[0];
        if (failed) throw failed;
        await this.waitOn(() => this.reader.del(key("h"), key("z")));
      }
      await new Promise((resolve) => setTimeout(resolve, 40));
      for (const tag of tags) await this.waitOn(() => this.reader.exists(`${PROBE_PREFIX}${this.probeId}:s{${tag}}`));
      await Promise.race([all, new Promise((resolve) => setTimeout(resolve, waitMs).unref())]);
      // (After a stall of this console's own event loop the timer comes first: events already in the socket are
      // read before `setImmediate` callbacks.)
      await new Promise((resolve) => setImmediate(resolve));
    } catch (error) {
      // Refused (the ACL, a replica): no probe can run. Anything else (a timeout) says nothing of the flags.
      const refusal = probeRefusal(error);
      if (refusal === null) throw error;
      return { missing: wanted.join(""), why: `no probe: its writes were refused (${refusal}; the README's ACL lists them)` };
    } finally {
      this.notifyProbe = null;
    }
    // (On a cluster, a flag counts as on only where every primary's keys made its event.)
    const missing = wanted.filter((flag) => !tags.every((tag) => seen.has(`${tag} ${flag}`))).join("");
    return { missing, why: missing === "" ? "" : `a probe saw no events for the flags ${missing} of notify-keyspace-events (set them where the node is configured, e.g. its parameter group: ${REQUIRED_NOTIFY_FLAGS.join("")})` };
  }

  /** One hash tag per primary for the probe's keys (a cluster's in that primary's slots); null while a cluster's topology is unknown. */
  private probeTags(): string[] | null {
    if (!this.cluster) return [this.probeId];
    const primaries = servingShards(this.cluster.topology.shards);
    if (primaries.length === 0) return null;
    return primaries.map((shard) => {
      for (let n = 0; ; n++) if (slotIn(shard.slots, keySlot(`{${this.probeId}-${n}}`))) return `${this.probeId}-${n}`;
    });
  }

  /** An event of a probe key (`…:<kind>{<tag>}`), counted by the tag of its primary and the flag it shows. */
  private onProbeEvent(channel: string, event: string): void {
    const probe = this.notifyProbe;
    if (probe === null) return;
    const tag = channel.slice(channel.lastIndexOf("{") + 1, -1);
    for (const [flag, made] of Object.entries(PROBED_EVENTS)) if (made === event) probe.seen.add(`${tag} ${flag}`);
    if (probe.seen.size >= probe.expected) probe.done();
  }

  /**
   * The periodic check: notifications switched off at runtime are switched on again where CONFIG allows
   * (else the node is watched by SCAN and shown degraded), and what was missed meanwhile is reconciled.
   */
  async recheckNotifications(): Promise<void> {
    if (!this.up || !this.answering || this.stopped) return;
    const lost = await this.checkNotifications();
    if (lost && this.up) {
      // What was read here while notifications were off may be stale: the reconcile reads every key again.
      this.ctx.store.forgetReadsAtStart(this.index);
      this.gaps += 1;
      this.ctx.store.markGap(this.index, 0, Date.now());
      this.ctx.events.emit("gap", { nodeId: this.id });
      this.onChange();
      this.reconcileOwed = true;
    }
    await this.checkFlushes(false);
    // A reconcile owed (this gap's, a pattern change's the node could not run then, one that failed) runs as
    // soon as the node answers and no other is reading: tried again at every check until one succeeds.
    if (this.reconcileOwed && this.up && this.answering && this.reading === null && !this.stopped) await this.reconcile();
  }

  /**
   * FLUSHALL, FLUSHDB and SWAPDB send no keyspace notification: the locks they remove would stay shown held
   * (until their TTL, then as expired; forever without one). The node counts them in INFO commandstats: a count
   * that grew since the last check owes the node a reconcile, which ends the locks whose keys are gone. A bring-up
   * (`baseline`) takes the counts afresh before its own reconcile (a restart zeroes them). One INFO per node (per
   * primary on a cluster: a flush there empties that primary's slots only) per check. A FLUSHDB or SWAPDB of
   * another database counts too: a reconcile for nothing, as rare as they are. Never throws: a node that fails to
   * answer keeps its last counts, compared again at the next check.
   */
  private async checkFlushes(baseline: boolean): Promise<void> {
    if (baseline) {
      this.flushCalls.clear();
      this.flushCallsUnreadable = false;
    }
    if (this.flushCallsUnreadable || this.stopped) return;
    let nodes: Array<[string, LockClient]>;
    try {
      nodes = this.cluster ? this.clusterNodes("primaries").map((n): [string, LockClient] => [`${n.options.host}:${n.options.port}`, n]) : [["", this.reader]];
    } catch {
      // The cluster's topology is changing: the next check reads it (a primary seen for the first time then is
      // only a baseline).
      return;
    }
    let flushed = false;
    for (const [address, node] of nodes) {
      let calls: FlushCalls | null;
      try {
        calls = parseFlushCalls(await this.waitOn(() => node.info("commandstats")));
      } catch (error) {
        // INFO refused (an ACL, a managed service's renamed command); anything else (a lost connection, a timeout,
        // LOADING, BUSY) passes: the next check asks again.
        if (isCommandRefused(error)) this.cannotReadFlushCalls(error.message);
        if (this.flushCallsUnreadable) break;
        continue;
      }
      if (calls === null) {
        this.cannotReadFlushCalls("no commandstats section in the reply");
        break;
      }
      if (flushedSince(this.flushCalls.get(address) ?? null, calls)) flushed = true;
      this.flushCalls.set(address, calls);
    }
    // Primaries that left the cluster: a node that comes back is a new baseline.
    if (this.cluster && this.flushCalls.size > nodes.length) {
      const current = new Set(nodes.map(([address]) => address));
      for (const address of [...this.flushCalls.keys()]) if (!current.has(address)) this.flushCalls.delete(address);
    }
    if (!flushed || this.stopped) return;
    this.ctx.log.warn({ node: this.id }, "lock node flushed (FLUSHALL/FLUSHDB/SWAPDB): reconciling");
    // What was read here while the console starts may be gone: the reconcile reads every key again.
    this.ctx.store.forgetReadsAtStart(this.index);
    this.reconcileOwed = true;
  }

  private cannotReadFlushCalls(reason: string): void {
    this.flushCallsUnreadable = true;
    if (this.flushCallsRefusalLogged) return;
    this.flushCallsRefusalLogged = true;
    this.ctx.log.warn({ node: this.id, err: reason }, "INFO commandstats unavailable: a FLUSHALL, FLUSHDB or SWAPDB on the node goes unnoticed until it reconnects");
  }

  /** Whether a node before this one in the set answers with this one's run id now: the same server. */
  private sameServerAsEarlier(): boolean {
    const runId = this.cluster ? null : this.run.runId;
    if (runId === null) return false;
    return (this.ctx.peers?.() ?? []).some((peer) => peer.index < this.index && peer.up && !peer.cluster && peer.run.runId === runId);
  }

  /** INFO server on every (re)connect: run id and uptime, so a restart is known at once, whatever the TTLs. */
  async readRunFacts(): Promise<void> {
    if (this.cluster) return this.readClusterRunFacts();
    let info: string | null;
    try {
      info = await this.serverInfo(this.reader);
    } catch (error) {
      // Not answered in time, or refused otherwise: the next reading tells.
      if (this.reader.status !== "ready") throw error;
      return;
    }
    if (info === null) return;
    // (Taken with the reading: the connection the INFO came over.)
    const server = remoteAddressOf(this.reader as Redis);
    const previousRunId = this.run.runId;
    const { facts, restarted, replaced } = nextRunFacts(this.run, runReading(info), Date.now());
    // (Before anything is taken from the reading: the bring-up that follows the subscriber's end reads it again.)
    if (restarted) this.refuseStaleSubscriber(facts.restartedAt!);
    this.run = facts;
    // Which nodes count may change with a run id: this one's, or a later one reaching the same server.
    if (facts.runId !== previousRunId) {
      this.syncCounted();
      // (A later node of the old run id counts again.)
      this.recountLaterPeers(previousRunId);
    }
    const before = this.serverAddress;
    if (server !== null) this.serverAddress = `${server.host}:${server.port}`;
    if (restarted) {
      this.ctx.log.warn({ node: this.id, uptimeSec: facts.uptimeSec, persistence: this.facts.appendonly }, "lock node restarted");
      if (!this.restartLosses.some((l) => l.server === null)) await this.drainPeers();
      this.noteRestart(facts, null);
    } else if (replaced && server !== null) {
      this.ctx.log.warn({ node: this.id, from: before, to: this.serverAddress }, "lock node is another server now (a failover's promoted replica)");
      this.ctx.onServerReplaced?.({ from: before, to: server, runIdBefore: previousRunId, runIdAfter: facts.runId });
    }
  }

  /**
   * A cluster's primaries, each by its own INFO server: a primary that restarted before a failover could happen
   * keeps its slots and comes back with what it persisted (without persistence, nothing; its replicas then
   * sync to that). A replica promoted in a failover is another server at another address, a baseline here (the
   * failover monitor compares what it had). Throws while the topology changes or a primary does not answer:
   * the bring-up tries again, and the reconcile never reads a restarted primary before its locks were noted.
   */
  private async readClusterRunFacts(): Promise<void> {
    // (Throws while the client has not caught up with the topology.)
    this.clusterNodes("primaries");
    // Every primary that serves slots, whatever its health: one back from a restart can still be flagged failed
    // for a while (the cluster clears the flag later), and its restart is what this is for.
    const primaries = servingShards(this.cluster?.topology.shards ?? []).flatMap((s) => (s.primary !== null ? [{ address: s.primary.address, slots: s.slots, online: s.primary.health === "online" }] : []));
    for (const { address, slots, online } of primaries) {
      const node = clusterNodeAt(this.reader as Cluster, address);
      if (node === undefined && online) throw new Error("the cluster's topology is changing; reading it again");
      let info: string | null;
      try {
        info = node === undefined ? null : await this.serverInfo(node);
      } catch (error) {
        // One flagged failed that does not answer is read when it does (its facts are kept meanwhile).
        if (online) throw error;
        continue;
      }
      if (info === null) {
        if (this.runFactsRefusalLogged) return;
        continue;
      }
      const { facts, restarted } = nextRunFacts(this.clusterRuns.get(address) ?? INITIAL_RUN_FACTS, runReading(info), Date.now());
      this.clusterRuns.set(address, facts);
      if (!restarted) continue;
      this.ctx.log.warn({ node: this.id, primary: address, uptimeSec: facts.uptimeSec }, "cluster primary restarted");
      this.noteRestart(facts, address, (resource) => slotIn(slots, keySlot(resource)));
    }
    // A primary that left (failed over, removed) is a baseline again should it come back.
    for (const address of [...this.clusterRuns.keys()]) if (!primaries.some((p) => p.address === address)) this.clusterRuns.delete(address);
    // The cluster's own run facts (its uptime, restart and restart hazard on the nodes panel and in /metrics) are
    // its youngest primary's: the one whose restart may have forgotten locks still valid.
    const now = Date.now();
    let youngest: NodeRunFacts | null = null;
    for (const facts of this.clusterRuns.values()) if (youngest === null || (uptimeMsAt(facts, now) ?? Infinity) < (uptimeMsAt(youngest, now) ?? Infinity)) youngest = facts;
    if (youngest !== null) this.run = youngest;
  }

  /** INFO server of `node`, null when refused (an ACL, a managed service): restarts then go unnoticed. Throws on anything else. */
  private async serverInfo(node: LockClient | Redis): Promise<string | null> {
    try {
      return await this.waitOn(() => node.info("server"));
    } catch (error) {
      if (!isCommandRefused(error)) throw error;
      if (!this.runFactsRefusalLogged) this.ctx.log.warn({ node: this.id, err: error.message }, "INFO server refused: a restart of the node goes unnoticed");
      this.runFactsRefusalLogged = true;
      return null;
    }
  }

  /**
   * Before a restarted node's locks are taken as what it held: the other nodes' notifications the console has not
   * read yet (a burst of releases it is still reading) are read first. A PING on a subscriber connection is
   * answered after every notification its node sent before it, so by then every change the other nodes made before
   * the restart was found is marked dirty; then the runtime's batches read them. A lock its holder released on the
   * other nodes then ended as released (this node is not read meanwhile: see `readInBatches`), and is not among
   * those the node held. Whether that release came just before the restart or just after cannot be told apart: the
   * holder was done with the lock either way, and a page for a loss nobody could act on is the worse mistake. One
   * still held elsewhere stays, and if this node came back without it, it was lost here. Waits DRAIN_MS at most (a
   * node that does not answer, a stream of changes that never lets up): what is read by then is what the check
   * goes by.
   */
  private async drainPeers(): Promise<void> {
    const peers = (this.ctx.peers?.() ?? []).filter((w) => w !== this && w.subscribedForReads);
    if (peers.length === 0 || this.ctx.drained === undefined) return;
    const until = Date.now() + DRAIN_MS;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, DRAIN_MS)));
    try {
      await Promise.race([Promise.allSettled(peers.map((w) => w.sub.ping())), late]);
    } finally {
      clearTimeout(timer);
    }
    await this.ctx.drained(until);
  }

  /**
   * A restart ends every connection to the server, but not at once on the console's side: the reader, with nothing
   * to read, sees its end and comes back at once, while the subscriber's socket may still hold the last
   * notifications the server sent before it died (a busy console reads them behind). Taken then, the locks the
   * server held would include those its last notifications ended, and their holders' releases would count as
   * losses. So the bring-up waits (throws, and is tried again) while the subscriber's connection is one to the
   * server's earlier run: read to its end, it closes, its ends are applied (see `applyEndsAtDrop`) and the new
   * connection brings the bring-up. Such a connection was made before the server started (known from whole seconds
   * of uptime, read off a clock the server updates ten times a second: up to 1.1 s earlier, or 1 s later, than
   * `startedAt`), or before the reader's connection to the earlier run ended. A connection the network left open
   * with no word from the dead server (its host gone) would never end: after DRAIN_MS it is dropped.
   */
  private refuseStaleSubscriber(startedAt: number): void {
    const made = this.subReadyAt;
    if (made >= startedAt - 1_100 && (made >= this.readerClosedAt || made >= startedAt + 1_000)) return;
    const now = Date.now();
    this.staleSubSince ??= now;
    if (now - this.staleSubSince >= DRAIN_MS) {
      this.ctx.log.warn({ node: this.id, waitedMs: now - this.staleSubSince }, "the node restarted and the watcher's subscriber connection to its earlier run is still open: dropping it");
      this.staleSubSince = null;
      (this.sub as Redis).disconnect(true);
    }
    throw new Error("the node restarted; the subscriber connection to its earlier run is still open, with notifications to read: waiting for it to end");
  }

  /**
   * Takes what the restarted server held (the locks `only` accepts), before any reading of it: this runs ahead of
   * the reconcile that reads it again. Its uptime is a difference of whole seconds: it started up to a second
   * after `restartedAt` says, and before now. Only a lock valid at the latest start it may have had counts as
   * lost (one that ran out within that second may have ended first).
   */
  private noteRestart(facts: NodeRunFacts, server: string | null, only?: (resource: string) => boolean): void {
    if (this.restartLosses.some((l) => l.server === server)) return;
    const now = Date.now();
    // Counted now, as the restart is seen: with TTLs shorter than the scrape interval the hazard is over before
    // the next scrape reads it (the persistence is the last read before the restart, as the hazard gauge's).
    if (restartRisk(facts, this.facts.appendonly === "yes", this.longestTtlMs, now)) this.ctx.events.emit("restart-hazard", { nodeId: this.id });
    const latestStart = Math.min(now, (facts.restartedAt ?? now) + 1_000);
    const before = this.ctx.store.heldOn(this.index, only);
    this.restartLosses.push({ server, before, restartedAt: latestStart });
    // Read again without them, they end as lost, not released.
    this.ctx.store.suspectLost(this.index, before, latestStart);
  }

  /**
   * The lock patterns changed (an operator's PUT /api/patterns): subscribe to the new keyspace channels
   * before dropping the old ones (no change falls between the two), then reconcile, which reads the keys the
   * new patterns bring in; the runtime drops the locks that no pattern covers any more.
   */
  async resubscribe(options: { retryRefused?: boolean } = {}): Promise<void> {
    // One at a time (a pattern change and the 30 s retry of refused patterns can overlap): each takes the
    // patterns in force when its turn comes, so the last to finish never writes back the patterns before a change.
    if (!(await this.resubscribeInTurn(options.retryRefused ?? false))) return;
    // Keys the new patterns bring in may have been read here by another node's reconcile before the new
    // channels were subscribed: this node's own reconcile reads every key again.
    this.ctx.store.forgetReadsAtStart(this.index);
    // A reconcile already reading took the patterns before the change, and a node not answering cannot be
    // read now: either way the new patterns' keys are read by the reconcile owed (see `recheckNotifications`).
    if (this.up && this.answering && this.reading === null) await this.reconcile();
    else this.reconcileOwed = true;
  }

  /** The subscriptions of `resubscribe`, after those before it; true when the node is to be read again. */
  private resubscribeInTurn(retryRefused: boolean): Promise<boolean> {
    const turn = this.resubscribeTurn.then(() => this.resubscribeNow(retryRefused));
    this.resubscribeTurn = turn.catch(() => false);
    return turn;
  }

  private async resubscribeNow(retryRefused: boolean): Promise<boolean> {
    if (this.stopped || this.sub.status !== "ready" || this.subscribedGeneration !== this.subGeneration) return false;
    const generation = this.subGeneration;
    const refusedBefore = refusalsText(this.refusals);
    const patterns = this.ctx.patterns();
    const wanted = patterns.map((p) => this.channelPrefix + p);
    const added = patterns.filter((p) => !this.subscribedChannels.includes(this.channelPrefix + p));
    // (A pattern that names the fair-lock companions, dropped, leaves the watch of them on.)
    const dropped = this.subscribedChannels.filter((c) => !wanted.includes(c) && c !== this.fairTimeoutsChannel);
    const channelRefusals = await this.subscribePatterns(added);
    const subscribed = patterns.filter((p) => !channelRefusals.some((r) => r.glob === p));
    // (Once every wanted pattern is subscribed: a notification is never skipped for a pattern not delivering yet.)
    this.overlaps = earlierOverlaps(subscribed);
    if (dropped.length > 0) await this.sub.punsubscribe(...dropped);
    this.subscribedChannels = subscribed.map((p) => this.channelPrefix + p);
    const keyRefusals = await this.keyRefusals(patterns, "keep");
    // Reconnected meanwhile: the connect subscribes and judges every pattern anew.
    if (this.subGeneration !== generation) return false;
    this.setRefusals(patterns, [...channelRefusals, ...keyRefusals]);
    // Tried again and still refused as before: nothing new to read.
    return !(retryRefused && refusalsText(this.refusals) === refusedBefore);
  }

  /**
   * Which of `globs` this node does not let the console's Redis user watch, before they become lock patterns
   * (`PUT /api/patterns`): the watcher subscribes to each pattern's keyspace channel (on a connection of its own,
   * dropped after) and reads a key each one matches, as it reads locks. Only refusals are reported: a node that
   * does not answer is not judged here (its watcher says what it refuses when it comes up), and `checked` says
   * so. Every command races `until` (epoch ms), the whole check's deadline: a frozen node (its port still takes
   * connections) would otherwise hold an operator's change for seconds per glob.
   */
  async tryPatterns(globs: readonly string[], until: number): Promise<PatternCheck> {
    const node = this.node.maskedUrl;
    if (globs.length === 0 || this.stopped) return { node, refusals: [], checked: true };
    if (!this.readable) return { node, refusals: [], checked: false };
    const refusals: PatternRefusal[] = [];
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new PastDeadline("the check's deadline passed")), Math.max(0, until - Date.now()))));
    late.catch(() => undefined);
    const inTime = <T>(command: Promise<T>): Promise<T> => {
      // (A command left behind settles later, unheard.)
      command.catch(() => undefined);
      return Promise.race([command, late]);
    };
    // Tried once (no retry, nor a new round of the sentinels when none answers): a node not reached is not judged,
    // and the change's answer does not wait on it.
    const options = { ...nodeClientOptions(this.ctx.timeoutMs), lazyConnect: true, enableAutoPipelining: false, autoResubscribe: false, retryStrategy: () => null, sentinelRetryStrategy: () => null, connectionName: "lockscope:access-check" };
    let first: Redis | undefined;
    if (this.cluster) {
      const primary = servedShards(this.cluster.topology.shards)[0]?.primary;
      if (primary) first = this.cluster.connectTo(primary.host, primary.port, options);
    } else {
      first = this.node.connect(options) as Redis;
    }
    let checked = true;
    try {
      if (first) {
        const check = first;
        check.on("error", () => undefined);
        try {
          await inTime(check.connect());
          for (const glob of globs) {
            const channel = this.channelPrefix + glob;
            await inTime(check.psubscribe(channel)).catch((error: unknown) => {
              if (error instanceof PastDeadline) throw error;
              if (isAccessRefused(error)) refusals.push(this.refusal(glob, "channel"));
              else checked = false;
            });
          }
        } catch (error) {
          if (error instanceof PastDeadline) throw error;
          // Not reachable now: not judged.
          checked = false;
        } finally {
          check.disconnect();
        }
      }
      const unjudged: string[] = [];
      refusals.push(...(await this.keyRefusals(globs, "skip", { inTime, unjudged })));
      if (unjudged.length > 0) checked = false;
    } catch (error) {
      if (!(error instanceof PastDeadline)) throw error;
      checked = false;
    } finally {
      clearTimeout(timer);
    }
    return { node, refusals, checked };
  }

  /**
   * Which of `globs` this node does not let the console's Redis user read: a key each one matches is read as locks
   * are (on a cluster, one in a slot a primary serves). A read that fails otherwise (a timeout, the node going
   * away) judges nothing, and `unjudged` says what then stands: `skip` reports nothing for the pattern (a
   * change's check: the node is not judged, and the glob is added to `check.unjudged`); `keep` keeps what this
   * node was last found to refuse for it (a pattern read as allowed on a slow moment would have its keys read, and
   * refused, by every reconcile); `throw` fails the call (the connect tries again). `check.inTime`: each read races
   * the check's deadline (what it throws passes through).
   */
  private async keyRefusals(
    globs: readonly string[],
    unjudged: "skip" | "keep" | "throw",
    check: { inTime?: <T>(command: Promise<T>) => Promise<T>; unjudged?: string[] } = {},
  ): Promise<PatternRefusal[]> {
    const refusals: PatternRefusal[] = [];
    const before = (glob: string) => (unjudged === "keep" ? this.refusals.filter((r) => r.glob === glob && r.refused === "keys") : []);
    for (const glob of globs) {
      const unserved = this.unserved;
      const key = globSamples(glob).find((k) => unserved.length === 0 || !slotIn(unserved, keySlot(k)));
      if (key === undefined) {
        refusals.push(...before(glob));
        continue;
      }
      // (As a batch is read, with or without scripts; not `readBatch`, whose refusal would judge the patterns again.)
      const read = this.readBatchOnce([key]);
      await (check.inTime ? check.inTime(read) : read).catch((error: unknown) => {
        if (error instanceof PastDeadline) throw error;
        if (isAccessRefused(error)) refusals.push(this.refusal(glob, "keys"));
        else if (unjudged === "throw") throw error;
        else {
          refusals.push(...before(glob));
          check.unjudged?.push(glob);
        }
      });
    }
    return refusals;
  }

  /**
   * Subscribes to the keyspace channels of `globs`, all in one command; where the node refuses it (one channel its
   * ACL user lacks refuses the command), one by one, leaving out the channels it refuses. Returns those.
   */
  private async subscribePatterns(globs: readonly string[]): Promise<PatternRefusal[]> {
    if (globs.length === 0) return [];
    try {
      await this.sub.psubscribe(...globs.map((p) => this.channelPrefix + p));
      return [];
    } catch (error) {
      if (!isAccessRefused(error)) throw error;
    }
    const refusals: PatternRefusal[] = [];
    for (const glob of globs) {
      const channel = this.channelPrefix + glob;
      try {
        await this.sub.psubscribe(channel);
      } catch (error) {
        if (!isAccessRefused(error)) throw error;
        refusals.push(this.refusal(glob, "channel"));
      }
    }
    return refusals;
  }

  /** From now on, the keys of the patterns `refusals` names are not watched here; said in the log when it changes. */
  private setRefusals(patterns: readonly string[], refusals: PatternRefusal[]): void {
    const changed = refusalsText(refusals) !== refusalsText(this.refusals);
    this.refusals = refusals;
    this.watchedMatch = refusals.length === 0 ? null : lockKeyMatcher(patterns.filter((p) => !refusals.some((r) => r.glob === p)));
    if (!changed) return;
    if (refusals.length === 0) this.ctx.log.info({ node: this.id }, "the node lets the console watch every lock pattern again");
    else {
      this.ctx.log.error(
        { node: this.id, refused: refusals.map((r) => ({ pattern: r.glob, rule: r.rule })) },
        "the node refuses the console's Redis user some lock patterns: their locks are not watched on this node until those rules are added to its ACL user",
      );
    }
    this.onChange();
  }

  /**
   * Finds every lock key on the node with batched reads, then drops what this node no longer holds.
   * Subscribed before it starts, so changes during the scan arrive as notifications and are read again.
   * A bare key name is read directly (a SCAN MATCH for it would walk the whole keyspace to find one key);
   * the globs share one SCAN: a single glob as its MATCH, several as one unfiltered walk checked against
   * all of them, so the default eight patterns cost one pass over the keyspace, not eight.
   */
  async reconcile(options: { periodic?: boolean; runFactsRead?: boolean } = {}): Promise<void> {
    // Whatever was owed is read now (with the patterns in force); owed again if this one fails.
    this.reconcileOwed = false;
    // On a cluster, a primary back from a restart is read here as soon as its slots are served again (or its
    // notifications found off, or at the periodic rescan), often before the periodic read of the run facts: its
    // restart is noted first, so that the locks it came back without end lost, not released.
    const runFacts = this.cluster && options.runFactsRead !== true ? () => this.readRunFacts() : () => Promise.resolve();
    // The periodic rescan of a node without notifications is how it is watched, not a gap: not marked.
    if (options.periodic) {
      return runFacts().then(() => this.readAllLockKeys({ keysRead: 0 })).then(
        () => {
          this.ttlsRead = true;
          return this.settleRestartLoss();
        },
        (error: unknown) => {
          this.reconcileOwed = true;
          throw error;
        },
      );
    }
    const progress = { since: Date.now(), keysRead: 0 };
    this.reading = progress;
    this.onChange();
    try {
      await runFacts();
      await this.readAllLockKeys(progress);
      this.ttlsRead = true;
      await this.settleRestartLoss();
    } catch (error) {
      this.reconcileOwed = true;
      throw error;
    } finally {
      if (this.reading === progress) {
        this.reading = null;
        this.onChange();
      }
    }
  }

  /** After a restart, once the node was read again: says which locks it came back without (see `LockStore.lostInRestart`). Never throws. */
  private async settleRestartLoss(): Promise<void> {
    const losses = this.restartLosses;
    if (losses.length === 0) return;
    // On a cluster with slots no primary serves (as far as it says: a restarted primary is flagged failed for a
    // while after it is back), the reconcile did not read their keys: the locks there would count as still held
    // as last read, and their loss go unsaid. Settled by the reconcile once every slot is served (the primary's
    // new connection brings one).
    if (this.unserved.length > 0) return;
    this.restartLosses = [];
    for (const loss of losses) {
      this.ctx.store.clearSuspects(this.index, loss.before);
      // How the server keeps its data now that it is back (the periodic read may not have come yet).
      const appendonly = loss.server === null ? await this.waitOn(() => this.readPersistence()).then(() => this.facts.appendonly, () => this.facts.appendonly) : await this.primaryAppendonly(loss.server);
      const why = appendonly === "no" ? "without an append-only file" : appendonly === "yes" ? "with an append-only file" : "";
      const lost = this.ctx.store.lostInRestart(this.index, loss.before, loss.restartedAt, why, Date.now(), loss.server ?? undefined);
      if (lost.length === 0) continue;
      // The lab's own locks (a lab fault kills a node on purpose) are told on their pages, but never page anyone.
      const counted = lost.filter((l) => !isLabResource(l.resource));
      const heldByQuorum = counted.filter((l) => l.wentOn).length;
      if (counted.length > 0) this.ctx.events.emit("lost-in-restart", { nodeId: this.id, gone: counted.length - heldByQuorum, heldByQuorum });
      this.ctx.log.error(
        { node: this.id, ...(loss.server === null ? {} : { primary: loss.server }), lost: lost.length, examples: lost.slice(0, 5).map((l) => l.resource), persistence: appendonly },
        "lock node restarted and came back without locks whose TTL had not run out: their holders may still think they hold them",
      );
    }
  }

  /** Whether a cluster primary keeps an append-only file (INFO persistence), null when it cannot be read. */
  private async primaryAppendonly(address: string): Promise<string | null> {
    const node = clusterNodeAt(this.reader as Cluster, address);
    if (node === undefined) return null;
    try {
      return appendonlyFromInfo(await this.waitOn(() => node.info("persistence")));
    } catch {
      return null;
    }
  }

  private async readAllLockKeys(progress: { keysRead: number }): Promise<void> {
    const seen = new Set<string>();
    const patterns = this.ctx.patterns().filter((p) => !this.refusals.some((r) => r.glob === p));
    const literals = patterns.filter((p) => !/[*?[\\]/.test(p));
    const globs = patterns.filter((p) => /[*?[\\]/.test(p));
    let waited = 0;
    // While the console starts, a key found is read on every node at once (`readEverywhere`), and a key
    // another node's SCAN read here already is skipped: each node's SCAN finds the keys in its own hash
    // order, so read node by node, every lock found at start was merged once per node, and partial until
    // the last one read it.
    const atStart = !this.ctx.store.watching && this.ctx.peers !== undefined;
    if (atStart) await this.peersSubscribed();
    // Every reading of this node the store has was taken while this node's watcher was subscribed (it never
    // dropped since the console started): the store's own record of what was read here stands in for the
    // set of keys seen, and nothing known here can have changed unnoticed (no second pass for "missing").
    const trusted = atStart && this.ctx.store.startReadsTrusted(this.index);
    // Keys to read, gathered over SCAN pages into full batches (late in a start-up most keys a page finds were
    // read already, and a command per page for the few left would cost more writes than reads).
    let toRead: string[] = [];
    const readFresh = async (keys: readonly string[], last = false) => {
      for (const key of keys) {
        if (!trusted && seen.has(key)) continue;
        // Read here already (another node's SCAN found it first, and read it on every node): a key this node
        // watches, as its reading here says, so it skips the patterns' match (two thirds of the keys the
        // three nodes' SCANs find at start).
        const readHere = atStart && this.ctx.store.readAtStart(key, this.index);
        if (!readHere && !this.watches(key)) continue;
        if (!trusted) seen.add(key);
        if (key.includes("\uFFFD")) this.checkTextName(key);
        if (readHere) progress.keysRead += 1;
        else toRead.push(key);
      }
      while (toRead.length >= RECONCILE_BATCH || (last && toRead.length > 0)) {
        const batch = toRead.length <= RECONCILE_BATCH ? toRead : toRead.slice(0, RECONCILE_BATCH);
        toRead = toRead.length <= RECONCILE_BATCH ? [] : toRead.slice(RECONCILE_BATCH);
        if (atStart && !this.ctx.store.watching) await this.readEverywhere(batch);
        else {
          const readings = await this.read(batch);
          const now = Date.now();
          for (const reading of readings) this.applyReading(reading, null, now, true);
        }
        progress.keysRead += batch.length;
        // Every lock found already held at start is recorded in the history: the first reconcile of more locks
        // than its queue holds waits for the database rather than dropping them (for a bounded time in all).
        // A later reconcile (a reconnect, a node watched by SCAN) never waits: the node's state comes first.
        if (!this.ctx.store.watching && waited < ROOM_WAIT_TOTAL_MS) {
          const room = this.ctx.store.history?.room();
          if (room) {
            const from = Date.now();
            await room;
            waited += Date.now() - from;
          }
        }
      }
    };
    // On a cluster, SCAN walks one node's keys: every primary is walked.
    for (const node of globs.length === 0 ? [] : this.cluster ? this.clusterNodes("primaries") : [this.reader]) {
      const only = globs.length === 1 ? (globs[0] as string) : null;
      let cursor = "0";
      do {
        const at = cursor;
        const [next, keys] = await this.waitOn(() => (only ? node.scan(at, "MATCH", only, "COUNT", SCAN_COUNT) : node.scan(at, "COUNT", SCAN_COUNT)));
        cursor = next;
        await readFresh(keys);
      } while (cursor !== "0");
    }
    // Read whether or not they exist: an absent key reads as gone, which is what the store needs to know (on a
    // cluster, those in slots a primary serves).
    await readFresh(literals.filter((key) => this.mayRead(key)), true);
    if (trusted) return;
    // Keys the store thinks this node holds that the scan did not return: read them once more (a key
    // deleted while we were away is absent now; one created during the scan is read as it is).
    const missing = await this.ctx.store.knownOn(this.index, (resource) => !seen.has(resource) && this.mayRead(resource));
    for (let i = 0; i < missing.length; i += READ_BATCH) {
      const readings = await this.read(missing.slice(i, i + READ_BATCH));
      const now = Date.now();
      for (const reading of readings) this.applyReading(reading, null, now);
    }
  }

  /**
   * Reads `keys` here and on every other node whose watcher has subscribed (a node not subscribed yet
   * would miss the changes between this read and its subscription; its own SCAN reads them) and applies
   * each key's readings as one merge. This node's read must succeed (else the reconcile fails and starts
   * over); another node that fails or answers past the deadline is left out, and its own SCAN reads
   * those keys.
   */
  private async readEverywhere(keys: readonly string[]): Promise<void> {
    const peers = (this.ctx.peers?.() ?? []).filter((w) => w !== this && w.subscribedForReads);
    // Readings of a key that something else applied while these were out (a notification's read, an end)
    // are older than what the store has: not applied, the key is read again on every node instead.
    const since = this.ctx.store.startApplies;
    const [own, ...others] = await Promise.all([this.inTurn(() => this.read(keys)), ...peers.map((w) => w.readForPeer(keys, this.ctx.deadlineMs))]);
    const now = Date.now();
    // One list for every key's samples (the store reads them, it keeps none of them): a list and a closure
    // per key were a tenth of what the start-up reconcile allocated.
    const samples: NodeSample[] = [];
    for (let k = 0; k < keys.length; k++) {
      const key = keys[k] as string;
      samples.length = 0;
      samples.push(this.sampleOf(own[k] ?? null, null, now));
      for (let p = 0; p < others.length; p++) {
        // (No reading: the key of a pattern that node refuses.)
        const readings = others[p];
        const reading = readings ? readings[k] : undefined;
        if (reading !== undefined) samples.push((peers[p] as NodeWatcher).sampleOf(reading, null, now));
      }
      if (this.ctx.store.applyUnlessStale(key, samples, since, now)) continue;
      for (const w of [this, ...peers]) if (w === this ? w.readable : w.subscribedForReads) w.dirty.set(key, w.dirty.get(key) ?? null);
    }
  }

  /**
   * Another node's start-up batch, read here in turn; null when this node is late. The deadline counts from
   * this node's turn: waiting behind the other watchers' batches on it (up to two, longer on a busy console) is
   * not the node being late, and a lock read on all three nodes was shown held by two until this node's own
   * SCAN came to it. A turn that does not come within a few deadlines (a node frozen in an earlier batch) is
   * given up on as well, and the batch is then not sent.
   */
  private readForPeer(keys: readonly string[], deadlineMs: number): Promise<Array<KeyReading | null | undefined> | null> {
    return new Promise((resolve) => {
      let answered = false;
      const answer = (readings: Array<KeyReading | null | undefined> | null) => {
        if (answered) return;
        answered = true;
        clearTimeout(turnTimer);
        cancelRead?.();
        resolve(readings);
      };
      let cancelRead: (() => void) | undefined;
      const turnTimer = setTimeout(() => answer(null), TURN_WAIT_DEADLINES * deadlineMs);
      this.inTurn(async () => {
        if (answered) return null;
        clearTimeout(turnTimer);
        // (Replies already in the socket at the deadline are read first: a stall of the console's own loop is not
        // this node being late.)
        cancelRead = setReplyDeadline(() => answer(null), deadlineMs);
        return this.readWatched(keys, (mine) => this.read(mine));
      }).then(answer, () => answer(null));
    });
  }

  /**
   * Waits (up to PEER_WAIT_MS) until every other node's watcher has subscribed, or is given up on for now:
   * the watchers connect together at start, and a key read before a node subscribes is read there again
   * by that node's own SCAN, its lock shown held by fewer nodes meanwhile.
   */
  private async peersSubscribed(): Promise<void> {
    const until = Date.now() + PEER_WAIT_MS;
    const waiting = () => (this.ctx.peers?.() ?? []).some((w) => w !== this && !w.subscribedForReads && !w.settled);
    while (waiting() && Date.now() < until && !this.stopped) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  /**
   * Subscribed to the lock keys' notifications (reading them or watching), and answering without a batch
   * still out: its node may be read for others (a frozen node would hold every other node's batches up).
   */
  get subscribedForReads(): boolean {
    return (
      (this.reading !== null || this.up) &&
      this.sub.status === "ready" &&
      this.subscribedGeneration === this.subGeneration &&
      this.readable &&
      this.answering &&
      !this.busy
    );
  }

  /**
   * Runs a start-up read after the start-up reads before it on this node have answered. Every watcher's
   * reconcile reads its keys on all the nodes at once (`readEverywhere`), so without a turn a node had up to
   * three batches queued and other clients' commands waited behind all of them (node PING p99 5.5 to 7.8 ms
   * at a million keys, against 4.9 to 6.2 ms in turn, runs alternated on one machine).
   */
  private inTurn<T>(command: () => Promise<T>): Promise<T> {
    const run = this.turn.then(command);
    this.turn = run.catch(() => undefined);
    return run;
  }

  /** One reading decoded by its format into the sample the store merges: the fingerprint is the value voted on. */
  sampleOf(reading: KeyReading | null, cause: EndCause, now = Date.now()): NodeSample {
    if (reading === null) return { node: this.index, reading: null, value: null, expiry: Number.NaN, cause };
    this.decodeContext.now = now;
    const decoded = decodeReading(reading, this.decodeContext);
    if (decoded !== null && Number.isFinite(decoded.keyExpiresAt)) {
      const ttl = decoded.keyExpiresAt - now;
      if (ttl > this.longestTtlMs) this.longestTtlMs = Math.round(ttl);
    }
    if (decoded === null) return { node: this.index, reading: null, value: null, expiry: Number.NaN, cause };
    const sample: NodeSample = { node: this.index, reading: decoded, value: decoded.fingerprint, expiry: decoded.expiresAt, cause };
    // The node's clock moved on the console's lately: a TTL end read before may differ by that much.
    const shift = this.clock.recentShift(now);
    if (shift > 0) sample.slack = EXTEND_SLACK_MS + shift;
    return sample;
  }

  /**
   * The cluster's nodes as the cluster client reaches them, as the topology names them: every node that
   * serves slots (primaries and their replicas) or the primaries alone, those online. Throws while the
   * client has not caught up with a change: the bring-up tries again a moment later.
   */
  private clusterNodes(which: "all" | "primaries"): Redis[] {
    const client = this.reader as Cluster;
    const members = servingShards(this.cluster?.topology.shards ?? []).flatMap((s) => (which === "all" ? [s.primary, ...s.replicas] : [s.primary]));
    const wanted = members.filter((m): m is ClusterMember => m !== null && m.health === "online").map((m) => m.address);
    const nodes = wanted.map((a) => clusterNodeAt(client, a)).filter((n): n is Redis => n !== undefined);
    if (wanted.length === 0 || nodes.length < wanted.length) {
      client.refreshSlotsCache();
      throw new Error("the cluster's topology is changing; reading it again");
    }
    return nodes;
  }

  /** Reads keys on this node: the formats' batched script where scripting works, MULTI where it does not. */
  /**
   * Reads a batch of dirty keys: `null` for a key whose latest notification here was an end (gone, not
   * read), else the key's reading.
   */
  async readDirty(keys: readonly string[]): Promise<Array<KeyReading | null | undefined>> {
    return this.readWatched(keys, (mine) => this.readDirtyWatched(mine));
  }

  /**
   * Reads with `read` the keys this node may be read for, and gives no reading (undefined) for the others: the keys
   * of the patterns it refuses the console (see `refusals`), which another node may allow, and on a cluster those
   * in slots no primary serves (see `followUnserved`: kept as last read). A batch is every node's (the keys
   * changed anywhere, the locks probed everywhere: a lock whose TTL ran out, one force-released), and one key that
   * cannot be read fails the whole batch: read, it would fail here at every try, and every other key with it.
   */
  private async readWatched<T>(keys: readonly string[], read: (keys: readonly string[]) => Promise<T[]>): Promise<Array<T | undefined>> {
    if (this.watchedMatch === null && this.unserved.length === 0) return read(keys);
    const readable = keys.map((key) => this.mayRead(key));
    const mine = keys.filter((_, i) => readable[i]);
    if (mine.length === keys.length) return read(keys);
    const readings = await read(mine);
    let next = 0;
    return keys.map((_, i) => (readable[i] ? readings[next++] : undefined));
  }

  private async readDirtyWatched(keys: readonly string[]): Promise<Array<KeyReading | null>> {
    if (this.ended.size === 0) return this.read(keys);
    if (this.cluster) return this.readClusterDirty(keys);
    let ends = 0;
    const gone = keys.map((key) => this.ended.has(key) && ++ends > 0);
    // A batch that covers every end takes the map itself (see `LockStore.changed`).
    if (ends === this.ended.size) {
      this.endsInFlight = this.ended;
      this.ended = new Map();
    } else {
      const taken = new Map<string, EndCause>();
      for (let i = 0; i < keys.length; i++) {
        if (!gone[i]) continue;
        const key = keys[i] as string;
        taken.set(key, this.ended.get(key) ?? null);
        this.ended.delete(key);
      }
      this.endsInFlight = taken;
    }
    const readings = await this.read(keys.filter((_, i) => !gone[i]));
    let next = 0;
    return gone.map((isGone) => (isGone ? null : (readings[next++] as KeyReading)));
  }

  /**
   * A cluster's batch: every key is read (see `ended`), and the ends among them are in flight while it is out, for
   * a drop meanwhile to apply (see `applyEndsAtDrop`). Read, the readings speak for them; not read (their primary
   * went away mid-batch), they stand as the primary gave them, for the next batch or the drop.
   */
  private async readClusterDirty(keys: readonly string[]): Promise<KeyReading[]> {
    const taken = new Map<string, EndCause>();
    for (const key of keys) {
      const cause = this.ended.get(key);
      if (cause === undefined) continue;
      taken.set(key, cause);
      this.ended.delete(key);
    }
    this.endsInFlight = taken;
    try {
      return await this.read(keys);
    } catch (error) {
      // (A notification of the key since took it out of `taken`; a drop meanwhile applied them already.)
      if (this.endsInFlight === taken) for (const [key, cause] of taken) if (!this.ended.has(key)) this.ended.set(key, cause);
      throw error;
    } finally {
      if (this.endsInFlight === taken) this.endsInFlight = new Map();
    }
  }

  async read(keys: readonly string[]): Promise<KeyReading[]> {
    if (keys.length === 0) return [];
    // A client sends a command again when its connection drops (see `connectionDrops`). A node that restarted empty
    // answers that the keys it forgot are gone, before the bring-up's restart check has taken what it held (the locks
    // lost in the restart would end as released), and a failover's promoted replica answers before the failover was
    // compared. So a read out across a drop of the reader is no node's word: it fails, and its keys are read again
    // once the bring-up has checked for a restart and reconciled (the runtime owes them: see `readInBatches`; a
    // reconcile fails, and the bring-up tries again). The ends announced before the drop were applied at it.
    const drops = connectionDrops(this.reader);
    // On a cluster, one batch per hash slot.
    const readings = this.cluster ? await readInSlots(keys, (batch) => this.readBatch(batch)) : await this.readBatch(keys);
    if (connectionDrops(this.reader) !== drops) throw new ReadAcrossDrop("the reader's connection dropped while the read was out: the keys are read again after the bring-up");
    return readings;
  }

  private async readBatch(keys: readonly string[]): Promise<KeyReading[]> {
    try {
      return await this.readBatchOnce(keys);
    } catch (error) {
      if (isAccessRefused(error)) this.judgeAgain();
      throw error;
    }
  }

  /**
   * A read refused a key the node was not known to refuse (a pattern's key rule taken away from the console's ACL
   * user, which Redis does not tell its subscribers): the patterns are judged again at once rather than at the next
   * 30 s retry, so that the refused pattern's keys are left out of this node's reads (each batch naming one
   * would fail here, and every other key in it).
   */
  private judgeAgain(): void {
    if (this.judging) return;
    this.judging = true;
    void this.resubscribe({ retryRefused: true })
      .catch(() => undefined)
      .finally(() => {
        this.judging = false;
      });
  }

  private readBatchOnce(keys: readonly string[]): Promise<KeyReading[]> {
    return readLockKeysAsAllowed(this.reader, keys, { refusals: this.readRefusals, clock: this.clock, send: (read) => this.waitOn(read), onRefused: this.onReadRefused });
  }

  private readonly onReadRefused = (what: keyof ReadRefusals, error: Error): void => {
    const instead = what === "scripts" ? "scripts refused: reading lock keys with MULTI instead" : "MULTI refused too: reading lock keys with plain pipelined commands";
    this.ctx.log.warn({ node: this.id, err: error.message }, instead);
  };

  /** `found`: read by the reconcile's SCAN (see `LockStore.apply`). */
  private applyReading(reading: KeyReading, cause: EndCause, now: number, found = false): void {
    this.ctx.store.apply(reading.key, [this.sampleOf(reading, cause, now)], now, found);
  }

  /** Latency, clock skew (TIME), persistence and uptime, for the nodes panel. */
  async refreshFacts(withInfo: boolean): Promise<void> {
    if (!this.readable) {
      this.latencyMs = null;
      return;
    }
    try {
      const sent = Date.now();
      const t0 = performance.now();
      const [seconds, micros] = await this.waitOn(() => this.reader.time());
      const rtt = performance.now() - t0;
      // A reply waits in the socket until the console's event loop gets to it, so one sample is the node's
      // round trip plus whatever the console was busy with. The least of the recent samples is the node's
      // own round trip (the console's delay comes and goes; the network's does not).
      this.rtts.push(rtt);
      if (this.rtts.length > 6) this.rtts.shift();
      this.latencyMs = Math.round(Math.min(...this.rtts) * 100) / 100;
      const nodeMs = Number(seconds) * 1000 + Number(micros) / 1000;
      this.facts.skewMs = Math.round(nodeMs - (sent + rtt / 2));
      // The run facts are read every few rounds, and at every round until they are known (a node that was
      // not up yet at the first one).
      if (withInfo || this.facts.appendonly === null) {
        await this.readRunFacts();
        await this.readPersistence();
      }
      // Patterns the node refused: allowed since (an operator added the rules), they are watched from now on.
      if (withInfo && this.refusals.length > 0 && this.up) await this.resubscribe({ retryRefused: true });
    } catch {
      // Unreachable for a moment: the connection's own events mark the node down.
    }
  }

  /** How the node keeps its data: `appendonly` and `save` by CONFIG, or whether AOF is on by INFO where CONFIG is refused. */
  private async readPersistence(): Promise<void> {
    if (this.notifications !== "unavailable") {
      try {
        const aof = (await this.reader.config("GET", "appendonly"));
        const save = (await this.reader.config("GET", "save"));
        this.facts.appendonly = Array.isArray(aof) && typeof aof[1] === "string" ? aof[1] : null;
        this.facts.save = Array.isArray(save) && typeof save[1] === "string" ? save[1] : null;
      } catch {
        // CONFIG refused: INFO persistence still says whether AOF is on.
      }
    }
    if (this.facts.appendonly === null) {
      this.facts.appendonly = appendonlyFromInfo(await this.reader.info("persistence"));
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.cluster?.topology.off("change", this.onTopology);
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await Promise.allSettled([this.sub.quit(), this.reader.quit()]);
    this.sub.disconnect();
    this.reader.disconnect();
  }
}

/**
 * The node's reply when a probe's write was refused (the ACL, a replica's READONLY), as it is shown; null for any
 * other failure (a timeout, a dropped connection, a cluster busy failing over or a node loading), which says
 * nothing of the notification flags. A Redis Cluster client reports the reply inside its own error once it has
 * used up its tries (`replyOf`): after a failover's CLUSTERDOWN replies, the ACL's NOPERM comes so.
 */
export function probeRefusal(error: unknown): string | null {
  const reply = replyOf(error);
  return reply === null || /^(CLUSTERDOWN|TRYAGAIN|MOVED|ASK|LOADING|BUSY|MASTERDOWN)\b/.test(reply) ? null : reply;
}
