import { lockValueId } from "@lockscope/redlock";
import {
  formatByName,
  inferScope,
  keep,
  keptHolders,
  keptReading,
  type FormatHolder,
  type FormatName,
  type FormatReading,
  type Kept,
  keptDetails,
  keptFingerprint,
  keptFormat,
  keptChangesAt,
  type LockScope,
} from "./formats";
import { valueExpiry } from "./formats/token";
import { decodeHolder, endReason, EXTEND_SLACK_MS, mergeSamples, transitions, voteHolders, type EndCause, type MergedLock } from "./merge";
import { TimeSlots } from "./time-slots";
import { isLive, type LockState, type TimelineEntry, type TimelineType } from "./types";

/**
 * One lock's life as the live view sees it, as pure functions of (the lock's state, new readings, now): the
 * store around it (server/live/store.ts) owns the maps, timers and emitters and applies what these return.
 */

/** How long a view where the reachable nodes disagree is held back, waiting for the rest of a multi-node write. */
export const SETTLE_MS = 30;
/** A key whose TTL ran out this long ago and that Redis still has not reclaimed is read again (lazily expiring it). */
export const PROBE_AFTER_MS = 1_000;
/** The longest wait between two reads of a lock whose in-value expiry has passed (see `probeAgainAt`). */
export const VALUE_EXPIRY_PROBE_MAX_MS = 60_000;
/** A force-release noted this long before the keys vanish explains their going. */
export const FORCE_HINT_MS = 10_000;
/** A force-release noted this long after a lock ended relabels its end. */
const RELABEL_WITHIN_MS = 3_000;
export const ALREADY_HELD = "already held when the console started watching";
export const ALREADY_HELD_WHEN_COVERED = "already held when the lock patterns came to cover it";

/** Formats whose value is a set of holders that join and leave one lock (see `LockSummary.holderSet`). */
const HOLDER_SETS: ReadonlySet<FormatName> = new Set<FormatName>(["redis-semaphore", "redisson-rw"]);

/**
 * One node's reading of one key, decoded by its format: `value` is the reading's fingerprint (null when
 * absent); `expiry` NaN when absent, Infinity when it never ends by itself.
 */
export interface NodeSample {
  node: number;
  /** The decoded reading; absent where only the value is known (it then shows as format `unknown`). */
  reading?: FormatReading | null;
  value: string | null;
  expiry: number;
  /** What the keyspace notification said removed the key, when one did. */
  cause: EndCause;
  /**
   * How much later than before this node's TTL end may read without being an extension, where that is more
   * than `EXTEND_SLACK_MS` (its clock's offset moved lately: see `NodeClock.recentShift`).
   */
  slack?: number;
}

/** Where each time sits in a lock's slot of numbers (`LockRecord.num`), after the nodes' expiries. */
const EXPIRES_AT = 0;
const ACQUIRED_AT = 1;
const TTL_MS = 2;
const ENDED_AT = 3;
const SETTLE_UNTIL = 4;
const LEFTOVER = 5;
/** Small integers of the lock's, kept as doubles in its slot too (a field each would be one more for a collection to visit). */
const HELD_BY = 6;
const QUORUM_HELD = 7;
const RENEWED_ON = 8;
const CHANGED_ON = 9;
/** Numbers of the lock record's own, after the nodes' expiries. */
const OWN_NUMBERS = 10;
/** Numbers after those that a subclass keeps (`extra`, `setExtra`): the store's per-lock bookkeeping. */
export const EXTRA_NUMBERS = 4;
/** Doubles in a lock's slot, after its nodes' expiries. */
const NUMBERS = OWN_NUMBERS + EXTRA_NUMBERS;
/** Nodes past this index are not tracked in `LockRecord.leftover` (a bit each in a double's exact integers). */
const MAX_LEFTOVER_NODE = 30;

/** Nodes past this index hold their value in `LockRecord`'s array form only (a bit each in a small integer). */
const MAX_BIT_NODE = 30;

/** `LockRecord.flags`: a bit per yes-or-no fact. */
const END_SEEN = 1;
const EXTENSION_SEEN = 2;
const REPLACED_SEEN = 4;
const REMADE_SEEN = 8;
const UNREADABLE = 16;

/**
 * One lock's state, one per lock (a million locks and more). Its numbers live in a slot of doubles outside the
 * heap (`TimeSlots`), with NaN for "none": a number field of an object holds a separately allocated box in V8
 * (five per lock here), and an array of them two objects per lock; every such object is one more for the
 * garbage collector to mark while the console churns. The nodes' values take no array while the nodes agree
 * (see `valueOn`).
 */
export class LockRecord {
  readonly resource: string;
  /** How many nodes the lock is read on. */
  readonly nodeCount: number;
  /**
   * Each node's fingerprint of the key (null: absent), kept without an array of its own while the nodes agree,
   * as they do nearly always: `held` is the value and `heldBy` a bit per node holding it. Once nodes hold
   * different values (a split vote, a write between two nodes), or with more nodes than bits, `each` keeps every
   * node's value and is the only record until they agree again. A million locks' arrays of three were two
   * million more objects for a full collection to mark, about as long again as the rest of the lock table.
   */
  private held: string | null = null;
  private each: Array<string | null> | null = null;
  /**
   * The lock's numbers, in `slots` at `slot`: each node's expiry for its value (epoch ms; NaN when absent,
   * Infinity when it never ends by itself) at indices 0 to n-1, then the lock's own times and small integers (the
   * getters below), then `EXTRA_NUMBERS` of a subclass's. -1 once the lock is disposed of (see `dispose`): it
   * then reads NaN (0 for the small integers) and writes nothing.
   */
  private slot: number;
  private readonly slots: TimeSlots;
  /** null until first counted. */
  state: LockState | null = null;
  token: string | null = null;
  leading: string | null = null;
  endedToken: string | null = null;
  cause: EndCause = null;
  /**
   * null until something happens to a lock found already held at start (saves an array per lock). Read here
   * only for whether it is made yet; the store's timeline (server/live/timeline.ts) fills it.
   */
  timeline: TimelineEntry[] | null;
  /**
   * The lock's yes-or-no facts (`endSeen`, `extensionSeen`, `replacedSeen`, `remadeSeen`, `unreadable`), a bit
   * each in one small integer: a field each was four more fields per lock for a full collection to visit.
   */
  private flags = 0;
  /** A node was read without the value it held, since the last merge: the end was seen, not guessed. */
  get endSeen(): boolean {
    return (this.flags & END_SEEN) !== 0;
  }

  set endSeen(on: boolean) {
    this.flags = on ? this.flags | END_SEEN : this.flags & ~END_SEEN;
  }

  /** A node was read with a later TTL end for the value it held, since the last merge. */
  get extensionSeen(): boolean {
    return (this.flags & EXTENSION_SEEN) !== 0;
  }

  set extensionSeen(on: boolean) {
    this.flags = on ? this.flags | EXTENSION_SEEN : this.flags & ~EXTENSION_SEEN;
  }

  /**
   * A node was read with a value in place of another it held, or where it held none, since the last merge: a value
   * that arrived, not one held before.
   */
  get replacedSeen(): boolean {
    return (this.flags & REPLACED_SEEN) !== 0;
  }

  set replacedSeen(on: boolean) {
    this.flags = on ? this.flags | REPLACED_SEEN : this.flags & ~REPLACED_SEEN;
  }

  /** A node was read with the value it held written again after an end a notification told, since the last merge. */
  get remadeSeen(): boolean {
    return (this.flags & REMADE_SEEN) !== 0;
  }

  set remadeSeen(on: boolean) {
    this.flags = on ? this.flags | REMADE_SEEN : this.flags & ~REMADE_SEEN;
  }

  /** Every node that holds it is unreadable: the view is the last readings'. */
  get unreadable(): boolean {
    return (this.flags & UNREADABLE) !== 0;
  }

  set unreadable(on: boolean) {
    this.flags = on ? this.flags | UNREADABLE : this.flags & ~UNREADABLE;
  }

  /**
   * One decoded reading of the value the lock is held with (not one per node: 100,000 locks × 3 nodes), kept
   * once it ended for its row and page; the lock's format fields are built from it when served. A plain token's
   * is its value string alone (see `Kept`).
   */
  reading: Kept | null = null;
  /**
   * Readings that arrived since the last merge, for it to pick the leading value's from; null when none. While the
   * nodes hold different values it also keeps, past the merge, one reading of each other value a node still holds
   * (see `readingsAside`): the readings of a split vote come once, when its values are written.
   */
  pending: FormatReading[] | null = null;
  /** null until first counted. */
  scope: LockScope | null = null;

