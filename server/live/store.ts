import "server-only";
import { formatByName, keptFormat, keptWaiters, type LockScope } from "@/lib/locks/formats";
import { keptView, type FormatView } from "@/lib/locks/formats/view";
import type { LockSummary } from "@/lib/locks/groups";
import { storedText } from "@/lib/history/stored-text";
import { ColdLocks, type ColdLock } from "@/lib/locks/cold-locks";
import { decodeHolder } from "@/lib/locks/merge";
import { KeyBits } from "@/lib/locks/key-bits";
import { ShardedMap } from "@/lib/locks/sharded-map";
import {
  adoptFirstSeen,
  adoptsFirstSeen,
  forceHintApplies,
  forceReleaseNoted,
  holdsValue,
  newLockStep,
  probeAgainAt,
  readSamples,
  reduceLock,
  splitVoteHolders,
  type LockContext,
  type LockEffect,
  LockRecord,
  lockSlots,
  type NodeSample,
} from "@/lib/locks/reducer";
import type { TimeSlots } from "@/lib/locks/time-slots";
import type { SeenLock } from "@/lib/locks/failover";
import { isLive, type Lock, type LockDetail, type LockLoss, type LockState } from "@/lib/locks/types";
import { BucketCounter } from "@/lib/locks/window";
import { lockValueId } from "@lockscope/redlock";
import type { ContentionEvent, GaveUpEvent } from "@lockscope/redlock";
import type { HistorySink } from "../history/recorder";
import { ContentionTracker } from "./contention";
import type { LiveEvents } from "./events";
import { ExpiryWheel, UNSCHEDULED } from "./expiry-wheel";
import { forceReleaseDetail, ForceHints, type ForceReleaseInfo } from "./force-hints";
import { Retention } from "./retention";
import { SafetyLedger, type LockSafetyFacts } from "./safety-ledger";
import { Timelines } from "./timeline";

export { SETTLE_MS, type NodeSample } from "@/lib/locks/reducer";
export { LINGER_MS, RECENT_CAP, RECENT_TTL_MS } from "./retention";
export { TIMELINE_CAP } from "./timeline";

const NEVER_SENT = -(2 ** 30);
/** Losses (see `LockStore.losses`) are listed this long, and at most this many. */
export const LOSSES_KEPT_MS = 24 * 3_600_000;
export const MAX_LOSSES = 1_000;
/** The last node a bit of a small integer stands for (the start-up bookkeeping's masks: see `readAtStart`). */
const MAX_BIT_NODE = 30;

/**
 * One lock: its state, which the reducer steps (`LockRecord`, lib/locks/reducer.ts), and what the store keeps
 * beside it. One object per lock and nothing else per lock (100,000 locks and more).
 */
class Entry extends LockRecord {
  /**
   * When this lock was last sent to the streams (per-lock coalescing), in ms since the store was made (the first
   * drain's time). `NEVER_SENT` before the first time. Like the numbers below, kept in the lock's slot of doubles
   * (`LockRecord.extra`), not in a field of the entry.
   */
  get lastSentAt(): number {
    const at = this.extra(LAST_SENT_AT);
    return Number.isNaN(at) ? NEVER_SENT : at;
  }

  set lastSentAt(at: number) {
    this.setExtra(LAST_SENT_AT, at);
  }

  /** Its bucket in the expiry wheel (`UNSCHEDULED`: none). */
  get wheelAt(): number {
    const at = this.extra(WHEEL_AT);
    return Number.isNaN(at) ? UNSCHEDULED : at;
  }

  set wheelAt(at: number) {
    this.setExtra(WHEEL_AT, at);
  }

  /** While the console starts: the store's `startApplies` at its last apply (see `appliedAtStartSince`). */
  get startApply(): number {
    return this.extra(START_APPLY) || 0;
  }

  set startApply(count: number) {
    this.setExtra(START_APPLY, count);
  }

  /** What the safety ledger last counted it as (`SafetyLedger.update`). */
  get safety(): number {
    return this.extra(SAFETY_COUNTED) || 0;
  }

  set safety(flags: number) {
    this.setExtra(SAFETY_COUNTED, flags);
  }
}

/** `Entry`'s numbers in its slot (`LockRecord.extra`), below `EXTRA_NUMBERS` (lib/locks/reducer.ts). */
const LAST_SENT_AT = 0;
const WHEEL_AT = 1;
const START_APPLY = 2;
const SAFETY_COUNTED = 3;

/**
 * What a node held before it may have lost it (see `LockStore.suspectLost`): each lock's value there and its
 * expiry. `consume`: each lock's suspicion ends at the node's first reading of it (a failover's, made for the
 * purpose); else it lasts until cleared (a restart's, which the restart's own report reads afterwards).
 */
interface LostSuspects {
  node: number;
  held: Map<string, { value: string; expiresAt: number }>;
  since: number;
  consume: boolean;
}

/** Kept up to date with every change: reading them costs nothing, whatever the number of locks. */
export interface LockCounts {
  byState: Record<LockState, number>;
  held: number;
}


/** Whether a stream follows the lock `resource` of `deployment` (see `StreamHub.wantedLocks`). */
export type WantedLocks = (resource: string, deployment: string) => boolean;

export interface DrainedChanges {
  upserts: Lock[];
  removed: string[];
  contention: Array<{ resource: string } & Lock["contention"]>;
}

/**
 * Live locks from which on the store keeps those nothing happens to cold (see `ColdLocks`): below it, a full
 * collection of the lock table is short, and every lock keeps its object.
 */
export const COLD_ABOVE = 20_000;
/** Hot locks looked at per tick (every 10 ms), at most, for keeping cold; and at most this long (ms) of the tick. */
const COLD_LOOKS_PER_TICK = 2_000;
const COLD_LOOK_MS = 2;
/**
 * After a round of looks over every hot lock that moved fewer than `COLD_FEW` cold (the hot ones are the locks in
 * use, nearly all), the next round waits this long (ms).
 */
const COLD_REST_MS = 1_000;
const COLD_FEW = 1_000;
/** A lock is kept cold only while its next wake (its expiry, say) is further than this (ms) ... */
const COLD_WAKE_BEYOND_MS = 30_000;
/** ... and it is warmed this long (ms) before it. */
const WARM_AHEAD_MS = 5_000;
/**
 * Past this many locks, a change that visits many of them at once (a node going down or coming back, a watcher's gap)
 * goes on in slices of `SWEEP_SLICE_MS`, one each tick (see `sweep`).
 */
const SWEEP_AT_ONCE = 20_000;
const SWEEP_SLICE_MS = 4;
/** A pass over every lock (see `passOverLocks`) that has not ended after this long (ms) no longer holds locks warm. */
const PASS_HOLDS_MS = 5 * 60_000;
/** A cold lock's code: its scope's index here, plus `LEADS` when the value it holds is also its leading one. */
const SCOPES: readonly LockScope[] = ["quorum", "single"];
const LEADS = 4;
const scopeOf = (code: number): LockScope => SCOPES[code & 3] ?? "quorum";

/**
 * A pass over every lock that yields between steps (a metrics scrape, the grouped view's figures): the cold locks
 * first, by record, then the hot ones. While one runs, no lock goes cold; a cold lock warmed behind it (or once it
 * is among the hot) is in `skip`, so that it is not visited twice.
 */
interface Pass {
  visited: number;
  hot: boolean;
  skip: Set<string>;
  startedAt: number;
}

/**
 * A change that concerns many locks at once, visiting every lock `which` accepts (read through `coldView` for a cold
 * one: it is warmed only when accepted) with `visit`. `merge`: it merges them again with the nodes counted now (any
 * later one does as well, so one waiting takes the next's locks too); otherwise it adds what happened at its time.
 */
interface Sweep {
  entries: Generator<Entry | null>;
  started: boolean;
  merge: boolean;
  which: (entry: Entry) => boolean;
  visit: (entry: Entry, now: number) => void;
}

const emptyCounts = (): Record<LockState, number> => ({ held: 0, partial: 0, elapsed: 0, released: 0, expired: 0, "force-released": 0, lost: 0 });

/**
 * Every lock the watchers see, merged across nodes, with its timeline. All mutation goes through
 * `apply` (new samples), `setNodeUp`, `tick` (time passing) and the telemetry hooks; the streams drain the
 * changed locks with `drain`, at most one message per lock per coalescing window. What happens to a lock is
 * decided by the reducer (lib/locks/reducer.ts); the store keeps the locks, applies what the reducer says
 * happened, and delegates timers (`expiry-wheel.ts`), ended locks (`retention.ts`), force-release hints
 * (`force-hints.ts`) and timelines (`timeline.ts`).
 */
