import "server-only";
import { formatByName, inferScope, type FormatName, type FormatReading, type LockScope } from "@/lib/locks/formats";
import { formatView } from "@/lib/locks/formats/view";
import type { LockSummary } from "@/lib/locks/groups";
import { decodeHolder, endReason, EXTEND_SLACK_MS, mergeSamples, transitions, type EndCause, type MergedLock } from "@/lib/locks/merge";
import { isLive, type Lock, type LockDetail, type LockState, type TimelineEntry, type TimelineType } from "@/lib/locks/types";
import { BucketCounter, pushCapped } from "@/lib/locks/window";
import { lockValueId } from "@lockscope/redlock";
import type { ContentionEvent } from "@lockscope/redlock";
import type { HistorySink } from "../history/recorder";
import { ContentionTracker } from "./contention";
import type { LiveEvents } from "./events";

/** An ended lock stays in the table this long (showing how it ended) before it leaves the list. */
export const LINGER_MS = 5_000;
/** Timeline entries kept per resource. */
export const TIMELINE_CAP = 100;
/** Ended locks whose timeline stays available on the lock page. */
export const RECENT_CAP = 10_000;
export const RECENT_TTL_MS = 30 * 60_000;
/** A key whose TTL ran out this long ago and that Redis still has not reclaimed is read again (lazily expiring it). */
const PROBE_AFTER_MS = 1_000;
/** A force-release noted this long before the keys vanish explains their going. */
const FORCE_HINT_MS = 10_000;
const WHEEL_MS = 100;
/** How long a view where the reachable nodes disagree is held back, waiting for the rest of a multi-node write. */
export const SETTLE_MS = 30;
const ALREADY_HELD = "already held when the console started watching";

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
}

/** Formats whose value is a set of holders that join and leave one lock (see `LockSummary.holderSet`). */
const HOLDER_SETS: ReadonlySet<FormatName> = new Set<FormatName>(["redis-semaphore", "redisson-rw"]);

interface Entry {
  resource: string;
  values: Array<string | null>;
  expiries: number[];
  /** null until first counted. */
  state: LockState | null;
  token: string | null;
  leading: string | null;
  quorumHeld: number;
  expiresAt: number | null;
  acquiredAt: number | null;
  ttlMs: number | null;
  endedAt: number | null;
  endedToken: string | null;
  cause: EndCause;
  /** null until something happens to a lock found already held at start (saves an array per lock). */
  timeline: TimelineEntry[] | null;
  /** When this lock was last sent to the streams (per-lock coalescing). */
  lastSentAt: number;
  /** While the reachable nodes disagree (a multi-node write or delete half applied), hold the message until then. */
  settleUntil: number;
  wheelAt: number;
  /** A node was read without the value it held, since the last merge: the end was seen, not guessed. */
  endSeen: boolean;
  /** A node was read with a later TTL end for the value it held, since the last merge. */
  extensionSeen: boolean;
  /** Every node that holds it is unreadable: the view is the last readings'. */
  unreadable: boolean;
  /**
   * One decoded reading of the value the lock is held with (not one per node: 100,000 locks × 3 nodes), kept
   * once it ended for its row and page; the lock's format fields are built from it when served.
   */
  reading: FormatReading | null;
  /** Readings that arrived since the last merge, for it to pick the leading value's from; null when none. */
  pending: FormatReading[] | null;
  /** null until first counted. */
  scope: LockScope | null;
}

export interface LockCounts {
  byState: Record<LockState, number>;
  /** acquiredAt of the longest-held lock still held (held or elapsed), null when none. */
  oldestHeldAcquiredAt: number | null;
  held: number;
  /** Live locks that never expire by themselves (the `no-ttl` warning). */
  withoutTtl: number;
}

/** What `briefs()` gives of each listed lock. */
export type LockBrief = { -readonly [K in "resource" | "state" | "expiresAt" | "acquiredAt"]: Lock[K] };

export interface DrainedChanges {
  upserts: Lock[];
  removed: string[];
  contention: Array<{ resource: string } & Lock["contention"]>;
}

const emptyCounts = (): Record<LockState, number> => ({ held: 0, partial: 0, elapsed: 0, released: 0, expired: 0, "force-released": 0 });

/**
 * Every lock the watchers see, merged across nodes, with its timeline. All mutation goes through
 * `apply` (new samples), `setNodeUp`, `tick` (time passing) and the telemetry hooks; the streams drain the
 * changed locks with `drain`, at most one message per lock per coalescing window.
 */