  /**
   * `slots`: where its numbers live (`lockSlots(nodes)`: a store's own table, given back when the lock is disposed
   * of); by default a table shared by every lock on as many nodes made without one.
   */
  constructor(resource: string, nodes: number, timeline: TimelineEntry[] | null, slots: TimeSlots = sharedSlots(nodes + NUMBERS)) {
    if (slots.width !== nodes + NUMBERS) throw new RangeError(`Expected slots of ${nodes + NUMBERS} numbers for a lock on ${nodes} nodes, got ${slots.width}`);
    this.resource = resource;
    this.nodeCount = nodes;
    if (nodes > MAX_BIT_NODE + 1) this.each = new Array<string | null>(nodes).fill(null);
    this.slots = slots;
    this.slot = slots.take();
    this.setNum(nodes + SETTLE_UNTIL, 0);
    this.timeline = timeline;
  }

  /**
   * The lock's value, when all there is to the lock besides its numbers is that value held (the nodes agreeing on
   * it, a plain reading of it, nothing pending, no timeline, no end): then it can be kept without this object, as
   * its value, its scope and its slot of numbers (see `ColdLocks`), and made again from them (`warmWith`) as it
   * was. Null otherwise.
   */
  coldValue(): string | null {
    const value = this.held;
    if (this.state !== "held" || this.each !== null || value === null || this.token !== value || this.reading !== value || this.scope === null) return null;
    if ((this.leading !== null && this.leading !== value) || this.endedToken !== null || this.cause !== null || this.timeline !== null || this.pending !== null || this.flags !== 0) return null;
    return value;
  }

  /**
   * Hands the lock's slot of numbers over to whoever keeps it now (a cold store): this object reads and writes no
   * numbers after, and gives no slot back when disposed of.
   */
  handOverSlot(): number {
    const slot = this.slot;
    this.slot = -1;
    return slot;
  }

  /**
   * Makes this object the lock that `coldValue` described (`value` held, with `scope`, leading with it or not)
   * whose numbers are in `slot`, taken over from its cold store. A store may also point one object at each of its
   * cold locks in turn to read them (never keeping it, never writing through it), handing the slot over each time.
   */
  warmWith(resource: string, slot: number, value: string, scope: LockScope, leads: boolean): void {
    if (this.slot >= 0) throw new Error(`Expected ${JSON.stringify(this.resource)} to have handed its slot over (or been disposed of) before taking a cold lock's`);
    (this as { resource: string }).resource = resource;
    this.slot = slot;
    this.held = value;
    this.each = null;
    this.token = value;
    this.reading = value;
    this.state = "held";
    this.scope = scope;
    this.leading = leads ? value : null;
    this.endedToken = null;
    this.cause = null;
    this.timeline = null;
    this.pending = null;
    this.flags = 0;
  }

  /**
   * The lock is gone for good (out of its store, ended and no longer kept): its slot of numbers goes back to its
   * table for the next lock. It reads no numbers after (NaN), and keeps none it is given.
   */
  dispose(): void {
    if (this.slot < 0) return;
    this.slots.give(this.slot);
    this.slot = -1;
  }

  private num(index: number): number {
    return this.slot < 0 ? Number.NaN : this.slots.get(this.slot, index);
  }

  private setNum(index: number, value: number): void {
    if (this.slot >= 0) this.slots.set(this.slot, index, value);
  }

  /** A subclass's number `k` (below `EXTRA_NUMBERS`); NaN until set. */
  protected extra(k: number): number {
    return this.num(this.nodeCount + OWN_NUMBERS + k);
  }

  protected setExtra(k: number, value: number): void {
    this.setNum(this.nodeCount + OWN_NUMBERS + k, value);
  }

  /** Bits of the nodes holding `held`, while the nodes agree (see `valueOn`). */
  private get heldBy(): number {
    return this.num(this.nodeCount + HELD_BY) || 0;
  }

  private set heldBy(nodes: number) {
    this.setNum(this.nodeCount + HELD_BY, nodes);
  }

  /** How many counted nodes hold the value the lock is shown with. */
  get quorumHeld(): number {
    return this.num(this.nodeCount + QUORUM_HELD) || 0;
  }

  set quorumHeld(nodes: number) {
    this.setNum(this.nodeCount + QUORUM_HELD, nodes);
  }

  /**
   * The nodes (one bit each, up to node 30) read since the last merge with the value they held and a TTL end of
   * their own: moved later (an extension), or written again after an end a notification told (see `madeAgain` in
   * `reduceLock`).
   */
  get renewedOn(): number {
    return this.num(this.nodeCount + RENEWED_ON) || 0;
  }

  set renewedOn(nodes: number) {
    this.setNum(this.nodeCount + RENEWED_ON, nodes);
  }

  /**
   * The nodes (one bit each, up to node 30) read with another value than they held (or none), since the last merge:
   * a node not among them holds what it held at that merge (a split vote's side, see `sideWon` in `reduceLock`).
   */
  get changedOn(): number {
    return this.num(this.nodeCount + CHANGED_ON) || 0;
  }

  set changedOn(nodes: number) {
    this.setNum(this.nodeCount + CHANGED_ON, nodes);
  }

  /** When the lock stops being held (epoch ms); null for a key without a TTL or a lock not held. */
  get expiresAt(): number | null {
    return this.time(EXPIRES_AT);
  }

  set expiresAt(at: number | null) {
    this.setTime(EXPIRES_AT, at);
  }

  get acquiredAt(): number | null {
    return this.time(ACQUIRED_AT);
  }

  set acquiredAt(at: number | null) {
    this.setTime(ACQUIRED_AT, at);
  }

  get ttlMs(): number | null {
    return this.time(TTL_MS);
  }

  set ttlMs(ms: number | null) {
    this.setTime(TTL_MS, ms);
  }

  get endedAt(): number | null {
    return this.time(ENDED_AT);
  }

  set endedAt(at: number | null) {
    this.setTime(ENDED_AT, at);
  }

  /** While the reachable nodes disagree (a multi-node write or delete half applied), hold the message until then; 0: not settling. */
  /**
   * Until when the nodes' disagreement is waited out (0: they agree). Kept negative when the wait began while
   * the console was still reading what was held at its start (see `settledFromStart`): no extra field per lock.
   */
  get settleUntil(): number {
    const at = this.num(this.nodeCount + SETTLE_UNTIL);
    return Number.isNaN(at) ? 0 : at;
  }

  /** When the wait for the nodes to agree ends (epoch ms), wherever it began. */
  get settlesAt(): number {
    return Math.abs(this.settleUntil);
  }

  /** The nodes disagreed on the lock as it was first read, while the console started: it was held before it. */
  get settledFromStart(): boolean {
    return this.settleUntil < 0;
  }

  set settleUntil(at: number) {
    this.setNum(this.nodeCount + SETTLE_UNTIL, at);
  }

  /**
   * Of a lock that ended: the nodes (one bit each) that did not answer when it ended and held its value then,
   * and have been read with nothing else since. What they still hold is what is left of the lock that ended
   * (its holder's delete could not reach them), not a new holder: it acquires nothing when they answer again.
   */
  get leftover(): number {
    return this.num(this.nodeCount + LEFTOVER) || 0;
  }

  set leftover(nodes: number) {
    this.setNum(this.nodeCount + LEFTOVER, nodes);
  }

  /** Node `node`'s expiry for the value it holds (NaN when it holds none). */
  expiryOn(node: number): number {
    return node >= 0 && node < this.nodeCount ? this.num(node) : Number.NaN;
  }

  setExpiryOn(node: number, expiry: number): void {
    if (node >= 0 && node < this.nodeCount) this.setNum(node, expiry);
  }

  /** Every node's expiry, written into `out` (which is returned). */
  expiriesInto(out: number[]): number[] {
    for (let i = 0; i < this.nodeCount; i++) out[i] = this.num(i);
    return out;
  }

  private time(slot: number): number | null {
    const value = this.num(this.nodeCount + slot);
    return Number.isNaN(value) ? null : value;
  }

  private setTime(slot: number, value: number | null): void {
    this.setNum(this.nodeCount + slot, value ?? Number.NaN);
  }

  /** Node `node`'s fingerprint of the key (null: absent). */
  valueOn(node: number): string | null {
    if (this.each !== null) return this.each[node] ?? null;
    return node <= MAX_BIT_NODE && (this.heldBy & (1 << node)) !== 0 ? this.held : null;
  }