export class LockStore {
  readonly nodeIds: readonly string[];
  readonly quorum: number;
  /** The deployment these nodes are, named on every lock this store builds and every event it records. */
  get deployment(): string {
    return this.timelines.deployment;
  }

  set deployment(name: string) {
    this.timelines.deployment = name;
  }

  private readonly nodeUp: boolean[];
  private readonly live = new ShardedMap<Entry>();
  /**
   * Locks held that nothing has happened to since the console found them (a million per-entity locks, say), kept
   * without an object each (see `ColdLocks`) once the store holds `coldAbove` locks or more; warmed back into
   * `live` (an `Entry`) by anything that happens to them. `coldView` reads them one at a time.
   */
  private readonly cold = new ColdLocks();
  private readonly coldView: Entry;
  private readonly warmed: ColdLock = { value: "", slot: -1, code: 0, wakeAt: 0 };
  /** Where the look for locks to keep cold is in `live` (it goes round). */
  private coldCursor: Iterator<Entry> | null = null;
  /** Locks moved cold in the look's round so far; and until when (epoch ms) the next round waits (see `keepSomeCold`). */
  private coldMoved = 0;
  private coldRestUntil = Number.NEGATIVE_INFINITY;
  private readonly passes = new Set<Pass>();
  /** Changes of many locks still going on, oldest first (see `sweep`). */
  private readonly sweeps: Sweep[] = [];
  /** Ended locks kept for their pages; a lock no longer kept there is gone for good (its slot goes back). */
  private readonly ended = new Retention<Entry>((entry) => entry.dispose());
  /** Every lock's numbers, a slot each (see `LockRecord`): given back when a lock is gone for good. */
  private readonly slots: TimeSlots;
  /**
   * Locks to send. Like the other buffers of pending keys that fill and empty many times a second (the
   * watchers' `dirty` and `ended`, the first-seen queue), it is replaced by a fresh set when it is emptied
   * rather than emptied key by key: V8 gives a map or set that lives long (in the old generation) each new
   * table it grows or shrinks into in the old generation too, so a long-lived buffer turned over 5,000 times
   * a second filled the old generation with dead tables and brought a full collection every few seconds. A
   * fresh one's tables are young, and die young.
   */
  private changed = new Set<string>();
  private removed = new Set<string>();
  private contentionChanged = new Set<string>();
  /** Locks whose nodes disagree, waiting for the rest of a multi-node write (checked every tick). */
  private readonly settling = new Set<string>();
  private readonly wheel = new ExpiryWheel((resource) => this.live.get(resource));
  /** What `Entry.lastSentAt` counts from: the first `drain`'s time (the store reads no clock of its own there). */
  private origin: number | null = null;
  private readonly byState = emptyCounts();
  private readonly ledger = new SafetyLedger();
  private readonly forceHints = new ForceHints();
  /** Locks nodes lost while their TTL ran, newest last (see `losses`). */
  private lossLog: Array<Omit<LockLoss, "deployment">> = [];
  /** Copies a node may have lost (a restart, a failover), until that node is read: see `suspectLost`. */
  private lostSuspects: LostSuspects[] = [];
  private suspectsPrunedAt = Number.NEGATIVE_INFINITY;
  private readonly timelines = new Timelines();
  /** What every lock's step shares (the nodes counted change as the console starts). */
  private readonly context: LockContext;
  /** See `patternsWidened`. */
  private widened: ((resource: string) => boolean) | null = null;
  /** Locks found by a reconcile after the patterns brought them in, not yet shown (settling): see `coveredByPatterns`. */
  private readonly coveredNow = new Set<string>();
  /** One step's outcome, reused for every step (nothing is allocated per lock for it). */
  private readonly step = newLockStep();
  readonly contention = new ContentionTracker();
  readonly acquisitions = new BucketCounter(1_000, 10);
  readonly expirations = new BucketCounter(1_000, 10);
  /**
   * False until every node's first reconcile is done: locks found until then were already held, and every
   * node read so far counts (a node whose watcher is not marked up yet is still starting, not down: counting
   * it out would make every lock "partial" for a moment, one node at a time). Set true once; then the nodes'
   * real state counts and every lock is merged again.
   */
  get watching(): boolean {
    return this.context.watching;
  }

  set watching(on: boolean) {
    if (on === this.context.watching) return;
    this.context.watching = on;
    // Every node counted: the merge's view while the console is starting.
    this.context.counted = on ? this.nodeUp : this.allNodes;
    if (!on) return;
    this.goneAtStart = new Map();
    this.readsAtStart = new KeyBits();
    const now = Date.now();
    // Only the nodes up count now: every lock is merged again, unless every node is up (nothing changes).
    if (this.nodeUp.every(Boolean)) return;
    this.sweep(true, () => true, (entry, at) => this.recompute(entry, at, false), now);
  }

  // ---- while the console starts (see `NodeWatcher.reconcile`) -------------------------------------------
  // Nodes are bits of small integers kept on each lock: past node 30, nothing is recorded (and nothing skipped).

  /** Node `node`'s readings applied since the console started may be stale (its watcher dropped, bit i: node i). */
  private startReadsVoid = 0;
  /** Applies counted while the console starts (each stamps its lock with the count: see `appliedAtStartSince`). */
  private startApplyCount = 0;
  /** Keys applied as gone on every node while the console starts, with no lock to stamp: their stamps. */
  private goneAtStart = new Map<string, number>();
  /**
   * The nodes (bit i: node i) whose reading of each lock was applied while the console starts (see `readAtStart`):
   * every node's SCAN asks for every key it finds (three million asks for a million locks on three nodes), which
   * this table answers several times faster than the lock map would.
   */
  private readsAtStart = new KeyBits();

  /** Whether every reading of `node` applied so far was taken while its watcher stayed subscribed. */
  startReadsTrusted(node: number): boolean {
    return !this.context.watching && node <= MAX_BIT_NODE && (this.startReadsVoid & (1 << node)) === 0;
  }

  /**
   * Whether node `node`'s reading of `resource` was applied while the console starts, and can be trusted: its
   * SCAN then skips the key. Always false once the console watches.
   */
  readAtStart(resource: string, node: number): boolean {
    return this.startReadsTrusted(node) && (this.readsAtStart.get(resource) & (1 << node)) !== 0;
  }

  /** A node's connection dropped (or its subscriptions changed) while the console started: see `startReadsTrusted`. */
  forgetReadsAtStart(node: number): void {
    if (node <= MAX_BIT_NODE) this.startReadsVoid |= 1 << node;
  }

  /** The count a read sent now compares with (`appliedAtStartSince`). */
  get startApplies(): number {
    return this.startApplyCount;
  }

  /**
   * Whether readings of `resource` were applied after `since` (a `startApplies` taken before a read was sent):
   * that read is older than what the store has. Always false once the console watches.
   */
  appliedAtStartSince(resource: string, since: number): boolean {
    // (A lock kept cold keeps its stamp in its slot: read through `coldView`.)
    return this.staleAtStart(this.peek(resource), resource, since);
  }

  private staleAtStart(entry: Entry | undefined, resource: string, since: number): boolean {
    if (this.context.watching) return false;
    return (entry?.startApply ?? this.goneAtStart.get(resource) ?? 0) > since;
  }

  private readonly allNodes: readonly boolean[];
  /** Called with resources whose TTL ran out long ago and should be read again. */
  onProbe: (resources: string[]) => void = () => {};
  /** The operator's scope declaration for a key (from the lock patterns); null where none is declared. */
  declaredScope: (resource: string) => LockScope | null = () => null;
  /**
   * Whether a key is a lock under the patterns in force (set by the runtime). A reading of a key no pattern
   * covers any more (a read sent before a pattern change answers after `retain`) makes no lock: nothing would
   * ever end it.
   */
  covers: (resource: string) => boolean = () => true;

  /**
   * Where every timeline entry is also recorded, for the lock history in PostgreSQL (null without one). It
   * only queues: the live view never waits for the database.
   */
  get history(): HistorySink | null {
    return this.timelines.history;
  }

  set history(sink: HistorySink | null) {
    this.timelines.history = sink;
  }