export class LockStore {
  readonly nodeIds: readonly string[];
  readonly quorum: number;
  /** The deployment these nodes are, named on every lock this store builds. */
  deployment = "default";
  private readonly nodeUp: boolean[];
  private readonly live = new Map<string, Entry>();
  private readonly recent = new Map<string, Entry>();
  private readonly changed = new Set<string>();
  private readonly removed = new Set<string>();
  private readonly contentionChanged = new Set<string>();
  /** Locks whose nodes disagree, waiting for the rest of a multi-node write (checked every tick). */
  private readonly settling = new Set<string>();
  /** Ended locks still listed, oldest end first (a Map: removing the head is O(1), and a re-ended lock moves to the back). */
  private readonly lingering = new Map<string, number>();
  /**
   * Expiry timers in 100 ms buckets. A lock is in one bucket at a time (rescheduling moves it), so a lease
   * renewed every second costs one entry however long it lives.
   */
  private readonly wheel = new Map<number, Set<string>>();
  private wheelCursor = Math.floor(Date.now() / WHEEL_MS);
  private readonly byState = emptyCounts();
  private readonly forceHints = new Map<string, { at: number; value: string | null; detail: string | null }>();
  private oldestCache: { at: number; value: number | null; withoutTtl: number } | null = null;
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
    return this.started;
  }

  set watching(on: boolean) {
    if (on === this.started) return;
    this.started = on;
    if (!on) return;
    const now = Date.now();
    for (const entry of this.live.values()) this.recompute(entry, now, false);
  }

  private started = false;
  /** Every node counted: the merge's view while the console is starting. */
  private readonly allNodes: readonly boolean[];
  /** Called with resources whose TTL ran out long ago and should be read again. */
  onProbe: (resources: string[]) => void = () => {};
  /** The operator's scope declaration for a key (from the lock patterns); null where none is declared. */
  declaredScope: (resource: string) => LockScope | null = () => null;
  /**
   * Where every timeline entry is also recorded, for the lock history in PostgreSQL (null without one). It
   * only queues: the live view never waits for the database.
   */
  history: HistorySink | null = null;

  /**
   * Told of every foreign lock value acquired or extended (engine values carry their own acquisition time),
   * so that the consoles can share when it was first seen: see `server/live/first-seen.ts`.
   */
  firstSeen: ((resource: string, token: string, seenAt: number, ttlMs: number | null) => void) | null = null;

  constructor(
    nodeIds: readonly string[],
    quorum: number,
    private readonly events: LiveEvents,
  ) {
    this.nodeIds = nodeIds;
    this.quorum = quorum;
    this.nodeUp = nodeIds.map(() => false);
    this.allNodes = nodeIds.map(() => true);
  }

  /**
   * The first-seen time the consoles agreed on for `token` (the first console's sighting, recorded on the
   * nodes): the lock's age counts from there on every console, whichever saw it first by its own clock.
   */
  adoptFirstSeen(resource: string, token: string, at: number): void {
    const entry = this.live.get(resource);
    if (!entry || (entry.token ?? entry.leading) !== token || entry.acquiredAt === null || at === entry.acquiredAt) return;
    entry.acquiredAt = at;
    this.changed.add(resource);
  }

  // ---- reading -------------------------------------------------------------------------------------

  list(now = Date.now()): Lock[] {
    const out: Lock[] = [];
    for (const entry of this.live.values()) if (entry.state !== null) out.push(this.build(entry, now));
    return out;
  }

  /**
   * The few fields of every listed lock that counting needs, without building it: one view object, refilled
   * for each lock (read it in `visit`, keep nothing of it). A scrape of 100,000 locks builds none.
   */
  eachBrief(visit: (brief: Readonly<LockBrief>) => void): void {
    const view: LockBrief = { resource: "", state: "held", expiresAt: null, acquiredAt: undefined };
    for (const entry of this.live.values()) {
      if (entry.state === null) continue;
      view.resource = entry.resource;
      view.state = entry.state;
      view.expiresAt = entry.expiresAt;
      view.acquiredAt = entry.acquiredAt ?? undefined;
      visit(view);
    }
  }

  /** Live resources in the list (for a snapshot: built lazily, part by part). */
  resources(): string[] {
    const out: string[] = [];
    for (const entry of this.live.values()) if (entry.state !== null) out.push(entry.resource);
    return out;
  }

  /**
   * Every listed lock's few fields for grouping, search and sort (`server/live/groups.ts`), read straight from
   * the entries: no `Lock` is built, no format view decoded (a million locks per request). `visit` gets the
   * same object each time, refilled: it copies what it keeps.
   */
  summaries(visit: (summary: Readonly<LockSummary>) => void, now = Date.now()): void {
    const summary: LockSummary = { resource: "", state: "held", acquiredAt: null, expiresAt: null, token: null, quorumHeld: 0, attemptsPerMin: null, waiters: null };
    for (const entry of this.live.values()) {
      if (entry.state === null) continue;
      // As `contentionOf` says it, from the format's name rather than a built view: engine telemetry (0 when
      // none came), a library's queue, or nothing visible.
      const source = entry.reading ? formatByName(entry.reading.format).contention : null;
      if (this.contention.has(entry.resource)) {
        const figures = this.contention.get(entry.resource, now, entry.token ? lockValueId(entry.token) : null);
        summary.attemptsPerMin = figures.attemptsPerMin;
        summary.waiters = figures.waiters;
      } else {
        summary.attemptsPerMin = source === "engine" ? 0 : null;
        summary.waiters = source === "engine" ? 0 : source === "queue" ? (entry.reading?.waiters ?? null) : null;
      }
      summary.resource = entry.resource;
      summary.state = entry.state;
      summary.acquiredAt = entry.acquiredAt;
      summary.expiresAt = entry.expiresAt;
      summary.token = entry.token ?? entry.leading ?? entry.endedToken;
      summary.quorumHeld = entry.quorumHeld;
      visit(summary);
    }
  }

  /** The listed lock, built now; null when it left the list. */
  lock(resource: string, now = Date.now()): Lock | null {
    const entry = this.live.get(resource);
    return entry && entry.state !== null ? this.build(entry, now) : null;
  }

  get(resource: string, now = Date.now()): LockDetail | null {
    const entry = this.live.get(resource) ?? this.recent.get(resource);
    if (!entry || entry.state === null) return null;
    return { ...this.build(entry, now), timeline: this.timelineOf(entry).slice(-TIMELINE_CAP), contentionHistory: this.contention.history(resource, now) };
  }

  counts(now = Date.now()): LockCounts {
    if (!this.oldestCache || now - this.oldestCache.at > 1_000) {
      let oldest: number | null = null;
      let withoutTtl = 0;
      for (const entry of this.live.values()) {
        if ((entry.state === "held" || entry.state === "elapsed") && entry.acquiredAt !== null && (oldest === null || entry.acquiredAt < oldest)) {
          oldest = entry.acquiredAt;
        }
        if (entry.state !== null && isLive(entry.state) && entry.reading?.warnings.includes("no-ttl")) withoutTtl += 1;
      }
      this.oldestCache = { at: now, value: oldest, withoutTtl };
    }
    return {
      byState: { ...this.byState },
      oldestHeldAcquiredAt: this.oldestCache.value,
      held: this.byState.held + this.byState.elapsed,
      withoutTtl: this.oldestCache.withoutTtl,
    };
  }

  isNodeUp(index: number): boolean {
    return this.nodeUp[index] ?? false;
  }

  /** Keys a node is known to hold (for the reconcile's "gone while we were away"). */
  knownOn(node: number): string[] {
    const out: string[] = [];
    for (const entry of this.live.values()) {
      if (entry.values[node] !== null && entry.values[node] !== undefined) out.push(entry.resource);
    }
    return out;
  }

  // ---- writing -------------------------------------------------------------------------------------

  /** New samples of one resource from one or more nodes, merged at once (so a Redlock write on three nodes is one change). */
  apply(resource: string, samples: readonly NodeSample[], now = Date.now()): void {
    let entry = this.live.get(resource);
    if (!entry) {
      if (samples.every((s) => s.value === null)) return;
      entry = this.revive(resource);
    }
    let visible = false;
    for (const sample of samples) {
      // Each node's reply is its own string: keep one copy of a value all nodes hold (100,000 locks × 3 nodes).
      if (sample.value !== null) {
        for (const held of entry.values) {
          if (held !== null && held === sample.value) {
            sample.value = held;
            break;
          }
        }
      }
      const before = entry.values[sample.node] ?? null;
      const beforeExpiry = entry.expiries[sample.node] ?? Number.NaN;
      if (before !== null && sample.value === null) entry.endSeen = true;
      // An extension is a node's own TTL end moving later for the value it holds: the quorum's TTL end also
      // moves as other nodes' readings come in, and that is no extension.
      if (before !== null && sample.value === before && (sample.expiry > beforeExpiry + EXTEND_SLACK_MS || (sample.expiry === Infinity && Number.isFinite(beforeExpiry)))) {
        entry.extensionSeen = true;
      }
      entry.values[sample.node] = sample.value;
      if (sample.reading && sample.value !== null) {
        (entry.pending ??= []).push(sample.reading);
        // Same holders, other details: a reentrant hold count, a fair lock's queue.
        if (entry.reading && sample.value === before && sample.value === entry.reading.fingerprint && detailsDiffer(entry.reading, sample.reading)) visible = true;
      }
      entry.expiries[sample.node] = sample.expiry;
      // What ended the value this node held: its deletion, or (a hand-over) a deletion and a new value; the
      // latter only while that value is still the lock's (a node that applies a hand-over late must not
      // pass its cause on to the lock that already followed).
      if (before !== null && sample.value !== before && sample.cause && (sample.value === null || before === entry.token || before === entry.leading)) {
        entry.cause = sample.cause;
      }
      if (before !== sample.value || (sample.value !== null && !(Math.abs(sample.expiry - beforeExpiry) <= 20))) {
        if (!(sample.expiry === Infinity && beforeExpiry === Infinity && before === sample.value)) visible = true;
      }
    }
    this.recompute(entry, now, visible);
  }

  setNodeUp(index: number, up: boolean, now = Date.now()): void {
    if (this.nodeUp[index] === up) return;
    this.nodeUp[index] = up;
    // While starting, every node counts already (see `watching`).
    if (!this.started) return;
    for (const entry of this.live.values()) {
      if (entry.values[index] !== null && entry.values[index] !== undefined) this.recompute(entry, now, true);
    }
  }

  /** Marks a watcher's blind spot in the timelines of the locks the node holds. */
  markGap(index: number, downMs: number, now = Date.now()): void {
    const nodeId = this.nodeIds[index] ?? `node-${index}`;
    const detail = downMs > 0 ? `no notifications from ${nodeId} for ${(downMs / 1000).toFixed(1)} s; state reconciled by SCAN` : `state reconciled by SCAN`;
    for (const entry of this.live.values()) {
      if (entry.values[index] !== null && entry.values[index] !== undefined && entry.state !== null && isLive(entry.state)) {
        this.addTimeline(entry, { at: now, type: "gap", node: nodeId, detail });
      }
    }
  }

  recordContention(event: ContentionEvent, now = Date.now()): void {
    if (!this.contention.record(event, now)) return;
    this.contentionChanged.add(event.resource);
    const entry = this.live.get(event.resource);
    if (entry) {
      const timeline = this.timelineOf(entry);
      const last = timeline[timeline.length - 1];
      const who = event.label ?? event.host ?? event.waiterId.slice(0, 6);
      if (last && last.type === "attempts" && now - last.at < 5_000) {
        const count = Number(/^(\d+)/.exec(last.detail ?? "")?.[1] ?? "1") + 1;
        last.detail = `${count} failed attempts, last by ${who}`;
      } else {
        this.addTimeline(entry, { at: now, type: "attempts", detail: `1 failed attempts, last by ${who}` });
      }
    }
    this.events.emit("contention", { resource: event.resource });
  }

  /**
   * A failover's new primary does not hold `resource`, which the console saw held on the old one (see
   * server/deployments/failover.ts): said on the lock's timeline, whichever way the lock is shown to end.
   */
  noteLostInFailover(resource: string, detail: string, now = Date.now()): void {
    const entry = this.live.get(resource) ?? this.recent.get(resource);
    if (entry) this.addTimeline(entry, { at: now, type: "lost-in-failover", detail });
  }

  /** A lock held across a failover: the promoted replica had it (its holder went on without knowing). */
  noteFailoverSurvived(resource: string, detail: string, now = Date.now()): void {
    const entry = this.live.get(resource);
    if (entry) this.addTimeline(entry, { at: now, type: "failover", detail });
  }

  /**
   * An operator force-released `resource` (here or on another console: the revocation arrives by pub/sub).
   * Keys that vanish shortly after end as `force-released`; a lock that just ended is relabelled.
   */
  noteForceRelease(resource: string, info: { value?: string | null; actor?: string | null; reason?: string | null } = {}, now = Date.now()): void {
    const detail = [info.actor ? `by ${info.actor}` : null, info.reason ? `“${info.reason.slice(0, 200)}”` : null].filter(Boolean).join(": ") || null;
    const existing = this.forceHints.get(resource);
    if (existing && now - existing.at < 2_000 && !detail) return;
    this.forceHints.set(resource, { at: now, value: info.value ?? existing?.value ?? null, detail: detail ?? existing?.detail ?? null });
    if (this.forceHints.size > 10_000) {
      const first = this.forceHints.keys().next().value;
      if (first !== undefined) this.forceHints.delete(first);
    }
    const entry = this.live.get(resource) ?? this.recent.get(resource);
    if (!entry || entry.state === null || entry.endedAt === null || now - entry.endedAt > 3_000) return;
    if (entry.state === "force-released") {
      if (detail) {
        const last = [...this.timelineOf(entry)].reverse().find((t) => t.type === "force-released");
        if (last) last.detail = detail;
      }
      return;
    }
    // It ended a moment ago as released or expired: it was the operator.
    const previous = entry.state;
    this.count(previous, -1, entry);
    entry.state = "force-released";
    this.count("force-released", 1, entry);
    const last = [...this.timelineOf(entry)].reverse().find((t) => t.type === "released" || t.type === "expired");
    if (last) {
      last.type = "force-released";
      last.detail = detail ?? undefined;
      if (!last.detail) delete last.detail;
    }
    this.events.emit("lock-event", { type: "force-released", resource });
    if (this.live.has(resource)) this.changed.add(resource);
  }

  /**
   * The lock patterns changed: locks no pattern covers any more leave the list at once (their keys are not
   * watched any more, so nothing would ever end them). Their history is kept like an ended lock's.
   */
  retain(isLockKey: (resource: string) => boolean): number {
    let dropped = 0;
    for (const [resource, entry] of this.live) {
      if (isLockKey(resource)) continue;
      this.live.delete(resource);
      this.unschedule(entry);
      this.settling.delete(resource);
      this.lingering.delete(resource);
      this.changed.delete(resource);
      if (entry.state !== null) {
        this.count(entry.state, -1, entry);
        this.removed.add(resource);
      }
      dropped += 1;
    }
    this.oldestCache = null;
    return dropped;
  }

  // ---- time ----------------------------------------------------------------------------------------

  /** Time passing: TTLs running out (held → elapsed), stale keys probed, ended locks leaving the list. */
  tick(now = Date.now()): void {
    for (const resource of this.settling) {
      const entry = this.live.get(resource);
      if (!entry) this.settling.delete(resource);
      else if (now >= entry.settleUntil) this.recompute(entry, now, true);
    }
    const due = Math.floor(now / WHEEL_MS);
    const probe: string[] = [];
    // After a long pause (or a clock step) walk the scheduled buckets rather than every empty one in between.
    const slots = due - this.wheelCursor > 1_000 ? [...this.wheel.keys()].filter((k) => k <= due).sort((a, b) => a - b) : null;
    if (slots) this.wheelCursor = due + 1;
    for (let k = 0; slots ? k < slots.length : this.wheelCursor <= due; k++) {
      const slot = slots ? (slots[k] as number) : this.wheelCursor++;
      const bucket = this.wheel.get(slot);
      if (!bucket) continue;
      this.wheel.delete(slot);
      for (const resource of bucket) {
        const entry = this.live.get(resource);
        if (!entry || entry.wheelAt !== slot) continue;
        entry.wheelAt = 0;
        if (entry.state === null || !isLive(entry.state)) continue;
        this.recompute(entry, now, false);
        if (entry.state === "elapsed" && entry.expiresAt !== null && now >= entry.expiresAt + PROBE_AFTER_MS) {
          probe.push(resource);
          this.schedule(entry, now + PROBE_AFTER_MS);
        }
      }
    }
    if (probe.length > 0) this.onProbe(probe);
    for (const [resource, endedAt] of this.lingering) {
      if (now - endedAt < LINGER_MS) break;
      this.lingering.delete(resource);
      const entry = this.live.get(resource);
      if (!entry || entry.endedAt !== endedAt || entry.state === null || isLive(entry.state)) continue;
      this.live.delete(resource);
      this.unschedule(entry);
      this.count(entry.state, -1, entry);
      this.changed.delete(resource);
      this.removed.add(resource);
      this.recent.delete(resource);
      this.recent.set(resource, entry);
      this.trimRecent(now);
    }
  }

  /** Once a second: contention rates decay and waiters go stale. */
  sweepContention(now = Date.now()): void {
    for (const resource of this.contention.sweep(now, (r) => this.holderIdOf(r))) this.contentionChanged.add(resource);
    for (const [resource, hint] of this.forceHints) {
      if (now - hint.at > FORCE_HINT_MS) this.forceHints.delete(resource);
      else break;
    }
  }

  /**
   * The changes to send now: every changed lock not sent within `coalesceMs` (the rest wait for a later
   * call), lock removals, and contention figures. At most `max` locks per call.
   */
  drain(now: number, coalesceMs: number, max: number): DrainedChanges {
    const upserts: Lock[] = [];
    for (const resource of this.changed) {
      if (upserts.length >= max) break;
      const entry = this.live.get(resource);
      if (!entry || entry.state === null) {
        this.changed.delete(resource);
        continue;
      }
      if (now - entry.lastSentAt < coalesceMs) continue;
      entry.lastSentAt = now;
      this.changed.delete(resource);
      this.contentionChanged.delete(resource);
      const lock = this.build(entry, now);
      this.contention.markSent(resource, lock.contention);
      upserts.push(lock);
    }
    const removed = [...this.removed];
    this.removed.clear();
    const contention: DrainedChanges["contention"] = [];
    for (const resource of this.contentionChanged) {
      const entry = this.live.get(resource);
      const figures = entry ? this.contentionOf(entry, now, this.holderIdOf(resource)) : this.contention.get(resource, now, null);
      this.contention.markSent(resource, figures);
      contention.push({ resource, ...figures });
    }
    this.contentionChanged.clear();
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

  // ---- internals -----------------------------------------------------------------------------------

  private revive(resource: string): Entry {
    const old = this.recent.get(resource);
    if (old) this.recent.delete(resource);
    // Its ended row may have left the list in this very frame: the stream must not send the removal after
    // the new lock (the browser would delete a live lock).
    this.removed.delete(resource);
    const n = this.nodeIds.length;
    const entry: Entry = {
      resource,
      values: new Array<string | null>(n).fill(null),
      expiries: new Array<number>(n).fill(Number.NaN),
      state: null,
      token: null,
      leading: null,
      quorumHeld: 0,
      expiresAt: null,
      acquiredAt: null,
      ttlMs: null,
      endedAt: null,
      endedToken: null,
      cause: null,
      // Only locks found by the first reconcile start without a timeline array (made up when asked for).
      timeline: old ? this.timelineOf(old) : this.watching ? [] : null,
      lastSentAt: 0,
      settleUntil: 0,
      wheelAt: 0,
      endSeen: false,
      extensionSeen: false,
      unreadable: false,
      reading: null,
      pending: null,
      scope: null,
    };
    this.live.set(resource, entry);
    return entry;
  }

  /**
   * The quorum vote over the nodes' fingerprints, then the lock's scope: a `single` lock (by declaration, by
   * its format, or inferred from where its value is) is held while one node holds it, so a lock that lives on
   * one instance by design never reads as a Redlock that lost its quorum.
   */
  private merge(entry: Entry, now: number): MergedLock {
    const samples = { up: this.counted, values: entry.values, expiries: entry.expiries, quorum: this.quorum };
    const merged = mergeSamples(samples, now, { endSeen: entry.endSeen });
    const leading = merged.token ?? merged.leading;
    if (entry.pending) {
      // Keep the reading of the value the lock is held with (an ended lock keeps its last one).
      if (merged.state !== null) {
        const previous = entry.reading;
        const next = entry.pending.find((r) => r.fingerprint === leading) ?? (previous?.fingerprint === leading ? previous : (entry.pending[0] ?? previous));
        // The same value read again keeps the reading already held (one copy of its strings, not one per read).
        entry.reading = previous && next && previous !== next && previous.fingerprint === next.fingerprint && !detailsDiffer(previous, next) ? previous : next;
        const fingerprint = entry.reading?.fingerprint;
        if (fingerprint !== undefined) for (let i = 0; i < entry.values.length; i++) if (entry.values[i] === fingerprint) entry.values[i] = fingerprint;
      }
      entry.pending = null;
    }
    if (merged.state === null) return merged;
    const format = entry.reading?.format ?? "unknown";
    // Nodes holding any value for the key: the same key held on several nodes (even with different values, a
    // split vote) is a multi-node lock; a single-instance lock lives on one.
    let holding = 0;
    const counted = this.counted;
    for (let i = 0; i < entry.values.length; i++) if (counted[i] && entry.values[i] !== null && entry.values[i] !== undefined) holding += 1;
    const scope = inferScope({
      declared: this.declaredScope(entry.resource),
      format: formatByName(format).scope,
      nodes: this.nodeIds.length,
      holding: merged.unreadable ? merged.quorumHeld : holding,
      previous: entry.scope,
    });
    entry.scope = scope;
    if (scope === "single" && merged.state === "partial" && this.quorum > 1) return mergeSamples({ ...samples, quorum: 1 }, now, { endSeen: false });
    return merged;
  }

  private holderIdOf(resource: string): string | null {
    const token = this.live.get(resource)?.token;
    return token ? lockValueId(token) : null;
  }

  private recompute(entry: Entry, now: number, visible: boolean): void {
    // A client writes (or deletes) a Redlock key on the nodes one by one: a read between two of those writes
    // sees the nodes disagree for a moment. Such a view counts (state, timeline, events, streams) only if it
    // lasts SETTLE_MS; until then the lock keeps its previous state.
    if (this.nodesAgree(entry)) {
      entry.settleUntil = 0;
    } else {
      if (entry.settleUntil === 0) entry.settleUntil = now + SETTLE_MS;
      if (now < entry.settleUntil) {
        this.settling.add(entry.resource);
        return;
      }
    }
    this.settling.delete(entry.resource);
    const merged = this.merge(entry, now);
    const extensionSeen = entry.extensionSeen;
    entry.endSeen = false;
    entry.extensionSeen = false;
    if (entry.unreadable !== merged.unreadable) {
      entry.unreadable = merged.unreadable;
      visible = true;
    }
    const wasLive = entry.state !== null && isLive(entry.state);
    const prev = wasLive ? { state: entry.state as "held", token: entry.token, leading: entry.leading, expiresAt: entry.expiresAt } : null;
    const holderSet = entry.reading !== null && HOLDER_SETS.has(entry.reading.format);
    const steps = transitions(prev, { ...merged, holderSet, extensionSeen });
    const previousState = entry.state;
    for (const step of steps) {
      switch (step.type) {
        case "acquired": {
          const decoded = decodeHolder(step.token);
          entry.acquiredAt = decoded.acquiredAt ?? now;
          // A foreign value carries no acquisition time: the consoles agree on when it was first seen.
          // A lock first seen on fewer nodes than a quorum has no token yet: its most widely held value stands in.
          const seenValue = step.token ?? merged.leading;
          if (decoded.acquiredAt === null && seenValue) this.firstSeen?.(entry.resource, seenValue, now, entry.ttlMs);
          entry.ttlMs = merged.expiresAt !== null ? Math.max(0, merged.expiresAt - now) : null;
          entry.endedAt = null;
          entry.endedToken = null;
          entry.cause = null;
          if (!this.watching && entry.timeline === null) {
            // Found by the first reconcile: its "acquired" entry is made up when asked for (timelineOf); the
            // history still learns of the hold, so "who held it at T" covers locks older than this console.
            this.history?.record({ at: entry.acquiredAt, resource: entry.resource, type: "acquired", token: step.token, detail: ALREADY_HELD });
          } else {
            const who = decoded.holder?.label ?? decoded.holder?.host ?? (step.token ? "a foreign client" : "unknown");
            const held = `${merged.quorumHeld} of ${this.nodeIds.length} nodes`;
            this.addTimeline(
              entry,
              {
                at: now,
                type: "acquired",
                detail: step.partial ? `by ${who}, on ${held} (no quorum)` : `by ${who}, on ${held}${decoded.fence ? `, fence ${decoded.fence}` : ""}`,
              },
              step.token,
            );
          }
          this.events.emit("lock-event", { type: "acquired", resource: entry.resource });
          this.acquisitions.add(now);
          if (step.token) this.contention.holderIs(entry.resource, lockValueId(step.token));
          break;
        }
        case "extended":
          entry.ttlMs = merged.expiresAt !== null ? Math.max(0, merged.expiresAt - now) : null;
          // The shared first-seen record lives as long as the lock does.
          if (entry.token && decodeHolder(entry.token).acquiredAt === null) this.firstSeen?.(entry.resource, entry.token, now, entry.ttlMs);
          this.addTimeline(entry, { at: now, type: "extended", detail: Number.isFinite(step.by) ? `by ${(step.by / 1000).toFixed(1)} s` : "TTL removed" });
          this.events.emit("lock-event", { type: "extended", resource: entry.resource });
          break;
        case "holders": {
          const list = (ids: string[]) => ids.map((id) => id.slice(0, 40)).join(", ");
          const parts = [step.joined.length > 0 ? `joined: ${list(step.joined)}` : null, step.left.length > 0 ? `left: ${list(step.left)}` : null];
          this.addTimeline(entry, { at: now, type: "holders", detail: parts.filter(Boolean).join("; ") });
          this.events.emit("lock-event", { type: "extended", resource: entry.resource });
          break;
        }
        case "replaced":
          // The previous lock ended (released, most often by a hand-over to the next waiter) and the next
          // one began before any read saw the key free: the end counts like any other.
          this.recordEnd(entry, now, (reason) => (reason === "released" ? "handed straight to the next holder" : "the next holder took it at once"));
          break;
        case "elapsed":
          this.addTimeline(entry, { at: now, type: "elapsed", detail: "TTL ran out; Redis has not reclaimed the key yet" });
          break;
        case "partial":
          this.addTimeline(entry, { at: now, type: "partial", detail: `no value on a quorum: ${merged.quorumHeld} of ${this.nodeIds.length} nodes hold the most common one` });
          break;
        case "ended": {
          const reason = this.recordEnd(entry, now, (r) => (r === "evicted" ? "evicted under memory pressure (maxmemory)" : undefined));
          entry.endedAt = now;
          entry.endedToken = entry.token ?? entry.leading;
          const state: LockState = reason === "evicted" ? "expired" : reason;
          this.lingering.delete(entry.resource);
          this.lingering.set(entry.resource, now);
          this.unschedule(entry);
          this.setState(entry, state, previousState);
          entry.token = null;
          entry.leading = null;
          entry.quorumHeld = 0;
          this.changed.add(entry.resource);
          return;
        }
      }
    }
    if (merged.state === null) {
      // Never live (a key seen absent): nothing to show.
      if (entry.state === null) {
        this.live.delete(entry.resource);
        this.unschedule(entry);
      }
      return;
    }
    const changed =
      visible || steps.length > 0 || entry.state !== merged.state || entry.token !== merged.token || entry.quorumHeld !== merged.quorumHeld || !sameExpiry(entry.expiresAt, merged.expiresAt);
    entry.token = merged.token;
    entry.leading = merged.leading;
    entry.quorumHeld = merged.quorumHeld;
    entry.expiresAt = merged.expiresAt;
    this.setState(entry, merged.state, previousState);
    if (changed) this.changed.add(entry.resource);
    if (merged.expiresAt !== null) {
      this.schedule(entry, merged.state === "elapsed" ? merged.expiresAt + PROBE_AFTER_MS : merged.expiresAt);
    }
  }

  /**
   * Records the end of the entry's current lock (timeline, live event, expiry count) and returns how it
   * ended: forced when an operator's force-release of it was noted, else by its cause or its TTL. The
   * timeline entry carries the operator's words, or else `detail(reason)`.
   */
  private recordEnd(entry: Entry, now: number, detail: (reason: ReturnType<typeof endReason>) => string | undefined): ReturnType<typeof endReason> {
    const hint = this.takeForceHint(entry, now);
    const reason = endReason(hint ? "force-released" : entry.cause, entry.expiresAt, now);
    const text = hint?.detail ?? detail(reason);
    this.addTimeline(entry, { at: now, type: reason, ...(text ? { detail: text } : {}) });
    this.events.emit("lock-event", { type: reason, resource: entry.resource });
    if (reason === "expired" || reason === "evicted") this.expirations.add(now);
    return reason;
  }

  /**
   * The operator's force-release of the lock that is ending now, if one was noted: recent, and for this
   * lock's value (or for whatever held the resource, when the value was not given). Used once, so the
   * holders that come after it (a busy resource changes hands every few ms) do not end "forced" too.
   */
  private takeForceHint(entry: Entry, now: number): { detail: string | null } | null {
    const hint = this.forceHints.get(entry.resource);
    if (hint === undefined || now - hint.at >= FORCE_HINT_MS) return null;
    const ending = entry.token ?? entry.leading;
    if (hint.value !== null && ending !== null && hint.value !== ending) {
      // (A fenced lock is rewritten with its fence: the same acquisition, by its id.)
      const id = lockValueId(hint.value);
      if (id === null || id !== lockValueId(ending)) return null;
    }
    this.forceHints.delete(entry.resource);
    return hint;
  }

  private setState(entry: Entry, state: LockState, previous: LockState | null): void {
    if (previous === state) return;
    if (previous !== null) this.count(previous, -1, entry);
    entry.state = state;
    this.count(state, 1, entry);
  }

  private count(state: LockState, delta: number, _entry: Entry): void {
    this.byState[state] += delta;
  }

  private schedule(entry: Entry, at: number): void {
    const bucket = Math.max(Math.ceil(at / WHEEL_MS), this.wheelCursor);
    if (entry.wheelAt === bucket) return;
    this.unschedule(entry);
    entry.wheelAt = bucket;
    const set = this.wheel.get(bucket);
    if (set) set.add(entry.resource);
    else this.wheel.set(bucket, new Set([entry.resource]));
  }

  private unschedule(entry: Entry): void {
    if (entry.wheelAt === 0) return;
    const set = this.wheel.get(entry.wheelAt);
    if (set) {
      set.delete(entry.resource);
      if (set.size === 0) this.wheel.delete(entry.wheelAt);
    }
    entry.wheelAt = 0;
  }

  /** Sizes of the internal structures, for the soak benchmark and tests of the memory bounds. */
  sizes(): { live: number; recent: number; wheelEntries: number; wheelBuckets: number; lingering: number; settling: number; forceHints: number } {
    let wheelEntries = 0;
    for (const set of this.wheel.values()) wheelEntries += set.size;
    return {
      live: this.live.size,
      recent: this.recent.size,
      wheelEntries,
      wheelBuckets: this.wheel.size,
      lingering: this.lingering.size,
      settling: this.settling.size,
      forceHints: this.forceHints.size,
    };
  }

  /**
   * What can be known of a lock's contention: this engine's telemetry (also for a foreign-held lock an engine
   * client contends for), a queue the library keeps (Redisson's fair lock), or nothing: a foreign client's
   * failed attempt leaves no trace, so its figures are null, never a made-up 0.
   */
  private contentionOf(entry: Entry, now: number, holderId: string | null): Lock["contention"] {
    const view = entry.reading ? formatView([entry.reading], null) : null;
    const source = view?.contentionSource ?? null;
    if (source === "engine" || this.contention.has(entry.resource)) return this.contention.get(entry.resource, now, holderId);
    if (source === "queue") return { attemptsPerMin: null, waiters: view?.waiters ?? null, source: (view?.waiters ?? null) === null ? null : "queue" };
    return { ...NOT_VISIBLE };
  }

  /** The nodes whose readings count in a merge. */
  private get counted(): readonly boolean[] {
    return this.started ? this.nodeUp : this.allNodes;
  }

  private nodesAgree(entry: Entry): boolean {
    const counted = this.counted;
    let seen: string | null | undefined;
    for (let i = 0; i < entry.values.length; i++) {
      if (!counted[i]) continue;
      const value = entry.values[i] ?? null;
      if (seen === undefined) seen = value;
      else if (value !== seen) return false;
    }
    return true;
  }

  /** The entry's timeline, created on first use; a lock found at start begins with "already held". */
  private timelineOf(entry: Entry): TimelineEntry[] {
    if (entry.timeline === null) {
      entry.timeline = entry.acquiredAt === null ? [] : [{ at: entry.acquiredAt, type: "acquired", detail: ALREADY_HELD }];
    }
    return entry.timeline;
  }

  /** `token`: the value the entry concerns; by default the one held until now (an end, an extension, a gap). */
  private addTimeline(entry: Entry, item: { at: number; type: TimelineType; node?: string; detail?: string }, token = entry.token ?? entry.leading): void {
    pushCapped(this.timelineOf(entry), item, TIMELINE_CAP);
    // A burst of failed attempts is one entry whose count grows in place: the metrics count those, not history.
    if (item.type !== "attempts") this.history?.record({ ...item, resource: entry.resource, token });
  }

  private trimRecent(now: number): void {
    while (this.recent.size > RECENT_CAP) {
      const first = this.recent.keys().next().value;
      if (first === undefined) break;
      this.recent.delete(first);
    }
    for (const [resource, entry] of this.recent) {
      if (entry.endedAt !== null && now - entry.endedAt > RECENT_TTL_MS) this.recent.delete(resource);
      else break;
    }
  }

  private build(entry: Entry, now: number): Lock {
    const shown = entry.token ?? entry.leading ?? entry.endedToken;
    const decoded = decodeHolder(shown);
    const holderId = entry.token ? lockValueId(entry.token) : null;
    const view = entry.reading ? formatView([entry.reading], null) : null;
    const scope = entry.scope ?? "quorum";
    const lock: Lock = {
      resource: entry.resource,
      deployment: this.deployment,
      state: entry.state ?? "released",
      format: view?.format ?? "unknown",
      redisType: view?.redisType ?? "none",
      scope,
      holders: view?.holders ?? [],
      warnings: view?.warnings ?? [],
      token: entry.token,
      holder: decoded.holder,
      fence: decoded.fence,
      nodes: this.nodeIds.map((id, i) => {
        const up = this.nodeUp[i] ?? false;
        const value = up ? (entry.values[i] ?? null) : null;
        const expiry = entry.expiries[i] ?? Number.NaN;
        return { id, up, token: value, pttlMs: value !== null && Number.isFinite(expiry) ? Math.max(0, Math.round(expiry - now)) : null };
      }),
      quorumHeld: entry.quorumHeld,
      quorum: scope === "single" ? 1 : this.quorum,
      expiresAt: entry.expiresAt === null ? null : Math.round(entry.expiresAt),
      ttlMs: entry.ttlMs === null ? null : Math.round(entry.ttlMs),
      contention: this.contentionOf(entry, now, holderId),
    };
    if (entry.acquiredAt !== null) lock.acquiredAt = entry.acquiredAt;
    if (entry.endedAt !== null) {
      lock.endedAt = entry.endedAt;
      lock.endedToken = entry.endedToken;
    }
    if (entry.unreadable) lock.unreadable = true;
    return lock;
  }
}

const NOT_VISIBLE = Object.freeze({ attemptsPerMin: null, waiters: null, source: null });

function detailsDiffer(a: FormatReading, b: FormatReading): boolean {
  if (a.waiters !== b.waiters || a.warnings.length !== b.warnings.length || a.holders.length !== b.holders.length) return true;
  return a.holders.some((h, i) => h.count !== b.holders[i]?.count);
}

function sameExpiry(a: number | null, b: number | null): boolean {
  if (a === null || b === null) return a === b;
  return Math.abs(a - b) <= 20;
}