  setValueOn(node: number, value: string | null): void {
    if (node < 0 || node >= this.nodeCount) return;
    if (this.each === null) {
      if (value === null) {
        this.heldBy &= ~(1 << node);
        if (this.heldBy === 0) this.held = null;
        return;
      }
      if (this.heldBy === 0 || this.heldBy === 1 << node) {
        this.held = value;
        this.heldBy = 1 << node;
        return;
      }
      if (this.held === value) {
        this.heldBy |= 1 << node;
        return;
      }
      this.each = this.valuesInto(new Array<string | null>(this.nodeCount));
    }
    this.each[node] = value;
    this.agreeAgain();
  }

  /** The copy a node already holds of `value` (each node's reply is its own string: one copy for all), else `value`. */
  keptCopy(value: string): string {
    if (this.each === null) return this.held === value ? this.held : value;
    for (const held of this.each) if (held === value) return held;
    return value;
  }

  /** Nodes' copies of `value` become `value` itself (one string for the lock's value and its kept reading). */
  shareValue(value: string): void {
    if (this.each === null) {
      if (this.held === value) this.held = value;
      return;
    }
    for (let i = 0; i < this.each.length; i++) if (this.each[i] === value) this.each[i] = value;
  }

  /**
   * Whether the nodes may hold different values (a split vote, a write between two nodes): `each` keeps them
   * (as it always does with more nodes than bits). False while they agree, nearly always.
   */
  get mayDisagree(): boolean {
    return this.each !== null;
  }

  /** The first node holding `value`; -1 when none does. */
  nodeHolding(value: string): number {
    for (let i = 0; i < this.nodeCount; i++) if (this.valueOn(i) === value) return i;
    return -1;
  }

  /** Every node's fingerprint, written into `out` (which is returned). */
  valuesInto(out: Array<string | null>): Array<string | null> {
    for (let i = 0; i < this.nodeCount; i++) out[i] = this.valueOn(i);
    return out;
  }

  /** Back to one value without an array once the nodes that hold one agree. */
  private agreeAgain(): void {
    const each = this.each;
    if (each === null || this.nodeCount > MAX_BIT_NODE + 1) return;
    let value: string | null = null;
    let by = 0;
    for (let i = 0; i < each.length; i++) {
      const held = each[i] ?? null;
      if (held === null) continue;
      if (value !== null && held !== value) return;
      value = held;
      by |= 1 << i;
    }
    this.held = value;
    this.heldBy = by;
    this.each = null;
  }
}

/** A scratch array per node count for a merge's view of the nodes' values (merges run one at a time). */
const mergeValues: Array<Array<string | null>> = [];
const valuesOf = (lock: LockRecord): Array<string | null> => lock.valuesInto((mergeValues[lock.nodeCount] ??= new Array<string | null>(lock.nodeCount).fill(null)));
const mergeExpiries: number[][] = [];
const expiriesOf = (lock: LockRecord): number[] => lock.expiriesInto((mergeExpiries[lock.nodeCount] ??= new Array<number>(lock.nodeCount).fill(Number.NaN)));

/** A table of slots for the locks of one store, on `nodes` nodes (see `LockRecord.dispose`). */
export function lockSlots(nodes: number): TimeSlots {
  return new TimeSlots(nodes + NUMBERS);
}

/** The slots of locks made without a table of their own, one table per slot width. */
const sharedTables: TimeSlots[] = [];
function sharedSlots(width: number): TimeSlots {
  return (sharedTables[width] ??= new TimeSlots(width));
}

/** What the locks of one store share: the nodes and how their readings count. */
export interface LockContext {
  /** The nodes whose readings count in a merge (while the console starts: every node). */
  counted: readonly boolean[];
  quorum: number;
  /** Nodes configured. */
  nodes: number;
  /** False until every node's first reconcile is done: locks found until then were already held. */
  watching: boolean;
  /** The operator's scope declaration for a key (from the lock patterns); null where none is declared. */
  declaredScope: (resource: string) => LockScope | null;
  /**
   * Whether the lock was first found by the reads that follow a change of the lock patterns bringing its key
   * in: it was held already, not acquired as it came into view.
   */
  coveredByPatterns?: (lock: LockRecord) => boolean;
  /**
   * Keys no node can be read for now though their nodes count (a Redis Cluster serving the slots it still covers,
   * one shard lost): merged as if every node were down. Null while there are none.
   */
  unreadable?: ((resource: string) => boolean) | null;
}

/** No node counts: what a key that cannot be read is merged with. */
const NONE_COUNTED: readonly boolean[] = Object.freeze([]);

/** An operator's force-release noted for a resource (here or on another console). */
export interface ForceHint {
  at: number;
  /** The value released; null when not given (then it explains whatever held the resource). */
  value: string | null;
  /** The operator's words. */
  detail: string | null;
  /**
   * The value was held on some node beside the value the lock showed when the release was noted (a stray value,
   * the side of a split vote not shown): its going is said on the lock's timeline, though the lock goes on.
   */
  aside?: boolean;
}

/**
 * A lock "acquired" with the very value whose hold ended a moment before: its holder took it again (a library
 * whose value names the client and thread, as Redisson's, does), or a node served an older copy of the key: a
 * failover to a replica that had not copied the end (a release, a force release), a restart from an older file.
 * Said on the timeline, since an operator who force-released it would otherwise read a new holder's acquisition.
 */
function backAgain(ended: { at: number; as: LockState }, now: number): string {
  const ago = Math.max(0, now - ended.at);
  const when = ago < 1_000 ? `${ago} ms` : `${(ago / 1000).toFixed(1)} s`;
  return `the same value as the hold ${ended.as} ${when} before: its holder took it again, or a node served an older copy (a failover to a replica that had not copied the end, a restart from an older file)`;
}

export type LockEventType = "acquired" | "extended" | "released" | "expired" | "evicted" | "force-released" | "lost";

/** What one step of a lock asks of the store, in the order it happened. */
export type LockEffect =
  /**
   * A timeline entry, also recorded in the history with `token` (the value it concerns). `heldSince` is the
   * lock's acquisition time at that moment, for a timeline made by this entry (see `ALREADY_HELD`).
   */
  | { type: "timeline"; item: { at: number; type: TimelineType; detail?: string }; token: string | null; heldSince: number | null }
  /** Recorded in the history only: a lock found by the first reconcile gets no timeline until asked for. */
  | { type: "history"; item: { at: number; type: TimelineType; detail?: string }; token: string | null }
  | { type: "lock-event"; event: LockEventType }
  | { type: "count"; counter: "acquisitions" | "expirations" }
  /** A foreign value seen acquired or extended, for the consoles to share when it was first seen. */
  /** `notBefore`: a shared record older than this (an earlier lock's, made of the same value) is replaced. */
  | { type: "first-seen"; token: string; seenAt: number; ttlMs: number | null; notBefore?: number }
  /** The value id now holding the lock, for the contention figures' waiters. */
  | { type: "holder"; id: string | null };

/**
 * The outcome of one step (reused from call to call: read it before the next). `outcome`:
 * `settling` the nodes disagree, the lock keeps its view until `settleUntil`; `never-held` no node holds it and
 * it was never listed (drop it); `idle` an ended lock, nothing to do; `ended` it ended now (it lingers, its timer
 * goes); `live` it is held, partial or elapsed.
 */
export interface LockStep {
  outcome: "settling" | "never-held" | "idle" | "ended" | "live";
  effects: LockEffect[];
  /** Something shown changed: the streams send it. */
  changed: boolean;
  /** When its expiry timer should fire next; NaN when it needs none. */
  wakeAt: number;
  /** The force hint given was used up by this end. */
  forceHintTaken: boolean;
}

export function newLockStep(): LockStep {
  return { outcome: "idle", effects: [], changed: false, wakeAt: Number.NaN, forceHintTaken: false };
}

const LOCK_EVENTS: { readonly [K in LockEventType]: LockEffect } = Object.freeze({
  acquired: Object.freeze({ type: "lock-event", event: "acquired" }),
  extended: Object.freeze({ type: "lock-event", event: "extended" }),
  released: Object.freeze({ type: "lock-event", event: "released" }),
  expired: Object.freeze({ type: "lock-event", event: "expired" }),
  evicted: Object.freeze({ type: "lock-event", event: "evicted" }),
  "force-released": Object.freeze({ type: "lock-event", event: "force-released" }),
  lost: Object.freeze({ type: "lock-event", event: "lost" }),
});
const COUNT_ACQUISITION: LockEffect = Object.freeze({ type: "count", counter: "acquisitions" });
const COUNT_EXPIRATION: LockEffect = Object.freeze({ type: "count", counter: "expirations" });