  /**
   * Told of every foreign lock value acquired or extended (engine values carry their own acquisition time),
   * so that the consoles can share when it was first seen: see `server/live/first-seen.ts`.
   */
  firstSeen: ((resource: string, token: string, seenAt: number, ttlMs: number | null, notBefore?: number) => void) | null = null;
  /**
   * Told when a lock joins the list (its first state) and when it leaves it (ended and gone, or no pattern
   * covers it any more): what the grouped view keeps its groups' orders with (`server/live/groups.ts`).
   */
  onListed: ((resource: string, listed: boolean) => void) | null = null;

  /**
   * `coldAbove`: from how many locks on the store keeps those nothing happens to cold (`COLD_ABOVE`; Infinity:
   * never). `sweepAtOnce`: up to how many locks a change of many is made at once (`SWEEP_AT_ONCE`; see `sweep`).
   */
  constructor(
    nodeIds: readonly string[],
    quorum: number,
    private readonly events: LiveEvents,
    private readonly coldAbove = COLD_ABOVE,
    private readonly sweepAtOnce = SWEEP_AT_ONCE,
  ) {
    this.nodeIds = nodeIds;
    this.quorum = quorum;
    this.slots = lockSlots(nodeIds.length);
    this.coldView = new Entry("", nodeIds.length, null, this.slots);
    this.coldView.dispose();
    this.nodeUp = nodeIds.map(() => false);
    this.allNodes = nodeIds.map(() => true);
    this.context = {
      counted: this.allNodes,
      quorum,
      nodes: nodeIds.length,
      watching: false,
      declaredScope: (resource) => this.declaredScope(resource),
      coveredByPatterns: (lock) => this.coveredNow.size > 0 && this.coveredNow.has((lock as Entry).resource),
    };
  }

  /**
   * The first-seen time the consoles agreed on for `token` (the first console's sighting, recorded on the
   * nodes): the lock's age counts from there on every console, whichever saw it first by its own clock.
   */
  adoptFirstSeen(resource: string, token: string, at: number): void {
    // (Every lock found at start is told the time agreed, nearly always its own: a cold one is warmed only to change.)
    const seen = this.peek(resource);
    if (seen === undefined || !adoptsFirstSeen(seen, token, at)) return;
    const entry = this.find(resource);
    if (entry && adoptFirstSeen(entry, token, at)) {
      this.ledger.update(entry);
      this.changed.add(resource);
    }
  }

  // ---- reading -------------------------------------------------------------------------------------

  list(now = Date.now()): Lock[] {
    const out: Lock[] = [];
    for (const entry of this.everyLock()) if (entry.state !== null) out.push(this.build(entry, now));
    return out;
  }



  /** Live resources in the list (for a snapshot: built lazily, part by part). */
  resources(): string[] {
    const out: string[] = [];
    for (const entry of this.everyLock()) if (entry.state !== null) out.push(entry.resource);
    return out;
  }

  /**
   * Every listed lock's few fields for grouping, search and sort (`server/live/groups.ts`), read straight from
   * the entries: no `Lock` is built, no format view decoded (a million locks per request). `visit` gets the
   * same object each time, refilled: it copies what it keeps.
   */
  summaries(visit: (summary: Readonly<LockSummary>) => void, now = Date.now()): void {
    const summary = emptySummary();
    for (const entry of this.everyLock()) if (this.summarise(entry, summary, now)) visit(summary);
  }

  /**
   * `summaries` in slices of `slice` locks, the event loop free between them: a pass over 100,000 locks (a
   * metrics scrape) takes a few hundred milliseconds, which must not hold up the streams. Locks that change
   * meanwhile are seen as they are when their slice comes, each once (see `ShardedMap.valuesOnce`).
   */
  async summariesInSlices(visit: (summary: Readonly<LockSummary>) => void, slice = 2_000): Promise<void> {
    const summary = emptySummary();
    await this.inSlices((entry, now) => {
      if (this.summarise(entry, summary, now)) visit(summary);
    }, slice);
  }

  /** Fills `summary` with the entry's figures; false for an entry that is not listed. */
  private summarise(entry: Entry, summary: LockSummary, now: number): boolean {
    if (entry.state === null) return false;
    // As `contentionOf` says it, from the format's name rather than a built view: engine telemetry (0 when
    // none came), a library's queue, or nothing visible.
    const source = entry.reading !== null ? formatByName(keptFormat(entry.reading)).contention : null;
    if (this.contention.has(entry.resource)) {
      const figures = this.contention.get(entry.resource, now, entry.token ? lockValueId(entry.token) : null);
      summary.attemptsPerMin = figures.attemptsPerMin;
      summary.waiters = figures.waiters;
    } else {
      summary.attemptsPerMin = source === "engine" ? 0 : null;
      summary.waiters = source === "engine" ? 0 : source === "queue" && entry.reading !== null ? keptWaiters(entry.reading) : null;
    }
    summary.resource = entry.resource;
    summary.state = entry.state;
    summary.acquiredAt = entry.acquiredAt;
    summary.expiresAt = entry.expiresAt;
    summary.token = entry.token ?? entry.leading ?? entry.endedToken;
    summary.reading = entry.reading;
    summary.quorumHeld = entry.quorumHeld;
    return true;
  }

  /** The listed lock, built now; null when it left the list. */
  lock(resource: string, now = Date.now()): Lock | null {
    const entry = this.peek(resource);
    return entry && entry.state !== null ? this.build(entry, now) : null;
  }

  get(resource: string, now = Date.now()): LockDetail | null {
    // (Warmed: its timeline is made up when first asked for.)
    const entry = this.find(resource) ?? this.ended.kept(resource);
    if (!entry || entry.state === null) return null;
    return { ...this.build(entry, now), timeline: this.timelines.latest(entry), contentionHistory: this.contention.history(resource, now) };
  }

  counts(): LockCounts {
    return { byState: { ...this.byState }, held: this.byState.held + this.byState.elapsed };
  }

  /** The lock-safety counts and oldest-lock times `/metrics` exports, kept as locks change (see `SafetyLedger`). */
  safetyFacts(): Promise<LockSafetyFacts> {
    return this.ledger.facts(() => this.passOverLocks());
  }

  /** When the oldest lock present now was acquired, as known without a pass (see `SafetyLedger.oldestKnownAt`). */
  oldestLockAt(): number | null {
    return this.ledger.oldestKnownAt;
  }

  isNodeUp(index: number): boolean {
    return this.nodeUp[index] ?? false;
  }

  /**
   * The foreign locks live now (values that carry no acquisition time), one at a time: their first sightings
   * are shared once the console watches (`server/live/first-seen.ts`), paced, instead of one write per lock
   * found while the first reconcile reads the nodes (at a million locks, a million writes to node 0 that
   * slowed its reads).
   */
  *foreignHeld(): Generator<{ resource: string; token: string; seenAt: number; ttlMs: number | null }> {
    // Read lazily, the hot locks and then the cold ones: a lock that goes cold before the hot walk reaches it is met
    // in the cold walk; one met twice (visited hot, then cold) is shared twice, which changes nothing; one warmed
    // meanwhile was acquired or extended, which shares it anyway. (A list of every key made first would keep a
    // million strings alive for the minute this takes.)
    for (const entry of this.everyLock()) {
      if (entry.state === null || !isLive(entry.state)) continue;
      const token = entry.token ?? entry.leading;
      const seenAt = entry.acquiredAt;
      if (token === null || seenAt === null || decodeHolder(token).acquiredAt !== null) continue;
      yield { resource: entry.resource, token, seenAt, ttlMs: entry.ttlMs };
    }
  }

  /** Whether the lock is live with this value (held, partial or elapsed). */
  holdsValue(resource: string, token: string): boolean {
    const entry = this.peek(resource);
    return entry !== undefined && entry.state !== null && isLive(entry.state) && (entry.token === token || entry.leading === token);
  }

  /**
   * Whether the lock is live with this value or, for an engine-made value, with the same acquisition rewritten with
   * its fence (the same value id): what an open hold in the history still is. `token` may be as the history stores
   * it (`storedText`: a binary value's NUL bytes as U+FFFD), and is then compared with the live value so stored.
   */
  holdsAcquisition(resource: string, token: string): boolean {
    if (this.holdsValue(resource, token)) return true;
    const entry = this.peek(resource);
    if (entry === undefined || entry.state === null || !isLive(entry.state)) return false;
    const id = lockValueId(token);
    return [entry.token, entry.leading].some((value) => value !== null && ((id !== null && lockValueId(value) === id) || (token.includes("\uFFFD") && storedText(value) === token)));
  }