/**
 * Folds one or more nodes' new samples of the lock into it (so a Redlock write on three nodes is one change);
 * true when something shown changed. The merge comes after, in `reduceLock`. `now`: when they are applied (without
 * it, any change of a node's value begins a new wait for the nodes to agree).
 */
export function readSamples(lock: LockRecord, samples: readonly NodeSample[], now = Number.NaN): boolean {
  let visible = false;
  for (const sample of samples) {
    // (The record's times sit after its nodes' expiries: a node index past them would shift every one.)
    if (sample.node >= lock.nodeCount) continue;
    // Each node's reply is its own string: keep one copy of a value all nodes hold (100,000 locks × 3 nodes).
    if (sample.value !== null) sample.value = lock.keptCopy(sample.value);
    const before = lock.valueOn(sample.node);
    const beforeExpiry = lock.expiryOn(sample.node);
    // Read with another value (or none): what this node holds now is no remnant of the lock that ended.
    if (sample.value !== before && sample.node <= MAX_LEFTOVER_NODE && (lock.leftover & (1 << sample.node)) !== 0) lock.leftover &= ~(1 << sample.node);
    if (before !== null && sample.value === null) lock.endSeen = true;
    if (sample.value !== null && sample.value !== before) lock.replacedSeen = true;
    if (sample.value !== before && sample.node <= MAX_LEFTOVER_NODE) lock.changedOn |= 1 << sample.node;
    // An extension is a node's own TTL end moving later for the value it holds: the quorum's TTL end also
    // moves as other nodes' readings come in, and that is no extension.
    const sameEnd = sample.expiry === beforeExpiry || Math.abs(sample.expiry - beforeExpiry) <= (sample.slack ?? EXTEND_SLACK_MS);
    if (before !== null && sample.value === before && sample.cause !== null && sample.cause !== "lost" && !sameEnd) {
      // The key ended (a notification said how) and was written again with the same value, and a TTL of its own,
      // before this read: what ended it stands as the cause (see `madeAgain` in `reduceLock`), and no TTL moved.
      // (A key moved to another Redis Cluster primary, deleted on the old one, keeps its TTL end: not this.)
      lock.cause = sample.cause;
      lock.remadeSeen = true;
      if (sample.node <= MAX_LEFTOVER_NODE) lock.renewedOn |= 1 << sample.node;
    } else if (before !== null && sample.value === before && (sample.expiry > beforeExpiry + (sample.slack ?? EXTEND_SLACK_MS) || (sample.expiry === Infinity && Number.isFinite(beforeExpiry)))) {
      lock.extensionSeen = true;
      if (sample.node <= MAX_LEFTOVER_NODE) lock.renewedOn |= 1 << sample.node;
    }
    // A new write or delete on a node of a Redlock whose nodes already disagreed (held on two of three nodes, a
    // split vote): a read between its nodes' writes is waited out as any other, so a wait that ended before it
    // begins again (one still running is not drawn out). A lock on one instance of several disagrees by design.
    if (sample.value !== before && lock.scope !== "single" && lock.settleUntil > 0 && !(now < lock.settleUntil)) lock.settleUntil = 0;
    lock.setValueOn(sample.node, sample.value);
    if (sample.reading && sample.value !== null) {
      (lock.pending ??= []).push(sample.reading);
      // Same holders, other details: a reentrant hold count, a fair lock's queue.
      if (lock.reading !== null && sample.value === before && sample.value === keptFingerprint(lock.reading) && detailsDiffer(lock.reading, sample.reading)) visible = true;
    }
    lock.setExpiryOn(sample.node, sample.expiry);
    // What ended the value this node held: its deletion, or (a hand-over) a deletion and a new value; the
    // latter only while that value is still the lock's (a node that applies a hand-over late must not
    // pass its cause on to the lock that already followed).
    if (before !== null && sample.value !== before && sample.cause && (sample.value === null || before === lock.token || before === lock.leading)) {
      lock.cause = sample.cause;
    }
    if (before !== sample.value || (sample.value !== null && !(Math.abs(sample.expiry - beforeExpiry) <= 20))) {
      if (!(sample.expiry === Infinity && beforeExpiry === Infinity && before === sample.value)) visible = true;
    }
  }
  return visible;
}

/**
 * One step of the lock: merges what the nodes hold now into its state and says what happened. `visible`:
 * something shown changed already (a new reading, a node going up or down). `hint`: the operator's
 * force-release noted for this resource, if any. Mutates `lock`; the effects go into `step`.
 */