  /**
   * Keys a node is known to hold that `keep` accepts (for the reconcile's "gone while we were away"), in slices of
   * `slice` locks with the event loop free between them: a reconnect's reconcile comes here with every lock of the
   * store to pass over, a million of them and more. A lock that changes meanwhile is seen as it is when its slice
   * comes (see `passOverLocks`).
   */
  async knownOn(node: number, keep: (resource: string) => boolean = () => true, slice = 5_000): Promise<string[]> {
    const out: string[] = [];
    await this.inSlices((entry) => {
      if (entry.valueOn(node) !== null && keep(entry.resource)) out.push(entry.resource);
    }, slice);
    return out;
  }

  // ---- writing -------------------------------------------------------------------------------------

  /** New samples of one resource from one or more nodes, merged at once (so a Redlock write on three nodes is one change). */
  /** `found`: read by a reconcile (a SCAN), not because the key changed. */
  apply(resource: string, samples: readonly NodeSample[], now = Date.now(), found = false): void {
    this.applyTo(this.find(resource), resource, samples, now, found);
  }

  /**
   * The lock patterns changed: `isNew` tells the keys they bring in, until the reconciles that follow are done
   * (null). A lock such a reconcile finds is one held since before, not an acquisition (see `coveredByPatterns`).
   */
  patternsWidened(isNew: ((resource: string) => boolean) | null): void {
    this.widened = isNew;
  }

  /**
   * `apply`, for readings of a read sent when `startApplies` was `since`: false, and nothing applied, when
   * readings of the key were applied meanwhile (see `appliedAtStartSince`). One lookup of the lock for both.
   */
  applyUnlessStale(resource: string, samples: readonly NodeSample[], since: number, now = Date.now()): boolean {
    const entry = this.find(resource);
    if (this.staleAtStart(entry, resource, since)) return false;
    this.applyTo(entry, resource, samples, now);
    return true;
  }

  private applyTo(known: Entry | undefined, resource: string, samples: readonly NodeSample[], now: number, found = false): void {
    let entry = known;
    if (!entry) {
      if (!this.covers(resource)) return;
      if (allGone(samples)) {
        if (!this.context.watching) this.goneAtStart.set(resource, ++this.startApplyCount);
        return;
      }
      entry = this.revive(resource);
      if (found && this.widened?.(resource)) this.coveredNow.add(resource);
    }
    if (this.lostSuspects.length !== 0) this.markLost(entry, samples, now);
    // A merge of many still going (see `sweep`): the lock is merged with the nodes counted now before what it is
    // told, as if the merge had come to it first (a lock released meanwhile lost its quorum first). Once merged,
    // a merge again changes nothing.
    if (known !== undefined && this.merging()) this.recompute(entry, now, true);
    if (!this.context.watching) {
      entry.startApply = ++this.startApplyCount;
      let read = 0;
      for (const sample of samples) if (sample.node <= MAX_BIT_NODE) read |= 1 << sample.node;
      this.readsAtStart.or(resource, read);
    }
    this.recompute(entry, now, readSamples(entry, samples, now));
    if (!this.context.watching) this.keepColdAtStart(entry, now);
  }

  setNodeUp(index: number, up: boolean, now = Date.now()): void {
    if (this.nodeUp[index] === up) return;
    this.nodeUp[index] = up;
    // While starting, every node counts already (see `watching`).
    if (!this.watching) return;
    this.sweep(true, (entry) => entry.valueOn(index) !== null, (entry, at) => this.recompute(entry, at, true), now);
  }

  /**
   * The keys `unreadable` accepts cannot be read now though their node counts (a Redis Cluster that serves the
   * slots it still covers, one shard lost): merged as unreadable, as if their node were down, until they can
   * (null: every key). Only the locks it changes for are merged again.
   */
  setUnreadable(unreadable: ((resource: string) => boolean) | null, now = Date.now()): void {
    const before = this.context.unreadable ?? null;
    if (before === null && unreadable === null) return;
    this.context.unreadable = unreadable;
    this.sweep(
      true,
      (entry) => (before?.(entry.resource) ?? false) !== (unreadable?.(entry.resource) ?? false),
      (entry, at) => this.recompute(entry, at, true),
      now,
    );
  }

  /** Marks a watcher's blind spot in the timelines of the locks the node holds. */
  markGap(index: number, downMs: number, now = Date.now()): void {
    const nodeId = this.nodeIds[index] ?? `node-${index}`;
    const detail = downMs > 0 ? `no notifications from ${nodeId} for ${(downMs / 1000).toFixed(1)} s; state reconciled by SCAN` : `state reconciled by SCAN`;
    this.sweep(
      false,
      (entry) => entry.valueOn(index) !== null && entry.state !== null && isLive(entry.state),
      (entry) => this.timelines.add(entry, { at: now, type: "gap", node: nodeId, detail }),
      now,
    );
  }

  /** A waiter said it gave up: it stops counting among the lock's waiters now. */
  recordGaveUp(event: GaveUpEvent, now = Date.now()): void {
    // (Its waiter count changes, shown by the streams; it is no failed attempt, so no contention event is counted.)
    if (this.contention.gaveUp(event, now)) this.contentionChanged.add(event.resource);
  }

  recordContention(event: ContentionEvent, now = Date.now()): void {
    if (!this.contention.record(event, now)) return;
    this.contentionChanged.add(event.resource);
    const entry = this.find(event.resource);
    if (entry) this.timelines.addAttempt(entry, event.label ?? event.host ?? event.waiterId.slice(0, 6), now);
    this.events.emit("contention", { resource: event.resource });
  }

  /**
   * A failover's new primary does not hold `resource`, which the console saw held on the old one (see
   * server/deployments/failover.ts): said on the lock's timeline, whichever way the lock is shown to end.
   */
  noteLostInFailover(lock: SeenLock, detail: string, seenAt: number, now = Date.now()): void {
    const entry = this.find(lock.resource) ?? this.ended.kept(lock.resource);
    // Released (or expired) by its holder since the failover was announced, as a notification said: not lost.
    if (entry && entry.endedAt !== null && entry.endedAt >= seenAt && entry.endedToken === lock.token && entry.cause !== null && entry.cause !== "lost") return;
    // (A Sentinel or cluster deployment is one node here.)
    const node = Math.max(0, entry?.nodeHolding(lock.token) ?? 0);
    this.logLoss({ at: now, resource: lock.resource, node: this.nodeIds[node] ?? `node-${node}`, kind: "failover", detail, token: lock.token, wentOn: false });
    if (!entry) return;
    this.timelines.add(entry, { at: now, type: "lost-in-failover", detail });
    if (entry.endedAt === null) {
      // Not read on the promoted replica yet: that reading ends it as lost, not released.
      const expiresAt = lock.expiresAt ?? Number.POSITIVE_INFINITY;
      for (let node = 0; node < entry.nodeCount; node++) {
        if (entry.valueOn(node) !== lock.token) continue;
        let suspects = this.lostSuspects.find((s) => s.consume && s.node === node);
        if (suspects === undefined) {
          suspects = { node, held: new Map(), since: 0, consume: true };
          this.lostSuspects.push(suspects);
        }
        suspects.held.set(lock.resource, { value: lock.token, expiresAt });
      }
      // Those never read again (their keys left the patterns) go once their TTL has run out: looked for at most
      // every 10 s (a failover can lose a million locks, one call each).
      if (now - this.suspectsPrunedAt >= 10_000) {
        this.suspectsPrunedAt = now;
        for (const s of this.lostSuspects) if (s.consume) for (const [resource, held] of s.held) if (!(held.expiresAt > now)) s.held.delete(resource);
        this.lostSuspects = this.lostSuspects.filter((s) => !s.consume || s.held.size > 0);
      }
    } else if (entry.state === "released" && entry.endedAt >= seenAt && entry.endedToken === lock.token && entry.cause === null) {
      // The watcher read the promoted replica first, and took the value's absence (no notification said why) for
      // a release.
      this.timelines.relabelLost(entry, entry.endedToken);
      this.relabelled(entry, "released", "lost");
    }
  }

  /**
   * What node `index` holds as last read, of the locks held now: each lock's value there and its expiry (epoch ms;
   * Infinity: no TTL). A lock that ended already (its other nodes released it while this one was down) is not.
   * `only`: of the locks it accepts (on a cluster, those in one primary's slots).
   */
  heldOn(index: number, only?: (resource: string) => boolean): Map<string, { value: string; expiresAt: number }> {
    const out = new Map<string, { value: string; expiresAt: number }>();
    for (const entry of this.everyLock()) {
      if (entry.state === null || !isLive(entry.state)) continue;
      if (only !== undefined && !only(entry.resource)) continue;
      const value = entry.valueOn(index);
      if (value !== null) out.set(entry.resource, { value, expiresAt: entry.expiryOn(index) });
    }
    return out;
  }