export function reduceLock(lock: LockRecord, context: LockContext, hint: ForceHint | null, now: number, visible: boolean, step: LockStep): LockStep {
  step.effects.length = 0;
  step.changed = false;
  step.wakeAt = Number.NaN;
  step.forceHintTaken = false;
  // What nodes keep of this lock since it ended counts for nothing (see `leftover`).
  if (lock.leftover !== 0) context = { ...context, counted: context.counted.map((c, i) => c && (i > MAX_LEFTOVER_NODE || (lock.leftover & (1 << i)) === 0)) };
  // A client writes (or deletes) a Redlock key on the nodes one by one: a read between two of those writes
  // sees the nodes disagree for a moment. Such a view counts (state, timeline, events, streams) only if it
  // lasts SETTLE_MS; until then the lock keeps its previous state.
  if (nodesAgree(lock, context.counted)) {
    // A value deleted and written again (a notification said so) on fewer nodes than the lock needs, so far: a client
    // writes the nodes one by one, and each node's write may come in a read of its own (its notification's). The rest
    // of that write is waited for as a disagreement is, so that a lock made again on a quorum is seen as one (see
    // `madeAgain`); one node's copy written again alone is the same lock once the wait is over.
    if (remadeShort(lock, context)) {
      if (lock.settleUntil === 0) lock.settleUntil = now + SETTLE_MS;
      if (now < lock.settlesAt) {
        step.outcome = "settling";
        return step;
      }
    }
    lock.settleUntil = 0;
  } else {
    if (lock.settleUntil === 0) lock.settleUntil = context.watching || lock.state !== null ? now + SETTLE_MS : -(now + SETTLE_MS);
    if (now < lock.settlesAt) {
      step.outcome = "settling";
      return step;
    }
  }
  // (A lock held on some nodes only when the console started is counted once its wait ends, which may be after
  // the start-up reads are done: it was still found held, not acquired.)
  const foundAtStart = !context.watching || lock.settledFromStart;
  if (lock.settledFromStart) lock.settleUntil = lock.settlesAt;
  let merged = merge(lock, context, now);
  const extensionSeen = lock.extensionSeen;
  const replacedSeen = lock.replacedSeen;
  const renewedOn = lock.renewedOn;
  const remadeSeen = lock.remadeSeen;
  const changedOn = lock.changedOn;
  lock.changedOn = 0;
  lock.endSeen = false;
  lock.extensionSeen = false;
  lock.replacedSeen = false;
  lock.renewedOn = 0;
  lock.remadeSeen = false;
  if (lock.unreadable !== merged.unreadable) {
    lock.unreadable = merged.unreadable;
    visible = true;
  }
  const wasLive = lock.state !== null && isLive(lock.state);
  const prev = wasLive ? { state: lock.state as "held", token: lock.token, leading: lock.leading, expiresAt: lock.expiresAt } : null;
  // Each node reclaims the keys whose TTL ran out in its own expiry cycle (up to about 100 ms apart, more than the
  // wait for the nodes to agree): the copies of a lock whose TTL ran out that are left, its value past their own
  // TTL, are that lock not reclaimed yet everywhere, elapsed, not a lock that lost its quorum (partial).
  if (prev !== null && prev.token !== null && prev.expiresAt !== null && prev.expiresAt <= now && merged.state === "partial" && !merged.unreadable && onlyPastCopiesOf(lock, context, prev.token, now)) {
    merged = { state: "elapsed", token: prev.token, leading: prev.token, quorumHeld: merged.quorumHeld, expiresAt: prev.expiresAt, unreadable: false };
  }
  const holderSet = lock.reading !== null && HOLDER_SETS.has(keptFormat(lock.reading));
  // (Spelt out, not `{ ...merged, holderSet, extensionSeen }`: that copy of the merge's result took V8's slow path,
  // about 800 bytes a step, for every change of every lock.)
  const shown = prev === null ? null : (prev.token ?? prev.leading);
  // (A partial lock's value gone counts only where a value arrived on a node, in its place or on another node: one
  // side of a split vote released leaves the other side, held before, going on.)
  // A split vote with no side ahead shows no value: it is gone where a value arrived and no node still holds what it
  // held at the last merge (every side of it released or replaced).
  const shownGone =
    prev !== null &&
    !merged.unreadable &&
    (shown !== null ? (prev.token !== null || replacedSeen) && !heldOnCounted(lock, context, shown) : replacedSeen && !anyKeptOnCounted(lock, context, changedOn));
  // A cause that stands while the lock goes on with the value it had says a key was deleted (or expired) and written
  // again with that value within one read: a new lock (a constant value such as `1`, which every client of a SET NX
  // script writes; Redisson's client and thread taking it again) where that happened on as many nodes as the lock
  // needs. One node's copy written again while the rest of a quorum goes on untouched is the same lock. A node
  // read before its own notification came counts by its TTL end that moved (the notification, read next with that
  // same end, then says nothing more); an extension of every node alongside one node written again is not told apart.
  // Some node must have been written again: a quorum extended while another node's copy expired is an extension.
  const madeAgain =
    remadeSeen &&
    lock.cause !== null &&
    lock.cause !== "lost" &&
    prev !== null &&
    prev.token !== null &&
    merged.token === prev.token &&
    renewedHolding(lock, context, renewedOn, prev.token) >= (lock.scope === "single" ? 1 : context.quorum);
  // A split vote with no side ahead (no value shown) decided: the value a quorum holds now was one of its sides, as
  // a node that held it then and was read with nothing else since says. (A node past 30 is taken as changed.)
  const sideWon = prev !== null && shown === null && merged.token !== null && keptOnCounted(lock, context, changedOn, merged.token);
  const steps = transitions(prev, { state: merged.state, token: merged.token, leading: merged.leading, expiresAt: merged.expiresAt, holderSet, extensionSeen, shownGone, madeAgain, sideWon });
  const effects = step.effects;
  for (const transition of steps) {
    switch (transition.type) {
      case "acquired": {
        lock.leftover = 0;
        // The value of the hold that ended before, come back (see `backAgain`).
        const endedBefore = lock.endedToken !== null && lock.endedToken === transition.token && lock.endedAt !== null && lock.state !== null ? { at: lock.endedAt, as: lock.state } : null;
        const decoded = decodeHolder(transition.token);
        lock.acquiredAt = decoded.acquiredAt ?? now;
        // A foreign value carries no acquisition time: the consoles agree on when it was first seen.
        // A lock first seen on fewer nodes than a quorum has no token yet: its most widely held value stands in.
        const seenValue = transition.token ?? merged.leading;
        lock.ttlMs = merged.expiresAt !== null ? Math.max(0, merged.expiresAt - now) : null;
        // (The shared record lives as long as the lock, plus a margin: its TTL as just read.)
        // A lock made again of a value seen before (Redisson's holder is its client and thread) must not take the
        // earlier lock's first sighting, still recorded for a while after it ended: one older than that end is replaced.
        if (decoded.acquiredAt === null && seenValue) {
          const firstSeen: Extract<LockEffect, { type: "first-seen" }> = { type: "first-seen", token: seenValue, seenAt: now, ttlMs: lock.ttlMs };
          if (lock.endedAt !== null) firstSeen.notBefore = lock.endedAt;
          // The same value's lock that ended in this very step: its sighting is that lock's, not this one's.
          if (madeAgain) firstSeen.notBefore = now;
          effects.push(firstSeen);
        }
        lock.endedAt = null;
        lock.endedToken = null;
        lock.cause = null;
        if (!foundAtStart && (lock.timeline?.length ?? 0) === 0 && context.coveredByPatterns?.(lock) === true) {
          // Came into view with a change of the patterns: held since before it, so no acquisition is counted
          // (a pattern that covers a thousand held locks is not a thousand acquisitions), and its history entry
          // says so rather than giving the change's time as an acquisition's.
          addTimeline(step, lock, lock.acquiredAt, "acquired", ALREADY_HELD_WHEN_COVERED, transition.token);
        } else if (foundAtStart && lock.timeline === null && !effects.some((e) => e.type === "timeline")) {
          // Found by the first reconcile (and no timeline made yet, not even by this step): its "acquired" entry
          // is made up when asked for (server/live/timeline.ts); the history still learns of the hold, so "who
          // held it at T" covers locks older than this console.
          effects.push({ type: "history", item: { at: lock.acquiredAt, type: "acquired", detail: ALREADY_HELD }, token: transition.token });
        } else {
          const who = decoded.holder?.label ?? decoded.holder?.host ?? (transition.token ? "a foreign client" : "unknown");
          const held = `${merged.quorumHeld} of ${context.nodes} nodes`;
          const detail =
            transition.token === null && transition.partial
              ? splitVoteText(lock, context, merged.quorumHeld)
              : transition.partial
                ? `by ${who}, on ${held} (no quorum)`
                : `by ${who}, on ${held}${decoded.fence ? `, fence ${decoded.fence}` : ""}`;
          addTimeline(step, lock, now, "acquired", endedBefore ? `${detail}; ${backAgain(endedBefore, now)}` : detail, transition.token);
          // (A lock found held while the console starts, above, was acquired before it: no acquisition is
          // counted for it, in the lock events /metrics exports or the acquisitions a second, or a restart with
          // a million locks held would show a million acquisitions.)
          effects.push(LOCK_EVENTS.acquired, COUNT_ACQUISITION);
        }
        if (transition.token) effects.push({ type: "holder", id: lockValueId(transition.token) });
        break;
      }
      case "extended":
        lock.ttlMs = merged.expiresAt !== null ? Math.max(0, merged.expiresAt - now) : null;
        // The shared first-seen record lives as long as the lock does.
        if (lock.token && decodeHolder(lock.token).acquiredAt === null) effects.push({ type: "first-seen", token: lock.token, seenAt: now, ttlMs: lock.ttlMs });
        addTimeline(step, lock, now, "extended", Number.isFinite(transition.by) ? `by ${(transition.by / 1000).toFixed(1)} s` : "TTL removed");
        effects.push(LOCK_EVENTS.extended);
        break;
      case "ttl-set":
        lock.ttlMs = merged.expiresAt !== null ? Math.max(0, merged.expiresAt - now) : null;
        if (lock.token && decodeHolder(lock.token).acquiredAt === null) effects.push({ type: "first-seen", token: lock.token, seenAt: now, ttlMs: lock.ttlMs });
        addTimeline(step, lock, now, "extended", lock.ttlMs === null ? "TTL set" : `TTL set: expires in ${(lock.ttlMs / 1000).toFixed(1)} s`);
        effects.push(LOCK_EVENTS.extended);
        break;
      case "holders": {
        const list = (ids: string[]) => ids.map((id) => id.slice(0, 40)).join(", ");
        const parts = [transition.joined.length > 0 ? `joined: ${list(transition.joined)}` : null, transition.left.length > 0 ? `left: ${list(transition.left)}` : null];
        // Recorded with the holder set it changed to: the lock history's hold of that moment (lock.token is still the set before).
        addTimeline(step, lock, now, "holders", parts.filter(Boolean).join("; "), merged.token ?? merged.leading);
        effects.push(LOCK_EVENTS.extended);
        // The lock is held on since it was acquired, whoever joins or leaves: the new holder set's shared first
        // sighting is the lock's own, not this change's (the next extension would read it back as the start).
        const next = merged.token ?? merged.leading;
        if (next !== null && lock.acquiredAt !== null && decodeHolder(next).acquiredAt === null) effects.push({ type: "first-seen", token: next, seenAt: lock.acquiredAt, ttlMs: lock.ttlMs });
        break;
      }
      case "replaced":
        // The previous lock ended (released, most often by a hand-over to the next waiter) and the next
        // one began before any read saw the key free: the end counts like any other. Where no value arrived (the
        // next is a value another client left on a node before, which outlived it), nothing was handed over.
        recordEnd(step, lock, hint, now, replacedSeen || madeAgain ? "replaced" : "ended");
        break;
      case "elapsed":
        addTimeline(
          step,
          lock,
          now,
          "elapsed",
          // The SETNX pattern's lock (and redis-lock's) ends at the time written in its value, often on a key with
          // no TTL: Redis never removes it, the next client that wants it takes it over.
          lock.token !== null && lock.expiresAt !== null && valueExpiry(lock.token) === lock.expiresAt
            ? "the expiry time in its value has passed; a client that wants the lock takes it over (a key without a TTL stays until then, or until force-released)"
            : "TTL ran out; Redis has not reclaimed the key yet",
        );
        break;
      case "partial":
        addTimeline(
          step,
          lock,
          now,
          "partial",
          merged.leading === null ? splitVoteText(lock, context, merged.quorumHeld) : `no value on a quorum: ${merged.quorumHeld} of ${context.nodes} nodes hold the most common one`,
        );
        break;
      case "quorum": {
        const held = `${merged.quorumHeld} of ${context.nodes} nodes`;
        if (!sideWon) {
          addTimeline(step, lock, now, "quorum", `a quorum holds its value: ${held}`);
          break;
        }
        // A split vote decided: its acquisition was counted when it began, with no holder; this side's is named now,
        // and its first sighting (none was shared for a split) is the split's, so every console counts its age alike.
        const decoded = decodeHolder(merged.token);
        const who = decoded.holder?.label ?? decoded.holder?.host ?? "a foreign client";
        if (decoded.acquiredAt !== null) lock.acquiredAt = decoded.acquiredAt;
        lock.ttlMs = merged.expiresAt !== null ? Math.max(0, merged.expiresAt - now) : null;
        addTimeline(step, lock, now, "quorum", `a quorum holds one side's value: by ${who}, on ${held}${decoded.fence ? `, fence ${decoded.fence}` : ""}`, merged.token);
        if (merged.token !== null) {
          if (decoded.acquiredAt === null && lock.acquiredAt !== null) effects.push({ type: "first-seen", token: merged.token, seenAt: lock.acquiredAt, ttlMs: lock.ttlMs });
          effects.push({ type: "holder", id: lockValueId(merged.token) });
        }
        break;
      }
      case "ended": {
        const reason = recordEnd(step, lock, hint, now, "ended");
        lock.endedAt = now;
        lock.endedToken = lock.token ?? lock.leading;
        // Nodes that did not answer as it ended and held its value: what they keep of it when they answer
        // again (its holder's delete never reached them) is no new acquisition.
        let leftover = 0;
        for (let i = 0; i < lock.nodeCount && i <= MAX_LEFTOVER_NODE; i++) if (!context.counted[i] && lock.valueOn(i) !== null && lock.valueOn(i) === lock.endedToken) leftover |= 1 << i;
        lock.leftover = leftover;
        lock.state = reason === "evicted" ? "expired" : reason;
        lock.token = null;
        lock.leading = null;
        lock.quorumHeld = 0;
        step.outcome = "ended";
        step.changed = true;
        return step;
      }
    }
  }
  if (merged.state === null) {
    // Never live (a key seen absent): nothing to show.
    step.outcome = lock.state === null ? "never-held" : "idle";
    return step;
  }
  // An operator's force release took the value the lock showed off the nodes while the lock goes on under another
  // (one side of a split vote): no end to relabel, so the release is said on its own. Only for the value shown
  // until this step: a hint left over from a release that ended the lock must not follow its next holder.
  const shownBefore = prev === null ? null : (prev.token ?? prev.leading);
  // (A split vote with no side ahead shows no value: the value released was one of its sides.)
  const splitBefore = prev !== null && shownBefore === null;
  const forcedAside =
    hint !== null &&
    !step.forceHintTaken &&
    hint.value !== null &&
    (shownBefore !== null || splitBefore) &&
    (forceHintApplies(hint, shownBefore, now) || (hint.aside === true && now - hint.at < FORCE_HINT_MS)) &&
    !holdsValue(lock, hint.value);
  if (forcedAside && hint.value !== null) {
    step.forceHintTaken = true;
    const rest = `the lock goes on with another value on ${merged.quorumHeld} of ${context.nodes} nodes`;
    addTimeline(step, lock, now, "force-released", hint.detail ? `${hint.detail}; ${rest}` : rest, hint.value);
  }
  step.changed =
    visible || steps.length > 0 || forcedAside || lock.state !== merged.state || lock.token !== merged.token || lock.leading !== merged.leading || lock.quorumHeld !== merged.quorumHeld || !sameExpiry(lock.expiresAt, merged.expiresAt);
  // The nodes' copy of the value (one string per lock for its nodes, its kept reading and its token, not two).
  lock.token = merged.token === null ? null : lock.keptCopy(merged.token);
  lock.leading = merged.leading === null ? null : lock.keptCopy(merged.leading);
  lock.quorumHeld = merged.quorumHeld;
  lock.expiresAt = merged.expiresAt;
  lock.state = merged.state;
  if (merged.expiresAt !== null) {
    step.wakeAt = expiryWakeAt(merged, merged.expiresAt, now);
    // Already past (a lock read again long after its TTL ran out: the probe's own read comes here): the next read, at
    // the probe's pace. A time in the past fires at the wheel's next turn, and each read's answer set one again: a read
    // every 100 ms for as long as the key stayed (a SETNX-pattern lock's, which no read removes).
    if (step.wakeAt <= now) step.wakeAt = probeAgainAt(lock, now);
  }
  // A reading that changes by itself (a waiter count that drops, a semaphore permit going stale): the lock is
  // read again then (see probeAgainAt); a time already past is being read again (the probe's own second), not
  // woken for at once in a loop.
  const changeAt = keptChangesAt(lock.reading);
  if (!Number.isNaN(changeAt)) {
    const at = changeAt > now ? changeAt : now + PROBE_AFTER_MS;
    if (Number.isNaN(step.wakeAt) || at < step.wakeAt) step.wakeAt = at;
  }
  // A node whose copy went (lost, deleted, expired, evicted) while the lock went on (a Redlock that kept its
  // quorum, or partial) says nothing of how the lock will end later: that end's own readings say it, or its TTL.
  lock.cause = null;
  step.outcome = "live";
  return step;
}

/** Whether some node holds `value` (or, for this engine's values, the same acquisition rewritten with its fence). */
export function holdsValue(lock: LockRecord, value: string): boolean {
  const id = lockValueId(value);
  for (let i = 0; i < lock.nodeCount; i++) {
    const held = lock.valueOn(i);
    if (held === value || (id !== null && held !== null && lockValueId(held) === id)) return true;
  }
  return false;
}

/**
 * What a split vote with no side ahead is said to be: how many values the nodes that count hold most widely, and on
 * how many nodes each (no node order in it: no value is named).
 */
function splitVoteText(lock: LockRecord, context: LockContext, most: number): string {
  const counts = new Map<string, number>();
  for (let i = 0; i < lock.nodeCount; i++) {
    const value = lock.valueOn(i);
    if (context.counted[i] && value !== null) counts.set(value, (counts.get(value) ?? 0) + 1);
  }
  let tied = 0;
  for (const count of counts.values()) if (count === most) tied += 1;
  return `split vote: ${tied} values on ${most} of ${context.nodes} nodes each, none on a quorum`;
}

/** `token`: the value the entry concerns; by default the one held until now (an end, an extension, a gap). */
function addTimeline(step: LockStep, lock: LockRecord, at: number, type: TimelineType, detail: string | undefined, token = lock.token ?? lock.leading): void {
  step.effects.push({ type: "timeline", item: detail === undefined ? { at, type } : { at, type, detail }, token, heldSince: lock.acquiredAt });
}

/**
 * Records the end of the lock's current value (timeline, live event, expiry count) and returns how it
 * ended: forced when an operator's force-release of it was noted, else by its cause or its TTL. The
 * timeline entry carries the operator's words, or else what the way it ended (`how`) says of it.
 */
function recordEnd(step: LockStep, lock: LockRecord, hint: ForceHint | null, now: number, how: "replaced" | "ended"): ReturnType<typeof endReason> {
  const forced = forceHintApplies(hint, lock.token ?? lock.leading, now);
  // Used once, so the holders that come after it (a busy resource changes hands every few ms) do not end "forced" too.
  if (forced) step.forceHintTaken = true;
  const reason = endReason(forced ? "force-released" : lock.cause, lock.expiresAt, now);
  const text = (forced ? hint?.detail : null) ?? endDetail(how, reason);
  addTimeline(step, lock, now, reason, text || undefined);
  step.effects.push(LOCK_EVENTS[reason]);
  if (reason === "expired" || reason === "evicted") step.effects.push(COUNT_EXPIRATION);
  return reason;
}

/** The end entry of a lock that ended `lost`. */
export const LOST_END_DETAIL = "a node lost its keys while its TTL ran: nobody released it, and its holder may still think it holds it";

function endDetail(how: "replaced" | "ended", reason: ReturnType<typeof endReason>): string | undefined {
  if (how === "replaced") return reason === "released" ? "handed straight to the next holder" : "the next holder took it at once";
  if (reason === "lost") return LOST_END_DETAIL;
  return reason === "evicted" ? "evicted under memory pressure (maxmemory)" : undefined;
}