  /**
   * Node `index` started again by `restartedAt` (its run id changed) and has been read since: the locks it held
   * before (`before`, from `heldOn`) whose value it no longer has, though their TTL had not run out when it
   * started, were lost in the restart (a node without persistence comes back empty; one that syncs its
   * append-only file every second can lose the last second's writes). Each gets a `lost-in-restart` entry on
   * its timeline, whichever way it is shown to end (or, held on other nodes still, to go on). `why` says how
   * the node keeps its data ("without an append-only file"; "" when unknown). `server`: the server that
   * restarted, where it is not the node itself (a cluster's primary, by address). Returns them, each with whether
   * it went on (still held with its value on a quorum of the other nodes).
   */
  lostInRestart(index: number, before: ReadonlyMap<string, { value: string; expiresAt: number }>, restartedAt: number, why: string, now = Date.now(), server?: string): Array<{ resource: string; wentOn: boolean }> {
    const nodeId = this.nodeIds[index] ?? `node-${index}`;
    const who = server === undefined ? nodeId : `${nodeId}'s primary ${server}`;
    const lost: Array<{ resource: string; wentOn: boolean }> = [];
    for (const [resource, held] of before) {
      if (!(held.expiresAt > restartedAt)) continue;
      if (this.peek(resource)?.valueOn(index) === held.value) continue;
      const live = this.find(resource);
      const entry = live ?? this.ended.kept(resource);
      const left = held.expiresAt === Number.POSITIVE_INFINITY ? "a key without a TTL" : `at least ${((held.expiresAt - restartedAt) / 1000).toFixed(1)} s of its TTL left`;
      const item = { at: now, type: "lost-in-restart" as const, node: nodeId, detail: `${who} restarted${why ? ` ${why}` : ""} and came back without this lock (${left}): its holder may still think it holds it` };
      // Whether it went on: still held with that value on a quorum of the other nodes, now that the node was read.
      const wentOn = this.holdsValue(resource, held.value);
      lost.push({ resource, wentOn });
      this.logLoss({ at: now, resource, node: nodeId, kind: "restart", detail: item.detail, token: held.value, wentOn });
      if (!entry) continue;
      this.timelines.add(entry, item, live ? (entry.token ?? entry.leading) : (entry.endedToken ?? entry.token ?? entry.leading));
      if (live) this.changed.add(resource);
    }
    return lost;
  }

  /**
   * Node `index` may have lost what it held (`held`: each lock's value there and its expiry, from `heldOn`): it
   * restarted by `since`, or a failover replaced it. Until `clearSuspects(index, held)`, the first reading of such
   * a lock there that shows its value gone (or replaced) with no notification saying why, while its TTL still
   * ran, ends it as `lost`, not `released`: nobody released it. `held` is kept by reference, not copied.
   */
  suspectLost(index: number, held: Map<string, { value: string; expiresAt: number }>, since: number): void {
    this.lostSuspects.push({ node: index, held, since, consume: false });
  }

  /** The suspicion `suspectLost(index, held)` raised is settled (the node was read again). */
  clearSuspects(index: number, held: Map<string, { value: string; expiresAt: number }>): void {
    this.lostSuspects = this.lostSuspects.filter((s) => s.node !== index || s.held !== held);
  }

  /** Gives the samples that read a suspected copy gone the cause `lost` (see `suspectLost`). */
  private markLost(entry: Entry, samples: readonly NodeSample[], now: number): void {
    for (const sample of samples) {
      if (sample.cause !== null) continue;
      const shown = entry.valueOn(sample.node);
      if (shown === null || sample.value === shown) continue;
      for (const suspects of this.lostSuspects) {
        if (suspects.node !== sample.node) continue;
        const held = suspects.held.get(entry.resource);
        if (held === undefined) continue;
        if (suspects.consume) suspects.held.delete(entry.resource);
        if (held.value === shown && held.expiresAt > suspects.since && now < held.expiresAt) {
          sample.cause = "lost";
          break;
        }
      }
    }
  }

  /** Told of each loss as it is logged (the console keeps them in its data folder: `LossJournal`). */
  onLoss: ((loss: Omit<LockLoss, "deployment">) => void) | null = null;

  /** Losses found before this console started (kept by `LossJournal`), oldest first: listed before the new ones. */
  restoreLosses(losses: ReadonlyArray<Omit<LockLoss, "deployment">>): void {
    this.lossLog = [...losses, ...this.lossLog].slice(-MAX_LOSSES);
  }

  private logLoss(loss: Omit<LockLoss, "deployment">): void {
    this.lossLog.push(loss);
    this.onLoss?.(loss);
    // Trimmed in batches: a restart can lose a million locks at once, one call each.
    if (this.lossLog.length >= 2 * MAX_LOSSES) this.lossLog.splice(0, this.lossLog.length - MAX_LOSSES);
  }

  /**
   * The locks nodes lost while their TTL ran (a restart, a failover) in the last `LOSSES_KEPT_MS` (at most
   * `MAX_LOSSES`), newest first, each with whether it went on with the value it had when the loss was found.
   */
  losses(deployment: string, now = Date.now()): LockLoss[] {
    const out: LockLoss[] = [];
    for (let i = this.lossLog.length - 1; i >= 0 && out.length < MAX_LOSSES; i--) {
      const loss = this.lossLog[i] as Omit<LockLoss, "deployment">;
      if (now - loss.at > LOSSES_KEPT_MS) break;
      out.push({ ...loss, deployment });
    }
    return out;
  }

  /** A lock held across a failover: the promoted replica had it (its holder went on without knowing). */
  /**
   * The locks that ended force-released and were not taken again since (listed still, or kept for their page), each
   * with the value released: what a failover to a replica that had not copied the delete would bring back.
   */
  forceReleased(): SeenLock[] {
    const out: SeenLock[] = [];
    const add = (entry: Entry) => {
      if (entry.state === "force-released" && entry.endedToken !== null) out.push({ resource: entry.resource, token: entry.endedToken, expiresAt: entry.expiresAt });
    };
    for (const entry of this.live.values()) add(entry);
    for (const entry of this.ended.keptLocks()) if (!this.has(entry.resource)) add(entry);
    return out;
  }

  /** A failover undid the force release of `resource` (see server/deployments/failover.ts): said on its timeline. */
  noteReleaseUndone(resource: string, detail: string, now = Date.now()): void {
    const live = this.find(resource);
    const entry = live ?? this.ended.kept(resource);
    if (!entry) return;
    this.timelines.add(entry, { at: now, type: "release-undone", detail }, live ? (entry.token ?? entry.leading) : (entry.endedToken ?? entry.token ?? entry.leading));
    if (live) this.changed.add(resource);
  }

  noteFailoverSurvived(resource: string, detail: string, now = Date.now()): void {
    const entry = this.find(resource);
    if (entry) this.timelines.add(entry, { at: now, type: "failover", detail });
  }

  /**
   * An operator force-released `resource` (here or on another console: the revocation arrives by pub/sub).
   * Keys that vanish shortly after end as `force-released`; a lock that just ended is relabelled.
   */
  /** Forgets a force release noted for `resource` that did not release it (a lock that already ended keeps its story). */
  withdrawForceRelease(resource: string): void {
    this.forceHints.delete(resource);
  }

  noteForceRelease(resource: string, info: ForceReleaseInfo = {}, now = Date.now()): void {
    const detail = forceReleaseDetail(info);
    // A value held beside the one the lock shows (a stray value on one node): the lock goes on when it goes.
    const held = this.find(resource);
    const shown = held === undefined || held.endedAt !== null ? null : (held.token ?? held.leading);
    const aside =
      held !== undefined &&
      shown !== null &&
      typeof info.value === "string" &&
      !forceHintApplies({ at: now, value: info.value, detail: null }, shown, now) &&
      holdsValue(held, info.value);
    if (!this.forceHints.note(resource, info.value, detail, now, aside)) return;
    const entry = this.find(resource) ?? this.ended.kept(resource);
    if (!entry) return;
    const previous = entry.state;
    switch (forceReleaseNoted(entry, now)) {
      case "reword":
        if (detail) this.timelines.rewordForced(entry, detail);
        return;
      case "relabel":
        // It ended a moment ago as released or expired: it was the operator.
        this.timelines.relabelForced(entry, detail, entry.endedToken);
        this.relabelled(entry, previous, "force-released");
        return;
      case null:
        // Still held here: its keys were just deleted, and their keyspace notifications may never come (a
        // subscriber between connections misses them). Reading the key now ends it either way.
        if (entry.endedAt === null && this.has(resource)) this.onProbe([resource]);
        return;
    }
  }

  /**
   * A lock that ended a moment ago as `previous` ended as `to` after all: counted by state only while it is still
   * listed (once it left the list, it counts for nothing), and said as a lock event.
   */
  private relabelled(entry: Entry, previous: LockState | null, to: "force-released" | "lost"): void {
    entry.state = to;
    if (this.live.has(entry.resource)) {
      if (previous !== null) this.count(previous, -1);
      this.count(to, 1);
      this.ledger.update(entry);
      this.changed.add(entry.resource);
    }
    // The end already told, as the reducer told it (an eviction ends in state expired): the counts take this one instead.
    const replaces = previous === "released" || previous === "lost" ? previous : previous === "expired" ? (entry.cause === "evicted" ? "evicted" : "expired") : undefined;
    this.events.emit("lock-event", replaces === undefined ? { type: to, resource: entry.resource } : { type: to, resource: entry.resource, replaces });
  }

  /**
   * The lock patterns changed: locks no pattern covers any more leave the list at once (their keys are not
   * watched any more, so nothing would ever end them). Their history is kept like an ended lock's.
   */
  retain(isLockKey: (resource: string) => boolean): number {
    let dropped = 0;
    this.warmWhere((entry) => !isLockKey(entry.resource));
    for (const [resource, entry] of this.live) {
      if (isLockKey(resource)) continue;
      this.drop(entry);
      this.wheel.unschedule(entry);
      this.settling.delete(resource);
      this.ended.stopLingering(resource);
      this.changed.delete(resource);
      if (entry.state !== null) {
        this.count(entry.state, -1);
        this.removed.add(resource);
        this.onListed?.(resource, false);
      }
      entry.dispose();
      dropped += 1;
    }
    return dropped;
  }

  // ---- time ----------------------------------------------------------------------------------------

  /** Time passing: TTLs running out (held → elapsed), stale keys probed, ended locks leaving the list. */
  tick(now = Date.now()): void {
    if (this.sweeps.length > 0) this.advanceSweeps(performance.now() + SWEEP_SLICE_MS, now);
    if (this.cold.size > 0) for (const resource of this.cold.due(now + WARM_AHEAD_MS)) this.find(resource);
    for (const resource of this.settling) {
      const entry = this.live.get(resource);
      if (!entry) this.settling.delete(resource);
      else if (now >= entry.settlesAt) this.recompute(entry, now, true);
    }
    const probe: string[] = [];
    this.wheel.fire(
      now,
      (entry) => {
        if (entry.state === null || !isLive(entry.state)) return;
        this.recompute(entry, now, false);
        const again = probeAgainAt(entry, now);
        if (!Number.isNaN(again)) {
          probe.push(entry.resource);
          this.wheel.schedule(entry, again);
        }
      },
    );
    if (probe.length > 0) this.onProbe(probe);
    this.ended.lingered(now, (resource, endedAt) => {
      const entry = this.live.get(resource);
      if (!entry || entry.endedAt !== endedAt || entry.state === null || isLive(entry.state)) return;
      this.drop(entry);
      this.wheel.unschedule(entry);
      this.count(entry.state, -1);
      this.changed.delete(resource);
      this.removed.add(resource);
      this.onListed?.(resource, false);
      this.ended.keep(resource, entry, now);
    });
    this.keepSomeCold(now);
  }

  /** Once a second: contention rates decay, waiters go stale, force-release hints too old to explain an end go. */
  sweepContention(now = Date.now()): void {
    for (const resource of this.contention.sweep(now, (r) => this.holderIdOf(r))) this.contentionChanged.add(resource);
    this.forceHints.sweep(now);
  }

  /**
   * The changes to send now: every changed lock not sent within `coalesceMs` (the rest wait for a later
   * call), lock removals, and contention figures. At most `max` locks per call. `wanted`: the locks some
   * stream follows; the others are dropped from the changes unbuilt (removals are sent whatever they are).
   */
  drain(now: number, coalesceMs: number, max: number, wanted?: WantedLocks): DrainedChanges {
    const upserts: Lock[] = [];
    const sinceOrigin = now - (this.origin ??= now);
    const changed = this.changed;
    // Those that wait (sent within `coalesceMs`) go into a fresh set, when there are few enough to pass over
    // them all (see `changed`); else the sent ones are deleted from this one.
    const rest = changed.size <= 4 * max ? new Set<string>() : null;
    for (const resource of changed) {
      if (upserts.length >= max) {
        if (rest === null) break;
        rest.add(resource);
        continue;
      }
      // A lock kept cold since it changed (one found while the console starts) is built from its cold record:
      // `coldView` is pointed at it and read before the next, and its time sent written in its slot.
      const entry = this.peek(resource);
      if (!entry || entry.state === null || (wanted !== undefined && !wanted(resource, this.deployment))) {
        if (rest === null) changed.delete(resource);
        continue;
      }
      if (entry.lastSentAt !== NEVER_SENT && sinceOrigin - entry.lastSentAt < coalesceMs) {
        rest?.add(resource);
        continue;
      }
      entry.lastSentAt = sinceOrigin;
      if (rest === null) changed.delete(resource);
      this.contentionChanged.delete(resource);
      const lock = this.build(entry, now);
      this.contention.markSent(resource, lock.contention);
      upserts.push(lock);
    }
    if (rest !== null) this.changed = rest;
    const removed = [...this.removed];
    if (removed.length > 0) this.removed = new Set();
    const contention: DrainedChanges["contention"] = [];
    for (const resource of this.contentionChanged) {
      if (wanted !== undefined && !wanted(resource, this.deployment)) continue;
      const entry = this.find(resource);
      const figures = entry ? this.contentionOf(entry, now, this.holderIdOf(resource)) : this.contention.get(resource, now, null);
      this.contention.markSent(resource, figures);
      contention.push({ resource, ...figures });
    }
    if (this.contentionChanged.size > 0) this.contentionChanged = new Set();
    return { upserts, removed, contention };
  }

  /** Nobody is listening: forget pending changes (a later stream starts from a snapshot). */
  discardChanges(): boolean {
    const had = this.changed.size > 0 || this.removed.size > 0 || this.contentionChanged.size > 0;
    this.changed.clear();
    this.removed.clear();
    this.contentionChanged.clear();
    return had;
  }

  /** Sizes of the internal structures, for the soak benchmark and tests of the memory bounds. */
  sizes(): { live: number; cold: number; recent: number; timeSlots: number; wheelEntries: number; wheelBuckets: number; lingering: number; settling: number; forceHints: number } {
    const wheel = this.wheel.sizes();
    const ended = this.ended.sizes();
    return {
      live: this.live.size + this.cold.size,
      cold: this.cold.size,
      recent: ended.recent,
      timeSlots: this.slots.size,
      wheelEntries: wheel.entries,
      wheelBuckets: wheel.buckets,
      lingering: ended.lingering,
      settling: this.settling.size,
      forceHints: this.forceHints.size,
    };
  }

  // ---- internals -----------------------------------------------------------------------------------

  /**
   * The lock of `resource`, warmed if it was cold (to change it, or to keep it). `wake`: a warmed lock goes back
   * into the wheel at its wake (see `visitCold` for one that does not).
   */
  private find(resource: string, wake = true): Entry | undefined {
    const hot = this.live.get(resource);
    const record = hot === undefined ? this.coldRecordOf(resource) : -1;
    if (record < 0) return hot;
    const taken = this.cold.take(resource, this.warmed) as ColdLock;
    const entry = new Entry(resource, this.nodeIds.length, null, this.slots);
    entry.dispose();
    entry.warmWith(resource, taken.slot, taken.value, scopeOf(taken.code), (taken.code & LEADS) !== 0);
    this.live.set(resource, entry);
    if (wake && Number.isFinite(taken.wakeAt)) this.wheel.schedule(entry, taken.wakeAt);
    for (const pass of this.passes) if (pass.hot || record <= pass.visited) pass.skip.add(resource);
    return entry;
  }