/**
 * When the expiry timer of a live lock whose TTL ends at `expiresAt` fires: at that end; for an elapsed lock,
 * a moment after it (to read it again: see `probeAgainAt`). A partial lock stays partial once its last key's TTL
 * has run out (only the keys' going ends it), so past that end it is woken as an elapsed one is, to be read again;
 * and not at all while no node holding it can be read (a node that answers again merges it again). A time already
 * past would fire on every turn of the timer wheel (100 ms) for as long as Redis kept the keys or the nodes stayed
 * away: a merge ten times a second for each such lock.
 */
function expiryWakeAt(merged: MergedLock, expiresAt: number, now: number): number {
  if (merged.state === "elapsed") return expiresAt + PROBE_AFTER_MS;
  if (merged.state !== "partial" || expiresAt > now) return expiresAt;
  return merged.unreadable ? Number.NaN : expiresAt + PROBE_AFTER_MS;
}

/**
 * When a lock whose timer fired should be read again, else NaN: its TTL ran out long ago and Redis has not
 * reclaimed the key (reading it expires it lazily; a partial lock's last key alike, unless no node holding it can
 * be read), or its reading changes by itself now (a fair-lock waiter timed out, a semaphore permit went stale:
 * neither writes a key). Again a second later while no new reading comes (a lock past the expiry time in its value:
 * later and later, see below).
 */
export function probeAgainAt(lock: LockRecord, now: number): number {
  const past = lock.state === "elapsed" || (lock.state === "partial" && !lock.unreadable);
  if (past && lock.expiresAt !== null && now >= lock.expiresAt + PROBE_AFTER_MS) {
    // A lock that ends at the time in its value (the SETNX pattern), often on a key without a TTL, stays until a
    // client takes it over: no read removes it. It is read again as long after as it has been elapsed, at most
    // a minute later (an abandoned one is not read every second for ever).
    const value = lock.token ?? lock.leading;
    const inValue = value !== null && valueExpiry(value) === lock.expiresAt;
    return now + (inValue ? Math.min(VALUE_EXPIRY_PROBE_MAX_MS, Math.max(PROBE_AFTER_MS, now - lock.expiresAt)) : PROBE_AFTER_MS);
  }
  return now >= keptChangesAt(lock.reading) ? now + PROBE_AFTER_MS : Number.NaN;
}

/**
 * The operator's force-release of the lock that is ending now, if one was noted: recent, and for this
 * lock's value (or for whatever held the resource, when the value was not given).
 */
export function forceHintApplies(hint: ForceHint | null, ending: string | null, now: number): boolean {
  if (hint === null || now - hint.at >= FORCE_HINT_MS) return false;
  if (hint.value !== null && ending !== null && hint.value !== ending) {
    // (A fenced lock is rewritten with its fence: the same acquisition, by its id.)
    const id = lockValueId(hint.value);
    if (id === null || id !== lockValueId(ending)) return false;
  }
  return true;
}

/**
 * A force-release noted after the lock's keys went: `relabel` when it ended a moment ago as released or
 * expired (it was the operator: its state is now `force-released`), `reword` when it already ended forced
 * (the operator's words may come later), null when it did not just end.
 */
export function forceReleaseNoted(lock: LockRecord, now: number): "relabel" | "reword" | null {
  if (lock.state === null || lock.endedAt === null || now - lock.endedAt > RELABEL_WITHIN_MS) return null;
  if (lock.state === "force-released") return "reword";
  lock.state = "force-released";
  return "relabel";
}

/**
 * The first-seen time the consoles agreed on for `token`; true when it changed the lock's acquisition time
 * (the lock's age counts from there on every console, whichever saw it first by its own clock).
 */
export function adoptFirstSeen(lock: LockRecord, token: string, at: number): boolean {
  if (!adoptsFirstSeen(lock, token, at)) return false;
  lock.acquiredAt = at;
  return true;
}

/** Whether `adoptFirstSeen` would change the lock. */
export function adoptsFirstSeen(lock: LockRecord, token: string, at: number): boolean {
  return (lock.token ?? lock.leading) === token && lock.acquiredAt !== null && at !== lock.acquiredAt;
}

/**
 * Whether a node of a live lock was read with its value written again after an end a notification told, on fewer of
 * the nodes that count than a quorum, since the last merge (see `reduceLock`). Never for a lock on one instance.
 */
function remadeShort(lock: LockRecord, context: LockContext): boolean {
  if (!lock.remadeSeen || !context.watching || lock.cause === null || lock.cause === "lost" || lock.token === null || lock.scope === "single") return false;
  if (lock.state === null || !isLive(lock.state)) return false;
  return renewedHolding(lock, context, lock.renewedOn, lock.token) < context.quorum;
}

/** How many of the nodes in `renewed` (a bit each) count and hold `value`. */
function renewedHolding(lock: LockRecord, context: LockContext, renewed: number, value: string): number {
  let n = 0;
  for (let i = 0; i < lock.nodeCount && i <= MAX_LEFTOVER_NODE; i++) if ((renewed & (1 << i)) !== 0 && context.counted[i] && lock.valueOn(i) === value) n += 1;
  return n;
}

/** Whether a node whose readings count, and that is not in `changed` (a bit each), holds `value`. */
function keptOnCounted(lock: LockRecord, context: LockContext, changed: number, value: string): boolean {
  for (let i = 0; i < lock.nodeCount && i <= MAX_LEFTOVER_NODE; i++) if ((changed & (1 << i)) === 0 && context.counted[i] && lock.valueOn(i) === value) return true;
  return false;
}

/**
 * Whether a node whose readings count, and that is not in `changed` (a bit each), holds a value: one it held at the
 * last merge. (A node past 30, tracked in no bit, counts as keeping what it holds.)
 */
function anyKeptOnCounted(lock: LockRecord, context: LockContext, changed: number): boolean {
  for (let i = 0; i < lock.nodeCount; i++) if (context.counted[i] && lock.valueOn(i) !== null && (i > MAX_LEFTOVER_NODE || (changed & (1 << i)) === 0)) return true;
  return false;
}

/** Whether every node whose readings count holds `value`, with its TTL run out by `now`, or nothing. */
function onlyPastCopiesOf(lock: LockRecord, context: LockContext, value: string, now: number): boolean {
  for (let i = 0; i < lock.nodeCount; i++) {
    if (!context.counted[i]) continue;
    const held = lock.valueOn(i);
    if (held !== null && (held !== value || !(lock.expiryOn(i) <= now))) return false;
  }
  return true;
}

/** Whether a node whose readings count holds `value`. */
function heldOnCounted(lock: LockRecord, context: LockContext, value: string): boolean {
  for (let i = 0; i < lock.nodeCount; i++) if (context.counted[i] && lock.valueOn(i) === value) return true;
  return false;
}

function nodesAgree(lock: LockRecord, counted: readonly boolean[]): boolean {
  let seen: string | null | undefined;
  for (let i = 0; i < lock.nodeCount; i++) {
    if (!counted[i]) continue;
    const value = lock.valueOn(i);
    if (seen === undefined) seen = value;
    else if (value !== seen) return false;
  }
  return true;
}

/**
 * The quorum vote over the nodes' fingerprints, then the lock's scope: a `single` lock (by declaration, by
 * its format, or inferred from where its value is) is held while one node holds it, so a lock that lives on
 * one instance by design never reads as a Redlock that lost its quorum.
 */
function merge(lock: LockRecord, context: LockContext, now: number): MergedLock {
  const up = context.unreadable?.(lock.resource) ? NONE_COUNTED : context.counted;
  const samples = { up, values: valuesOf(lock), expiries: expiriesOf(lock), quorum: context.quorum };
  // A lock that ended stays ended while no reachable node holds it: what a node that is down held when last
  // read (a force release could not reach it) is no new holder (it is read again when the node is back).
  const ended = lock.state !== null && !isLive(lock.state);
  // The value the lock is shown with goes on leading a split vote it is one side of (see `MergedLock.leading`).
  const shown = ended || lock.state === null ? null : (lock.token ?? lock.leading);
  const merged = mergeSamples(samples, now, { endSeen: lock.endSeen || ended, ended, shown });
  const leading = merged.token ?? merged.leading;
  const fresh = lock.pending;
  if (lock.pending) {
    const previousReading = lock.reading;
    // Keep the reading of the value the lock is held with (an ended lock keeps its last one).
    if (merged.state !== null) {
      const previous = lock.reading;
      const previousFingerprint = previous === null ? null : keptFingerprint(previous);
      // The latest reading of that value: a key written twice in a moment (SET NX, then EXPIRE; HSET, then
      // PEXPIRE) is read twice, and the first reading (no TTL yet) must not stand for the key as it is now.
      // A split vote with no side ahead (no leading value) keeps the reading it has: its layout, not its holder, is
      // shown (a first one comes from whichever reading came last).
      const keepPrevious = leading === null ? previous !== null : previousFingerprint === leading;
      const next = latestOf(lock.pending, leading) ?? (keepPrevious ? null : (lock.pending[lock.pending.length - 1] ?? null));
      // The same value read again keeps the reading already held (one copy of its strings, not one per read).
      if (next !== null && !(previous !== null && previousFingerprint === next.fingerprint && !detailsDiffer(previous, next))) lock.reading = keep(next);
      const fingerprint = lock.reading === null ? undefined : keptFingerprint(lock.reading);
      if (fingerprint !== undefined) lock.shareValue(fingerprint);
    }
    lock.pending = merged.state !== null && lock.mayDisagree ? readingsAside(lock, lock.pending, lock.reading, previousReading) : null;
  }
  if (merged.state === null) return merged;
  const format = lock.reading === null ? "unknown" : keptFormat(lock.reading);
  // Nodes holding any value for the key: the same key held on several nodes (even with different values, a
  // split vote) is a multi-node lock; a single-instance lock lives on one.
  let holding = 0;
  const counted = context.counted;
  for (let i = 0; i < lock.nodeCount; i++) if (counted[i] && lock.valueOn(i) !== null) holding += 1;
  const scope = inferScope({
    declared: context.declaredScope(lock.resource),
    format: formatByName(format).scope,
    nodes: context.nodes,
    holding: merged.unreadable ? merged.quorumHeld : holding,
    previous: lock.scope,
  });
  lock.scope = scope;
  if (scope === "single" && merged.state === "partial" && context.quorum > 1) return mergeSamples({ ...samples, quorum: 1 }, now, { endSeen: false, shown });
  if (merged.state === "partial" && !merged.unreadable && lock.reading !== null && HOLDER_SETS.has(format) && keptReading(lock.reading).redisType !== "string") {
    // No two nodes hold the same set of holders, yet each holder may hold a quorum of its own. (Not a string
    // value, a redis-semaphore mutex: its text is one holder, whatever lines it has.)
    const voted = voteHolders(samples, now);
    if (voted !== null && voted.token !== null) {
      lock.reading = holderSetReading(lock.reading, fresh, voted.token);
      // A node's expiry is its key's, which its latest holder sets: where the voted holders' own ends are
      // known, the lock ends with the last of them.
      const holders = keptHolders(keptReading(lock.reading));
      if (voted.expiresAt !== null && holders.every((h) => h.expiresAt !== undefined)) {
        const own = Math.max(...holders.map((h) => h.expiresAt as number));
        if (own < voted.expiresAt) return { ...voted, expiresAt: own, state: own <= now ? "elapsed" : voted.state };
      }
      return voted;
    }
  }
  return merged;
}

/** A split vote's holder (see `splitVoteHolders`): the ids of the nodes holding it. */
export type SideHolder = FormatHolder & { nodes: string[] };

/**
 * The holders of a split vote with no side ahead (no value on a quorum, none leading): every side's, each with the
 * nodes (of those whose readings count) holding it, in node order (the holders of node 0's value first). Which
 * side was read last changes nothing. A holder on several sides (a member of two semaphore sets) is listed once,
 * with all its nodes. A side's holders come from its latest reading (the one kept, or the one kept aside for
 * it: see `readingsAside`); without one, from its value alone.
 */
export function splitVoteHolders(lock: LockRecord, counted: readonly boolean[], nodeIds: readonly string[]): SideHolder[] {
  const byId = new Map<string, SideHolder>();
  const keptValue = lock.reading === null ? null : keptFingerprint(lock.reading);
  // (Of formats whose value is one holder, the value is its id, whatever lines it has.)
  const oneHolder = lock.reading === null || keptReading(lock.reading).redisType === "string";
  for (let i = 0; i < lock.nodeCount; i++) {
    const value = counted[i] ? lock.valueOn(i) : null;
    if (value === null) continue;
    const aside = lock.pending === null ? null : latestOf(lock.pending, value);
    const holders =
      lock.reading !== null && value === keptValue ? keptHolders(keptReading(lock.reading)) : aside !== null ? aside.holders : oneHolder ? [{ id: value }] : value.split("\n").map((id) => ({ id }));
    const node = nodeIds[i] ?? `node-${i}`;
    for (const h of holders) {
      const listed = byId.get(h.id);
      if (listed === undefined) byId.set(h.id, { ...h, nodes: [node] });
      else if (!listed.nodes.includes(node)) listed.nodes.push(node);
    }
  }
  return [...byId.values()];
}

/**
 * The kept reading of a holder set that no node holds as a whole (see `voteHolders`): the holders voted in,
 * with the details the latest readings (or the reading kept before) give them.
 */
function holderSetReading(previous: Kept, fresh: readonly FormatReading[] | null, token: string): Kept {
  const base = keptReading(previous);
  const details = new Map<string, FormatHolder>();
  for (const h of keptHolders(base)) details.set(h.id, h);
  if (fresh) for (const r of fresh) if (r.format === base.format) for (const h of r.holders) details.set(h.id, h);
  const holders = token.split("\n").map((id) => details.get(id) ?? { id });
  return { ...base, fingerprint: token, holders };
}

/**
 * What a merge keeps of `pending` while the nodes hold different values: the latest reading of each value a node
 * still holds (up or down) other than the one the lock is shown with (`kept`), and the reading it was shown with
 * until this merge (`before`) where a node still holds that value. A later merge that moves the lock to one of those
 * values with no new reading of it (the node holding the value shown restarts empty, or goes down) takes its reading
 * from here, so the holder shown is one some node holds. Compacted in place (at most one reading per node); null
 * when nothing is left. Runs only while the nodes disagree, never for a lock whose nodes agree.
 */
function readingsAside(lock: LockRecord, pending: FormatReading[], kept: Kept | null, before: Kept | null): FormatReading[] | null {
  const keptValue = kept === null ? null : keptFingerprint(kept);
  let w = 0;
  for (let i = 0; i < pending.length; i++) {
    const reading = pending[i] as FormatReading;
    const value = reading.fingerprint;
    if (value === keptValue || lock.nodeHolding(value) < 0) continue;
    let later = false;
    for (let j = i + 1; j < pending.length && !later; j++) later = (pending[j] as FormatReading).fingerprint === value;
    if (!later) pending[w++] = reading;
  }
  pending.length = w;
  if (before !== null && before !== kept) {
    const value = keptFingerprint(before);
    if (value !== keptValue && lock.nodeHolding(value) >= 0 && latestOf(pending, value) === null) pending.push(readingOf(before));
  }
  return pending.length > 0 ? pending : null;
}

/** A kept reading as a reading again (with no node times: a merge reads only its holders and details). */
function readingOf(kept: Kept): FormatReading {
  const { holders, ...rest } = keptReading(kept);
  return { ...rest, holders: holders ?? [{ id: rest.fingerprint }], expiresAt: Number.NaN, keyExpiresAt: Number.NaN };
}

/** The last of `readings` (the latest read) with that fingerprint, or null. */
function latestOf(readings: readonly FormatReading[], fingerprint: string | null): FormatReading | null {
  for (let i = readings.length - 1; i >= 0; i--) if ((readings[i] as FormatReading).fingerprint === fingerprint) return readings[i] as FormatReading;
  return null;
}

function detailsDiffer(kept: Kept, b: FormatReading): boolean {
  // (A kept reading's null holders are one holder with nothing but its id.)
  const a = keptDetails(kept);
  const ah = a.holders;
  const bh = b.holders;
  if (a.waiters !== b.waiters || !sameExpiry(typeof kept === "string" ? null : (kept.changesAt ?? null), b.changesAt ?? null) || a.warnings.length !== b.warnings.length || (ah?.length ?? 1) !== (bh?.length ?? 1)) return true;
  const n = ah?.length ?? 1;
  for (let i = 0; i < n; i++) {
    const x = ah?.[i];
    const y = bh?.[i];
    if (x?.count !== y?.count) return true;
    // A holder's own start and end (a redis-semaphore permit refreshed: a new score, a new TTL).
    if (!sameExpiry(x?.since ?? null, y?.since ?? null) || !sameExpiry(x?.expiresAt ?? null, y?.expiresAt ?? null)) return true;
  }
  return false;
}

function sameExpiry(a: number | null, b: number | null): boolean {
  if (a === null || b === null) return a === b;
  return Math.abs(a - b) <= 20;
}