  /** The lock of `resource` to read now, hot or cold (a cold one through `coldView`: never kept, and written only its time sent: see `drain`). */
  private peek(resource: string): Entry | undefined {
    const hot = this.live.get(resource);
    const record = hot === undefined ? this.coldRecordOf(resource) : -1;
    return record < 0 ? hot : this.viewCold(record, resource);
  }

  private has(resource: string): boolean {
    return this.live.has(resource) || this.coldRecordOf(resource) >= 0;
  }

  /** The cold record of `resource`, or -1 (no lookup while none is cold: the store below `coldAbove`). */
  private coldRecordOf(resource: string): number {
    return this.cold.size === 0 ? -1 : this.cold.recordOf(resource);
  }

  private viewCold(record: number, resource = this.cold.keyOf(record)): Entry {
    const code = this.cold.codeOf(record);
    this.coldView.handOverSlot();
    this.coldView.warmWith(resource, this.cold.slotOf(record), this.cold.valueOf(record), scopeOf(code), (code & LEADS) !== 0);
    return this.coldView;
  }

  /**
   * Every lock, hot then cold (a cold lock read through `coldView`, pointed at the next one at each step: read
   * before the next). Exactly once only for a pass that runs in one go: see `passOverLocks`.
   */
  private *everyLock(): Generator<Entry> {
    yield* this.live.values();
    for (let record = 0; record < this.cold.span; record++) if (this.cold.isLive(record)) yield this.viewCold(record);
  }

  /**
   * Every lock once (see `passOverLocks`), `slice` steps at a time with the event loop free between them; `visit`
   * is given each with its slice's time.
   */
  private async inSlices(visit: (entry: Entry, now: number) => void, slice: number): Promise<void> {
    const entries = this.passOverLocks();
    try {
      for (;;) {
        const now = Date.now();
        for (let i = 0; i < slice; i++) {
          const next = entries.next();
          if (next.done) return;
          if (next.value !== null) visit(next.value, now);
        }
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } finally {
      entries.return(undefined);
    }
  }

  /** Every lock once, for a pass that yields between steps (null: a lock the pass has visited): see `Pass`. */
  private *passOverLocks(): Generator<Entry | null> {
    const pass: Pass = { visited: -1, hot: false, skip: new Set(), startedAt: performance.now() };
    this.passes.add(pass);
    try {
      for (let record = 0; record < this.cold.span; record++) {
        if (!this.cold.isLive(record)) continue;
        pass.visited = record;
        yield this.viewCold(record);
      }
      pass.hot = true;
      // (A lock visited already is a null step: a pass in slices counts it, a million of them in a row included.)
      for (const entry of this.live.valuesOnce()) yield pass.skip.has(entry.resource) ? null : entry;
    } finally {
      this.passes.delete(pass);
    }
  }

  /**
   * Visits every lock `which` accepts with `visit` (see `Sweep`), a cold one warmed first. A store of up to
   * `sweepAtOnce` locks is visited at once. A larger one goes on a slice of `SWEEP_SLICE_MS` a tick: a node going
   * down with a million locks held on it took seven seconds of the main thread in one go, the other nodes' replies
   * waiting in their sockets meanwhile (taken for nodes not answering, which went down in turn) and the streams
   * stopped. Meanwhile a lock not visited yet shows its nodes as they are now (see `build`) with its state as last
   * merged, and anything that happens to it merges it with the nodes counted now. `now`: the change's time, the
   * visits' until its first slice ends (each later slice's is its tick's).
   */
  private sweep(merge: boolean, which: (entry: Entry) => boolean, visit: (entry: Entry, now: number) => void, now: number): void {
    if (this.live.size + this.cold.size <= this.sweepAtOnce && this.sweeps.length === 0) {
      this.advance({ entries: this.passOverLocks(), started: false, merge, which, visit }, Number.POSITIVE_INFINITY, now);
      return;
    }
    // A merge not started yet takes this one's locks as well: at most one runs and one waits, however often the
    // nodes come and go.
    const waiting = merge ? this.sweeps.find((s) => s.merge && !s.started) : undefined;
    if (waiting) {
      const before = waiting.which;
      waiting.which = (entry) => before(entry) || which(entry);
    } else {
      this.sweeps.push({ entries: this.passOverLocks(), started: false, merge, which, visit });
    }
    this.advanceSweeps(performance.now() + SWEEP_SLICE_MS, now);
  }

  /** Whether a merge of many locks is still going (see `sweep`). */
  private merging(): boolean {
    for (const sweep of this.sweeps) if (sweep.merge) return true;
    return false;
  }

  /** Goes on with the sweeps, oldest first, until `until` (`performance.now()`). */
  private advanceSweeps(until: number, now: number): void {
    while (this.sweeps.length > 0) {
      if (!this.advance(this.sweeps[0] as Sweep, until, now)) return;
      this.sweeps.shift();
    }
  }

  /** One sweep's visits until `until` (`performance.now()`); true once it has visited every lock. */
  private advance(sweep: Sweep, until: number, now: number): boolean {
    sweep.started = true;
    for (let i = 1; ; i++) {
      const next = sweep.entries.next();
      if (next.done) return true;
      if (next.value === this.coldView) {
        if (sweep.which(next.value)) this.visitCold(sweep, next.value.resource, now);
      } else if (next.value !== null && sweep.which(next.value)) sweep.visit(next.value, now);
      if ((i & 255) === 0 && performance.now() >= until) return false;
    }
  }

  /**
   * A sweep's visit to a cold lock, warmed for it. It goes into the wheel after the visit, where the visit left it
   * nowhere (as `find` would have put it): put there first, most would be moved by the visit's merge (their wake
   * now counted on other nodes), and a million left behind in their buckets were compactions of thousands each.
   */
  private visitCold(sweep: Sweep, resource: string, now: number): void {
    const entry = this.find(resource, false);
    if (entry === undefined) return;
    // (`find` took the cold record into `warmed`, its wake with it.)
    const wakeAt = this.warmed.wakeAt;
    sweep.visit(entry, now);
    if (entry.wheelAt === UNSCHEDULED && Number.isFinite(wakeAt) && entry.state !== null && isLive(entry.state) && this.live.get(resource) === entry) {
      this.wheel.schedule(entry, wakeAt);
    }
  }

  /** Warms every cold lock `which` accepts (read through `coldView`), for a change that walks the hot ones. */
  private warmWhere(which: (entry: Entry) => boolean): void {
    if (this.cold.size === 0) return;
    const resources: string[] = [];
    for (let record = 0; record < this.cold.span; record++) {
      if (this.cold.isLive(record) && which(this.viewCold(record))) resources.push(this.coldView.resource);
    }
    for (const resource of resources) this.find(resource);
  }

  /**
   * Looks at the next few hot locks (at most `COLD_LOOKS_PER_TICK`, for at most `COLD_LOOK_MS`) and keeps cold
   * those nothing happens to, once the store holds `coldAbove` locks or more and watches.
   */
  private keepSomeCold(now: number): void {
    if (!this.context.watching || this.live.size + this.cold.size < this.coldAbove) {
      this.coldCursor = null;
      return;
    }
    for (const pass of this.passes) if (performance.now() - pass.startedAt > PASS_HOLDS_MS) this.passes.delete(pass);
    if (this.passes.size > 0 || now < this.coldRestUntil) return;
    const started = performance.now();
    const cursor = (this.coldCursor ??= this.live.values());
    for (let i = 1; i <= COLD_LOOKS_PER_TICK; i++) {
      const next = cursor.next();
      if (next.done) {
        this.coldCursor = null;
        if (this.coldMoved < COLD_FEW) this.coldRestUntil = now + COLD_REST_MS;
        this.coldMoved = 0;
        return;
      }
      if (this.keepCold(next.value, now)) this.coldMoved += 1;
      if ((i & 63) === 0 && performance.now() - started > COLD_LOOK_MS) return;
    }
  }

  /**
   * While the console starts, a lock found held is kept cold as soon as it is merged, once the store holds
   * `coldAbove` locks or more: a million found locks never become a million objects that the collector copies into
   * its old generation and marks while the reconcile goes on, and that the ticks then move cold one by one while the
   * first changes arrive. Not while a pass over every lock is among the hot ones (it would miss a lock moved behind
   * it), nor for one a pass met already (it would meet it again): those are kept cold by the ticks, once the store
   * watches.
   */
  private keepColdAtStart(entry: Entry, now: number): void {
    if (this.live.size + this.cold.size < this.coldAbove) return;
    for (const pass of this.passes) if (pass.hot || pass.skip.has(entry.resource)) return;
    this.keepCold(entry, now);
  }

  /** Keeps the lock cold if it is only its value held (`coldValue`) and nothing is pending or due for it soon; true if it did. */
  private keepCold(entry: Entry, now: number): boolean {
    const value = entry.coldValue();
    if (value === null || entry.scope === null) return false;
    const resource = entry.resource;
    // Long keys and values stay objects: the arena would hold them twice over (UTF-16), for nothing.
    if (resource.length + value.length > 1_024) return false;
    const wakeAt = entry.wheelAt === UNSCHEDULED ? Number.POSITIVE_INFINITY : this.wheel.timeOf(entry.wheelAt);
    if (!(wakeAt > now + COLD_WAKE_BEYOND_MS)) return false;
    // (A change still to send is sent from the cold record: see `drain`.)
    if (this.settling.has(resource) || this.contentionChanged.has(resource) || this.coveredNow.has(resource)) return false;
    if (this.contention.has(resource) || this.forceHints.get(resource) !== null) return false;
    this.wheel.forget(entry);
    this.live.delete(resource);
    this.cold.put(resource, value, entry.handOverSlot(), SCOPES.indexOf(entry.scope) | (entry.leading === null ? 0 : LEADS), wakeAt);
    return true;
  }

  /** Takes a lock out of the map (a lock made again later starts afresh, with no reading applied at start). */
  private drop(entry: Entry): void {
    this.live.delete(entry.resource);
    this.coveredNow.delete(entry.resource);
    this.ledger.leave(entry);
    if (!this.context.watching) this.readsAtStart.clear(entry.resource);
  }

  private revive(resource: string): Entry {
    const old = this.ended.take(resource);
    // Its ended row may have left the list in this very frame: the stream must not send the removal after
    // the new lock (the browser would delete a live lock).
    this.removed.delete(resource);
    // Only locks found by the first reconcile start without a timeline array (made up when asked for).
    const entry = new Entry(resource, this.nodeIds.length, old ? this.timelines.of(old) : this.watching ? [] : null, this.slots);
    old?.dispose();
    this.live.set(resource, entry);
    return entry;
  }

  /** One step of the lock (see `reduceLock`), and what it says applied: maps, timers, timeline, events. */
  private recompute(entry: Entry, now: number, visible: boolean): void {
    const previousState = entry.state;
    const step = reduceLock(entry, this.context, this.forceHints.get(entry.resource), now, visible, this.step);
    // The step is all that changes the lock's state and times here.
    this.ledger.update(entry);
    if (step.outcome === "settling") {
      this.settling.add(entry.resource);
      return;
    }
    this.settling.delete(entry.resource);
    if (step.forceHintTaken) this.forceHints.delete(entry.resource);
    for (const effect of step.effects) this.applyEffect(entry, effect, now);
    // Its first entry made: a lock the patterns brought in is told apart only at its first acquisition.
    if (this.coveredNow.size > 0 && (entry.timeline?.length ?? 0) > 0) this.coveredNow.delete(entry.resource);
    switch (step.outcome) {
      case "never-held":
        this.drop(entry);
        this.wheel.unschedule(entry);
        return;
      case "idle":
        return;
      case "ended":
        this.ended.linger(entry.resource, now);
        this.wheel.unschedule(entry);
        break;
      case "live":
        if (!Number.isNaN(step.wakeAt)) this.wheel.schedule(entry, step.wakeAt);
        break;
    }
    if (previousState !== entry.state && entry.state !== null) {
      if (previousState !== null) this.count(previousState, -1);
      else this.onListed?.(entry.resource, true);
      this.count(entry.state, 1);
    }
    if (step.changed) this.changed.add(entry.resource);
  }

  private applyEffect(entry: Entry, effect: LockEffect, now: number): void {
    switch (effect.type) {
      case "timeline":
        this.timelines.add(entry, effect.item, effect.token, effect.heldSince);
        return;
      case "history":
        this.timelines.record(entry.resource, effect.item, effect.token);
        return;
      case "lock-event":
        this.events.emit("lock-event", { type: effect.event, resource: entry.resource });
        return;
      case "count":
        (effect.counter === "acquisitions" ? this.acquisitions : this.expirations).add(now);
        return;
      case "first-seen":
        // Locks found while the console starts are shared afterwards, paced (see `foreignHeld`).
        if (this.context.watching) this.firstSeen?.(entry.resource, effect.token, effect.seenAt, effect.ttlMs, effect.notBefore);
        return;
      case "holder":
        this.contention.holderIs(entry.resource, effect.id);
        return;
    }
  }

  private count(state: LockState, delta: number): void {
    this.byState[state] += delta;
  }

  /**
   * What can be known of a lock's contention: this engine's telemetry (also for a foreign-held lock an engine
   * client contends for), a queue the library keeps (Redisson's fair lock), or nothing: a foreign client's
   * failed attempt leaves no trace, so its figures are null, never a made-up 0.
   */
  private contentionOf(entry: Entry, now: number, holderId: string | null, view = this.viewOf(entry)): Lock["contention"] {
    const source = view?.contentionSource ?? null;
    if (source === "engine" || this.contention.has(entry.resource)) return this.contention.get(entry.resource, now, holderId);
    if (source === "queue") return { attemptsPerMin: null, waiters: view?.waiters ?? null, source: (view?.waiters ?? null) === null ? null : "queue" };
    return { ...NOT_VISIBLE };
  }

  /** The format fields of the lock's kept reading; null before any. */
  private viewOf(entry: Entry): FormatView | null {
    return entry.reading !== null ? keptView(entry.reading) : null;
  }

  private holderIdOf(resource: string): string | null {
    const token = this.peek(resource)?.token;
    return token ? lockValueId(token) : null;
  }

  private build(entry: Entry, now: number): Lock {
    const shown = entry.token ?? entry.leading ?? entry.endedToken;
    const decoded = decodeHolder(shown);
    const holderId = entry.token ? lockValueId(entry.token) : null;
    const view = this.viewOf(entry);
    const scope = entry.scope ?? "quorum";
    const lock: Lock = {
      resource: entry.resource,
      deployment: this.deployment,
      state: entry.state ?? "released",
      format: view?.format ?? "unknown",
      redisType: view?.redisType ?? "none",
      scope,
      // A split vote with no side ahead names every side's holders, each with its nodes (no one holder leads).
      holders: entry.state === "partial" && entry.token === null && entry.leading === null ? splitVoteHolders(entry, this.context.counted, this.nodeIds) : (view?.holders ?? []),
      warnings: view?.warnings ?? [],
      token: entry.token,
      holder: decoded.holder,
      fence: decoded.fence,
      // A node is shown up where its readings count in the merge: while the console starts that is every node
      // (a node still being read is starting, not down: see `watching`), so a lock sent then shows what each
      // node was read holding, and nothing needs sending again when the console starts watching.
      nodes: this.nodeIds.map((id, i) => {
        const up = this.context.counted[i] ?? false;
        const value = up ? entry.valueOn(i) : null;
        const expiry = entry.expiryOn(i);
        return { id, up, token: value, pttlMs: value !== null && Number.isFinite(expiry) ? Math.max(0, Math.round(expiry - now)) : null };
      }),
      quorumHeld: entry.quorumHeld,
      quorum: scope === "single" ? 1 : this.quorum,
      expiresAt: entry.expiresAt === null ? null : Math.round(entry.expiresAt),
      ttlMs: entry.ttlMs === null ? null : Math.round(entry.ttlMs),
      contention: this.contentionOf(entry, now, holderId, view),
    };
    if (entry.token === null && entry.leading !== null) lock.leading = entry.leading;
    if (entry.acquiredAt !== null) lock.acquiredAt = entry.acquiredAt;
    if (entry.endedAt !== null) {
      lock.endedAt = entry.endedAt;
      lock.endedToken = entry.endedToken;
    }
    if (entry.unreadable) lock.unreadable = true;
    return lock;
  }
}

/** Whether no sample holds a value (a loop: a closure for `every` on each lock found at start was a million of them). */
function allGone(samples: readonly NodeSample[]): boolean {
  for (let i = 0; i < samples.length; i++) if ((samples[i] as NodeSample).value !== null) return false;
  return true;
}

const NOT_VISIBLE = Object.freeze({ attemptsPerMin: null, waiters: null, source: null });

function emptySummary(): LockSummary {
  return { resource: "", state: "held", acquiredAt: null, expiresAt: null, token: null, reading: null, quorumHeld: 0, attemptsPerMin: null, waiters: null };
}
