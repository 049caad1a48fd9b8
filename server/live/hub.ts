import "server-only";
import { createHash, randomBytes } from "node:crypto";
import { compactLock, lockFromCompact, type CompactLock } from "@/lib/locks/compact-lock";
import { OTHER_GROUP } from "@/lib/locks/groups";
import type { Lock, LiveStats, WatcherStatus } from "@/lib/locks/types";
import type { DrainedChanges, WantedLocks } from "./store";
import { StreamLimits, type StreamLimitSettings, type StreamOwner } from "./stream-limits";

/** A lock is sent at most once per this window; changes in between are merged into the next message. */
export const COALESCE_MS = 100;
/** How often the hub looks for changes to send. */
export const TICK_MS = 10;
/** How often the streams opened with a session cookie are checked for a sign-out (as requests are: `RECHECK_MS`). */
export const SESSION_CHECK_MS = 2_000;
export const HEARTBEAT_MS = 15_000;
/** A stream ends after this long; the browser reconnects with Last-Event-ID and resumes. */
export const MAX_STREAM_MS = 60 * 60_000;
/** Locks per snapshot message. */
const SNAPSHOT_PART = 500;
/** Locks per tick: a burst (a node coming back) is spread over a few ticks instead of one huge write. */
const MAX_LOCKS_PER_TICK = 5_000;
/** Frames kept for resumption. */
const RING_MAX_BYTES = 8 * 1024 * 1024;
const RING_MAX_FRAMES = 20_000;
/** A client more than this far behind is dropped; it reconnects and resumes or takes a fresh snapshot. */
export const MAX_CLIENT_BACKLOG_BYTES = 16 * 1024 * 1024;
/**
 * Stream writes per second the frames may cost at most: with many streams open, frames come less often (every
 * `streams / FRAME_WRITES_PER_SEC` s, at most `MAX_FRAME_MS`), each carrying every change since. A write is a
 * system call and a wake-up of the reader per stream; a hundred tabs at one frame per tick took a third of a core,
 * and at a frame per 50 ms still 1.3 to 1.5 times the CPU of one tab (1.2 to 1.3 at a frame per 100 ms).
 */
const FRAME_WRITES_PER_SEC = 1_000;
const MAX_FRAME_MS = 100;
/** Frames are still produced this long after the last stream that carries locks closed, so a reconnecting tab resumes. */
const RESUME_GRACE_MS = 60_000;
/**
 * Views kept at most after their last stream closed (within `RESUME_GRACE_MS`). Every changed lock is checked
 * against each view kept, and a view is any group name a stream asks for: a script looping over names would
 * otherwise add a view per name for a minute each, at no cost to itself. Past it the view closed longest ago is
 * forgotten at once (its tab, back, gets a snapshot). Views with a stream open count apart: the stream limits
 * bound them.
 */
export const MAX_KEPT_VIEWS = 256;
/**
 * A snapshot's parts are encoded once and served to every stream of the same view that opens within this
 * long (a team's tabs opening on an incident), followed by the frames since it from the ring.
 */
export const SNAPSHOT_SHARE_MS = 1_000;
/**
 * Encoded snapshot parts kept for sharing at most, for a second (a snapshot larger than this is built per stream;
 * one made while others are kept keeps what fits): room for the tens of thousands of rows a fast churn lists
 * (10,000 changes/s keep about 35,000 ended locks lingering, some 25 MB of rows), which a hundred streams opening
 * together would otherwise each build in part.
 */
const SNAPSHOT_SHARE_MAX_BYTES = 64 * 1024 * 1024;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A stream's filter that lets no lock through (`?locks=none`): no group is ever named "" (see `lockGroup`). */
export const NO_LOCKS = "";

/** One event of a frame, with the lock it concerns (every lock event names its resource, and its deployment where several are watched). */
interface Piece {
  resource: string;
  deployment: string | undefined;
  /** A `lock` event's lock (its texts are made from it as streams need them: see `wholeText`, `compactText`). */
  lock?: Lock;
  /** The event as a stream of whole locks gets it (any other event: as every stream gets it). */
  text?: string;
  /** A `lock` event as a stream of compact locks gets it. */
  compact?: string;
}

/**
 * A frame of one view's events, encoded once, ending with the id of the filter it was made for (`tag`). Its id line
 * stands before its last event (a browser whose stream breaks mid-frame has not taken the id: it resumes from the
 * frame before and gets this one whole); `idAt` and `idLength` locate it, so that the same view's frame under
 * another filter's id (`?locks=changes`: the same events, without rows in its snapshot) is made by setting another
 * id line in, not by encoding the events again (see `withId`).
 */
interface TaggedFrame {
  bytes: Uint8Array;
  tag: string;
  idAt: number;
  idLength: number;
}

/**
 * A frame of every lock in the replay ring, its locks compact (as the browser's streams take them); `whole`, the
 * same frame of whole locks, once a stream of them was sent it (kept as long as the frame, and counted in the ring's
 * bytes).
 */
interface Frame extends TaggedFrame {
  seq: number;
  whole?: TaggedFrame;
}

/** One view's snapshot (every lock, a group's, a deployment's), its parts encoded once as the first stream reads them. */
interface SharedSnapshot {
  /** The view: group, deployment, rows or not, compact or not. */
  view: string;
  /** Whether its locks are compact (`encoding=compact`). */
  compact: boolean;
  /** The view's tag, in its id (see `filterTag`). */
  tag: string;
  /** When it was made (epoch ms). */
  at: number;
  /** The frames after this one follow it. */
  seq: number;
  resources: string[];
  parts: number;
  /** Parts encoded so far (kept within `SNAPSHOT_SHARE_MAX_BYTES` over all shared snapshots). */
  encoded: Array<Uint8Array | undefined>;
  bytes: number;
  /**
   * Whether its parts are kept to share, judged by the first part encoded: not when the whole of it (that part's
   * size times the parts) would not fit in `SNAPSHOT_SHARE_MAX_BYTES` (null until then).
   */
  shareable: boolean | null;
  /** Streams it was given to. */
  streams: number;
}

interface Client {
  id: number;
  /** The group whose locks this stream carries (`NO_LOCKS`: none); null: every lock. */
  group: string | null;
  /** The deployment whose locks this stream carries; null: every deployment's. */
  deployment: string | null;
  /** Whether its snapshot carries the locks' rows (false: `?locks=changes`). */
  rows: boolean;
  /**
   * Whether it is sent compact locks (`?encoding=compact`, see lib/locks/compact-lock.ts). Its id's tag is the same:
   * the form changes the bytes, not the locks, and an id resumes a stream of either form.
   */
  compact: boolean;
  /** Its filter's tag, the last part of every id it is sent (see `filterTag`). */
  tag: string;
  controller: ReadableStreamDefaultController<Uint8Array>;
  closed: boolean;
  /**
   * Set while the snapshot is still being written (`part`: the next one to send; `reused`: made for another
   * stream): frames wait in `pending` (bounded).
   */
  snapshot: { shared: SharedSnapshot; part: number; reused: boolean } | null;
  pending: Uint8Array[];
  pendingBytes: number;
  lifetime: NodeJS.Timeout;
  /**
   * The request, held for as long as the stream is open: its signal follows the one it was made with through a
   * weak reference to a controller the request keeps, so once nothing holds the request its abort never arrives
   * (the stream of a closed tab would stay open).
   */
  request: { readonly signal: AbortSignal } | null;
  /** The session cookie the stream was opened with (none for a bearer token): it ends with the session. */
  session: { id: string; expiresAtMs: number } | null;
  close: (finalEvent?: string) => void;
  /** Ends the stream at once, discarding its backlog, so the server closes the socket. */
  drop: () => void;
}

export interface HubOptions {
  /** Concurrent streams per client address and per credential. */
  limits?: StreamLimitSettings;
  /** A client this far behind is dropped (tests lower it). */
  maxBacklogBytes?: number;
  /** Whether a session was signed out (here or on another console): its streams end (see `checkSessions`). */
  sessionRevoked?: (id: string) => Promise<boolean>;
}

/**
 * What the hub reads: a deployment's `LockStore`, or the locks of several deployments composed
 * (server/live/deployments.ts), whose keys then name the deployment too and whose removals and contention
 * figures carry it.
 */
export interface HubStore {
  resources(): string[];
  lock(key: string, now: number): Lock | null;
  /** With `wanted`, the changed locks it refuses are dropped unbuilt (no stream would get them). */
  drain(now: number, coalesceMs: number, max: number, wanted?: WantedLocks): Omit<DrainedChanges, "removed" | "contention"> & {
    removed: ReadonlyArray<string | { resource: string; deployment: string }>;
    contention: ReadonlyArray<DrainedChanges["contention"][number] & { deployment?: string }>;
  };
  discardChanges(): boolean;
}

export interface HubSources {
  store: HubStore;
  /** The keys (for `store.lock`) of a new stream's snapshot; default: the store's resources of the group. */
  snapshotKeys?: (group: string | null, deployment: string | null) => string[];
  /** The group a lock key belongs to, for streams that follow one group (default: every key in `other`). */
  groupOf?: (resource: string) => string;
  watcherStatus: () => WatcherStatus[];
  stats: () => LiveStats;
}

/**
 * Fans the store's changes out to every open stream. One hub per process; every browser tab is one
 * client with one bounded backlog. Frames carry `id: <epoch>:<seq>:<filter tag>`; a reconnect with a known id
 * of a stream of the same filter replays the frames since, anything else gets a fresh snapshot.
 */
export class StreamHub {
  readonly epoch = randomBytes(4).toString("hex");
  private seq = 0;
  private readonly ring: Frame[] = [];
  private ringBytes = 0;
  private readonly clients = new Set<Client>();
  private nextClientId = 1;
  /**
   * The views the frames are made for: each stream's (every lock, a group's, a deployment's), kept for
   * `RESUME_GRACE_MS` after its last stream closed so that a tab that reconnects resumes. A stream of no
   * locks (`?locks=none`, the grouped view's: nodes and counts) has none. Only the changed locks some view
   * shows are built and encoded: a fleet watched from its grouped view costs no frame per change, a group's
   * table only that group's changes.
   */
  private readonly views = new Map<string, View>();
  /** The views with no stream open, by key, the one closed longest ago first (at most `MAX_KEPT_VIEWS`). */
  private readonly keptViews = new Map<string, View>();
  /** When the last frame was made (epoch ms), for the frame interval of many streams. */
  private lastFrameAt = 0;
  /** Recent snapshots by view, for streams that open shortly after (see `SNAPSHOT_SHARE_MS`). */
  private readonly snapshots = new Map<string, SharedSnapshot>();
  private snapshotBytes = 0;

  private readonly limits: StreamLimits | null;
  private readonly groupOf: (resource: string) => string;
  private readonly maxBacklogBytes: number;
  private readonly sessionRevoked: ((id: string) => Promise<boolean>) | null;

  constructor(
    private readonly sources: HubSources,
    options: HubOptions = {},
  ) {
    this.limits = options.limits ? new StreamLimits(options.limits) : null;
    this.groupOf = sources.groupOf ?? (() => OTHER_GROUP);
    this.maxBacklogBytes = options.maxBacklogBytes ?? MAX_CLIENT_BACKLOG_BYTES;
    this.sessionRevoked = options.sessionRevoked ?? null;
  }

  get clientCount(): number {
    return this.clients.size;
  }

  /** The views the frames are made for: those of the open streams, and those kept for a while after (diagnostics, tests). */
  get viewCount(): number {
    return this.views.size;
  }

  /**
   * Opens one stream; `lastEventId` resumes where a previous stream of this process left off. Throws
   * `StreamLimitError` when `owner` already has as many streams open as the limits allow. With `compact`, its locks
   * are sent in their compact form (lib/locks/compact-lock.ts).
   */
  open(lastEventId: string | null, request: { readonly signal: AbortSignal } | null, owner: StreamOwner | null = null, group: string | null = null, deployment: string | null = null, snapshotRows = true, compact = false): ReadableStream<Uint8Array> {
    let client: Client | null = null;
    const release = owner && this.limits ? this.limits.take(owner) : () => {};
    const stream = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          client = this.attach(controller, lastEventId, release, group, deployment, snapshotRows, compact);
          client.request = request;
          client.session = owner?.session ?? null;
          const signal = request?.signal;
          if (signal) {
            if (signal.aborted) client.close();
            else signal.addEventListener("abort", () => client?.close(), { once: true });
          }
        },
        pull: () => {
          if (client) this.continueSnapshot(client);
        },
        cancel: () => {
          client?.close();
        },
      },
      { highWaterMark: 256 * 1024, size: (chunk) => chunk.byteLength },
    );
    return stream;
  }

  private attach(controller: ReadableStreamDefaultController<Uint8Array>, lastEventId: string | null, release: () => void, group: string | null, deployment: string | null, snapshotRows: boolean, compact: boolean): Client {
    const id = this.nextClientId++;
    const client: Client = {
      id,
      group,
      deployment,
      rows: snapshotRows,
      compact,
      tag: filterTag(group, deployment, snapshotRows),
      controller,
      closed: false,
      snapshot: null,
      pending: [],
      pendingBytes: 0,
      lifetime: setTimeout(() => client.close("event: end\ndata: {\"reason\":\"lifetime\"}\n\n"), MAX_STREAM_MS),
      request: null,
      session: null,
      close: (finalEvent) => {
        if (!detach()) return;
        try {
          if (finalEvent) controller.enqueue(encoder.encode(finalEvent));
          controller.close();
        } catch {
          // already closed or errored by the consumer
        }
      },
      drop: () => {
        if (!detach()) return;
        try {
          // close() would let the consumer read the whole backlog first, keeping the socket open for as long
          // as it takes; an error discards the queue and makes the server destroy the response now. (Named
          // AbortError: Next.js treats it as a client gone, not as a failure to log.)
          controller.error(new DOMException("live stream dropped: the client fell too far behind", "AbortError"));
        } catch {
          // already closed or errored by the consumer
        }
      },
    };
    const detach = (): boolean => {
      if (client.closed) return false;
      client.closed = true;
      clearTimeout(client.lifetime);
      this.clients.delete(client);
      const key = viewKey(client.group, client.deployment);
      const view = client.group === NO_LOCKS ? undefined : this.views.get(key);
      if (view && --view.open === 0) {
        // (Its grace counts from the next tick, on the clock the ticks run on.)
        view.closedAt = NOT_CLOSED;
        this.keepView(key, view);
      }
      client.pending = [];
      client.snapshot = null;
      release();
      return true;
    };
    client.lifetime.unref?.();
    this.clients.add(client);
    try {
      this.start(client, lastEventId, snapshotRows);
    } catch (error) {
      // Nothing of it stays: not the client, its view's count, nor its place under the stream limits.
      detach();
      throw error;
    }
    return client;
  }

  /** Registers the client's view and writes its start: preamble, nodes, then a resume or a snapshot. */
  private start(client: Client, lastEventId: string | null, snapshotRows: boolean): void {
    const { group, deployment } = client;
    if (group !== NO_LOCKS) {
      const key = viewKey(group, deployment);
      let view = this.views.get(key);
      if (!view) {
        // Its locks are in every frame from now on, not in those before: an id from before resumes only where
        // another view covered them meanwhile (see `resumable`).
        this.seq += 1;
        view = { group, deployment, open: 0, closedAt: NOT_CLOSED, since: this.seq };
        this.views.set(key, view);
      }
      if (view.open === 0) this.keptViews.delete(key);
      view.open += 1;
    }
    this.write(client, encoder.encode(`retry: 2000\n: lockscope live stream\n\n`));
    this.write(client, encoder.encode(this.nodeEvent()));
    const resumeFrom = this.resumable(lastEventId, client);
    if (resumeFrom !== null) this.replayAfter(client, resumeFrom);
    else {
      const shared = this.snapshotFor(group, deployment, snapshotRows, client.compact);
      shared.streams += 1;
      client.snapshot = { shared, part: 0, reused: shared.streams > 1 };
      // Frames made since a shared snapshot wait behind it, as those that come while it is written.
      this.replayAfter(client, shared.seq);
      this.continueSnapshot(client);
    }
  }

  /**
   * Keeps a view its last stream left, for a tab that comes back; past `MAX_KEPT_VIEWS` the one closed longest ago
   * is forgotten (no frame since carries its locks for sure: an id of its streams then gets a snapshot, see
   * `resumable`).
   */
  private keepView(key: string, view: View): void {
    this.keptViews.set(key, view);
    for (const [oldKey] of this.keptViews) {
      if (this.keptViews.size <= MAX_KEPT_VIEWS) break;
      this.keptViews.delete(oldKey);
      this.views.delete(oldKey);
    }
  }

  /** Writes the ring's frames after `seq` to the client (only its group's and deployment's part, where it follows one). */
  private replayAfter(client: Client, seq: number): void {
    for (const frame of this.ring) {
      if (frame.seq <= seq) continue;
      if (client.group === null && client.deployment === null) {
        // (Scripts opening together replay the same frames: each is made of whole locks once.)
        this.write(client, this.withId(client.compact ? frame : this.wholeOf(frame), frame.seq, client.tag));
      } else {
        // Replays are rare: the group's part of an old frame is cut out of its text rather than kept apart.
        const part = this.frameOf(piecesOf(decoder.decode(frame.bytes)), frame.seq, client.group, client.deployment, client.tag, client.compact);
        if (part) this.write(client, part.bytes);
      }
    }
  }

  /**
   * A ring frame of whole locks: `made` where a tick just encoded it, else cut from the frame's text (counted in the
   * ring's bytes while it is kept).
   */
  private wholeOf(frame: Frame, made?: TaggedFrame): TaggedFrame {
    if (frame.whole) return frame.whole;
    const whole = made ?? this.frameOf(piecesOf(decoder.decode(frame.bytes)), frame.seq, null, null, frame.tag, false)!;
    frame.whole = whole;
    this.ringBytes += whole.bytes.byteLength;
    return whole;
  }

  /**
   * The snapshot a new stream of this view starts with: one made for another stream within the last
   * `SNAPSHOT_SHARE_MS` while the ring still holds every frame since, else a new one (made part by part as
   * the stream reads it).
   */
  private snapshotFor(group: string | null, deployment: string | null, rows: boolean, compact: boolean): SharedSnapshot {
    const now = Date.now();
    this.pruneSnapshots(now);
    const view = `${formKey(group, deployment, compact)}${rows ? 1 : 0}`;
    const kept = this.snapshots.get(view);
    const oldest = this.ring[0]?.seq;
    // A stream of one group or deployment would cut its part out of every frame since (see `replayAfter`): it
    // shares a snapshot only while no frame came after it.
    const filtered = group !== null || deployment !== null;
    // Nor one made before its view was (last) made: a view forgotten meanwhile (see `keepView`) had its locks'
    // changes dropped unbuilt, so the frames since that snapshot may lack them.
    const since = group === NO_LOCKS ? 0 : (this.views.get(viewKey(group, deployment))?.since ?? Number.POSITIVE_INFINITY);
    if (kept && kept.seq >= since && (kept.seq === this.seq || (!filtered && oldest !== undefined && oldest <= kept.seq + 1))) return kept;
    const snapshotKeys = this.sources.snapshotKeys;
    // (Without rows, the snapshot only marks where the changes start: at a million locks, a group's rows
    // would take the console seconds to write and the browser to read, only to be dropped by a page that
    // pages them from GET /api/locks.)
    const all = group === NO_LOCKS || !rows ? [] : snapshotKeys ? snapshotKeys(group, deployment) : this.sources.store.resources();
    const resources = group === null || snapshotKeys ? all : all.filter((r) => this.groupOf(r) === group);
    const parts = Math.max(1, Math.ceil(resources.length / SNAPSHOT_PART));
    const made: SharedSnapshot = { view, compact, tag: filterTag(group, deployment, rows), at: now, seq: this.seq, resources, parts, encoded: [], bytes: 0, shareable: null, streams: 0 };
    if (kept) this.snapshotBytes -= kept.bytes;
    this.snapshots.set(view, made);
    return made;
  }

  /** Forgets the shared snapshots too old to share (their encoded parts with them). */
  private pruneSnapshots(now: number): void {
    for (const [view, old] of this.snapshots) {
      if (now - old.at <= SNAPSHOT_SHARE_MS) continue;
      this.snapshots.delete(view);
      this.snapshotBytes -= old.bytes;
    }
  }

  /** Part `index` of a snapshot, encoded now or by the stream that read it first. */
  private snapshotPart(snap: SharedSnapshot, index: number, now: number): Uint8Array {
    const done = snap.encoded[index];
    if (done) return done;
    const locks: string[] = [];
    for (const resource of snap.resources.slice(index * SNAPSHOT_PART, (index + 1) * SNAPSHOT_PART)) {
      const lock = this.sources.store.lock(resource, now);
      if (lock) locks.push(JSON.stringify(snap.compact ? compactLock(lock) : lock));
    }
    const last = index === snap.parts - 1;
    const head = `{"serverTime":${now},"part":${index},"parts":${snap.parts}${index === 0 ? `,"nodes":${JSON.stringify(this.sources.watcherStatus())}` : ""},"locks":[`;
    const bytes = encoder.encode(`${last ? `id: ${this.epoch}:${snap.seq}:${snap.tag}\n` : ""}event: snapshot\ndata: ${head}${locks.join(",")}]}\n\n`);
    // A snapshot too large to share whole keeps none of its parts: the streams of a million locks would share the
    // first few percent of it, and the console hold their tens of megabytes meanwhile for a stream or two.
    snap.shareable ??= bytes.byteLength * snap.parts <= SNAPSHOT_SHARE_MAX_BYTES;
    if (snap.shareable && this.snapshots.get(snap.view) === snap && this.snapshotBytes + bytes.byteLength <= SNAPSHOT_SHARE_MAX_BYTES) {
      snap.encoded[index] = bytes;
      snap.bytes += bytes.byteLength;
      this.snapshotBytes += bytes.byteLength;
    }
    return bytes;
  }

  /**
   * The seq to replay after, or null when the id is unknown, from another process, or too old, or from a stream of
   * another filter (the client holds that filter's locks, not this one's: the frames since would lack the state
   * this view's locks were in before), or when the frames since it may lack locks of this stream's view (no view
   * that covers them was kept all along: their changes were dropped unbuilt).
   */
  private resumable(lastEventId: string | null, client: Client): number | null {
    const { group, deployment } = client;
    if (!lastEventId) return null;
    const match = /^([0-9a-f]{8}):(\d{1,15}):([0-9a-f]{12})$/.exec(lastEventId.trim());
    if (!match || match[1] !== this.epoch || match[3] !== client.tag) return null;
    const seq = Number(match[2]);
    if (seq > this.seq) return null;
    if (group !== NO_LOCKS) {
      let covered = false;
      for (const view of this.views.values()) {
        if (view.since <= seq && (view.group === null || view.group === group) && (view.deployment === null || view.deployment === deployment)) covered = true;
      }
      if (!covered) return null;
    }
    if (seq === this.seq) return seq;
    const oldest = this.ring[0]?.seq;
    return oldest !== undefined && seq >= oldest - 1 ? seq : null;
  }

  /** Writes snapshot parts while the consumer keeps up (called again from `pull`). */
  private continueSnapshot(client: Client): void {
    if (!client.snapshot || client.closed) return;
    const now = Date.now();
    while (client.snapshot && (client.controller.desiredSize ?? 0) > 0) {
      const snap = client.snapshot;
      const index = snap.part;
      const bytes = this.snapshotPart(snap.shared, index, now);
      snap.part += 1;
      try {
        client.controller.enqueue(bytes);
      } catch {
        client.close();
        return;
      }
      if (index === snap.shared.parts - 1) {
        client.snapshot = null;
        const pending = client.pending;
        client.pending = [];
        client.pendingBytes = 0;
        // A shared snapshot's first part carries the nodes as they were when it was made: they are told again.
        if (snap.reused) this.write(client, encoder.encode(this.nodeEvent()));
        for (const frame of pending) this.write(client, frame);
      }
    }
  }

  private write(client: Client, bytes: Uint8Array): void {
    if (client.closed) return;
    if (client.snapshot) {
      client.pending.push(bytes);
      client.pendingBytes += bytes.byteLength;
      if (client.pendingBytes > this.maxBacklogBytes) client.drop();
      return;
    }
    try {
      if ((client.controller.desiredSize ?? 0) < -this.maxBacklogBytes) {
        client.drop();
        return;
      }
      client.controller.enqueue(bytes);
    } catch {
      client.close();
    }
  }

  private broadcast(bytes: Uint8Array): void {
    for (const client of this.clients) this.write(client, bytes);
  }

  /** Sends what changed (coalesced per lock) as one frame with one id. */
  tick(now = Date.now()): void {
    if (this.snapshots.size > 0) this.pruneSnapshots(now);
    const wanted = this.wantedLocks(now);
    if (wanted === null) {
      // No stream to send locks to for a while: skip the work, and make every earlier id unresumable (a later
      // stream gets a snapshot; one without locks gets nothing from a frame).
      if (this.sources.store.discardChanges()) {
        this.seq += 1;
        this.ring.length = 0;
        this.ringBytes = 0;
      }
      return;
    }
    const every = Math.min(MAX_FRAME_MS, (this.clients.size * 1_000) / FRAME_WRITES_PER_SEC);
    if (every > TICK_MS && now >= this.lastFrameAt && now - this.lastFrameAt < every - TICK_MS / 2) return;
    this.lastFrameAt = now;
    const { upserts, removed, contention } = this.sources.store.drain(now, COALESCE_MS, MAX_LOCKS_PER_TICK, wanted);
    if (upserts.length === 0 && removed.length === 0 && contention.length === 0) return;
    const pieces: Piece[] = [];
    // Removals first: a resource both removed and upserted in one frame must end up listed.
    for (const removal of removed) {
      if (typeof removal === "string") pieces.push({ resource: removal, deployment: undefined, text: `event: lock-removed\ndata: ${JSON.stringify({ resource: removal })}\n\n` });
      else pieces.push({ resource: removal.resource, deployment: removal.deployment, text: `event: lock-removed\ndata: ${JSON.stringify(removal)}\n\n` });
    }
    for (const lock of upserts) pieces.push({ resource: lock.resource, deployment: lock.deployment, lock });
    for (const figures of contention) pieces.push({ resource: figures.resource, deployment: figures.deployment, text: `event: contention\ndata: ${JSON.stringify(figures)}\n\n` });
    this.seq += 1;
    // The ring keeps the frame of compact locks (the browser's): a stream of whole locks costs their encoding too.
    const everyLock = this.frameOf(pieces, this.seq, null, null, EVERY_LOCK_TAG, true) as TaggedFrame;
    const bytes = everyLock.bytes;
    const made: Frame = { seq: this.seq, ...everyLock };
    this.ring.push(made);
    this.ringBytes += bytes.byteLength;
    while (this.ring.length > 1 && (this.ringBytes > RING_MAX_BYTES || this.ring.length > RING_MAX_FRAMES)) {
      const dropped = this.ring.shift();
      if (dropped) this.ringBytes -= dropped.bytes.byteLength + (dropped.whole?.bytes.byteLength ?? 0);
    }
    // Each view's part (every lock, a followed group's or deployment's) is encoded once per tick, whatever the number
    // of its streams; its streams of the other filter (rows in the snapshot or not) get it under their own id line,
    // set in once per filter. Each stream still gets its frame as one write. Whole locks are another part of the same
    // view, also made once.
    const parts = new Map<string, TaggedFrame | null>([[formKey(null, null, true), everyLock]]);
    const frames = new Map<string, Uint8Array | null>();
    for (const client of this.clients) {
      if (client.group === null && client.deployment === null && client.rows && client.compact) {
        this.write(client, bytes);
        continue;
      }
      const view = formKey(client.group, client.deployment, client.compact);
      const filter = `${view}${client.rows ? 1 : 0}`;
      let frame = frames.get(filter);
      if (frame === undefined) {
        let part = parts.get(view);
        if (part === undefined) {
          part = this.frameOf(pieces, this.seq, client.group, client.deployment, client.tag, client.compact);
          parts.set(view, part);
          // (Kept with the ring's frame, for the scripts that open next and replay it.)
          if (part && !client.compact && client.group === null && client.deployment === null) this.wholeOf(made, part);
        }
        frame = part && this.withId(part, this.seq, client.tag);
        frames.set(filter, frame);
      }
      if (frame) this.write(client, frame);
    }
  }

  /**
   * Which changed locks the frames need: every lock's (undefined) while a view of every lock is open or may
   * resume, else those of the groups and deployments followed; null while no view needs any.
   */
  private wantedLocks(now: number): WantedLocks | undefined | null {
    const followed: View[] = [];
    let every = false;
    for (const [key, view] of this.views) {
      if (view.open === 0) {
        if (view.closedAt === NOT_CLOSED) view.closedAt = now;
        else if (now - view.closedAt > RESUME_GRACE_MS) {
          this.views.delete(key);
          this.keptViews.delete(key);
          continue;
        }
      }
      if (view.group === null && view.deployment === null) every = true;
      followed.push(view);
    }
    if (every) return undefined;
    if (followed.length === 0) return null;
    return (resource, deployment) => {
      let group: string | undefined;
      for (const view of followed) {
        if (view.deployment !== null && view.deployment !== deployment) continue;
        if (view.group === null || view.group === (group ??= this.groupOf(resource))) return true;
      }
      return false;
    };
  }

  /**
   * One frame of `pieces`, ending with the frame's id (tagged with the streams' filter, `tag`); with `group` or
   * `deployment`, only their pieces (null when none: its streams get nothing this time, and resume from their last
   * id as well as from this one).
   */
  private frameOf(pieces: readonly Piece[], seq: number, group: string | null, deployment: string | null, tag: string, compact = false): TaggedFrame | null {
    const kept =
      group === NO_LOCKS
        ? []
        : group === null && deployment === null
          ? pieces
          : pieces.filter((p) => (deployment === null || p.deployment === deployment) && (group === null || this.groupOf(p.resource) === group));
    const last = kept.at(-1);
    if (last === undefined) return null;
    const texts = kept.map(compact ? compactText : wholeText);
    const lastText = texts[texts.length - 1]!;
    const id = this.idLine(seq, tag);
    texts[texts.length - 1] = `${id}${lastText}`;
    const bytes = encoder.encode(texts.join(""));
    // (The id line is ASCII: as many bytes as characters.)
    return { bytes, tag, idAt: bytes.byteLength - Buffer.byteLength(lastText) - id.length, idLength: id.length };
  }

  /** A frame's bytes under the id of the filter `tag` (of the same view): the bytes as made, or a copy with that id line set in. */
  private withId(frame: TaggedFrame, seq: number, tag: string): Uint8Array {
    if (frame.tag === tag) return frame.bytes;
    const id = encoder.encode(this.idLine(seq, tag));
    const bytes = new Uint8Array(frame.bytes.byteLength - frame.idLength + id.byteLength);
    bytes.set(frame.bytes.subarray(0, frame.idAt));
    bytes.set(id, frame.idAt);
    bytes.set(frame.bytes.subarray(frame.idAt + frame.idLength), frame.idAt + id.byteLength);
    return bytes;
  }

  private idLine(seq: number, tag: string): string {
    return `id: ${this.epoch}:${seq}:${tag}\n`;
  }

  private nodeEvent(): string {
    return `event: node\ndata: ${JSON.stringify({ serverTime: Date.now(), nodes: this.sources.watcherStatus() })}\n\n`;
  }

  sendNodes(): void {
    if (this.clients.size > 0) this.broadcast(encoder.encode(this.nodeEvent()));
  }

  sendStats(): void {
    if (this.clients.size > 0) this.broadcast(encoder.encode(`event: stats\ndata: ${JSON.stringify(this.sources.stats())}\n\n`));
  }

  /**
   * Ends the streams of sessions signed out (on this console or another over the same nodes) or expired,
   * with `end {"reason":"signed-out"}`: a stream outlived its cookie by up to its hour-long lifetime.
   */
  async checkSessions(now = Date.now()): Promise<void> {
    const open = new Map<string, Client[]>();
    for (const client of this.clients) {
      if (client.session === null) continue;
      if (client.session.expiresAtMs <= now) client.close(SIGNED_OUT);
      else {
        const same = open.get(client.session.id);
        if (same) same.push(client);
        else open.set(client.session.id, [client]);
      }
    }
    const revoked = this.sessionRevoked;
    if (revoked === null) return;
    await Promise.all(
      [...open].map(async ([id, clients]) => {
        if (await revoked(id)) for (const client of clients) client.close(SIGNED_OUT);
      }),
    );
  }

  heartbeat(): void {
    if (this.clients.size > 0) this.broadcast(encoder.encode(`: heartbeat ${Date.now()}\n\n`));
  }

  /** Ends every stream with a final event (shutdown). */
  closeAll(reason: string): void {
    for (const client of [...this.clients]) client.close(`event: end\ndata: ${JSON.stringify({ reason })}\n\n`);
  }
}

/**
 * What the frames are made for: the streams of one group's or deployment's locks (both null: every lock), how
 * many are open, and from which seq on every frame carries its locks.
 */
interface View {
  group: string | null;
  deployment: string | null;
  open: number;
  /** When its last stream closed, on the ticks' clock; `NOT_CLOSED` while one is open or until the next tick. */
  closedAt: number;
  since: number;
}

const NOT_CLOSED = -1;

/** The last event of a stream whose session was signed out or expired. */
const SIGNED_OUT = `event: end\ndata: ${JSON.stringify({ reason: "signed-out" })}\n\n`;

/**
 * A view's key (in `StreamHub.views`, and the base of the shared snapshots' and a tick's parts' keys). A group
 * is any text a lock key holds, control characters included: the key is JSON, so no group or deployment name
 * can spell another view's key (`null`, every lock, is not `"\u0000"`).
 */
function viewKey(group: string | null, deployment: string | null): string {
  return JSON.stringify([group, deployment]);
}

/** A view's key in one form of its locks (compact or whole): a tick's part, and the base of a shared snapshot's key. */
function formKey(group: string | null, deployment: string | null, compact: boolean): string {
  return `${viewKey(group, deployment)}${compact ? "c" : ""}`;
}

/**
 * A stream filter's tag (12 hex digits), the last part of its ids: an id resumes only a stream of the same group,
 * deployment and rows or not. A client holds the locks of the filter it was sent: with another's id, the frames
 * since would bring this view's changes without the state its locks were in before (a silent gap).
 */
function filterTag(group: string | null, deployment: string | null, rows: boolean): string {
  return createHash("sha256").update(`${viewKey(group, deployment)}${rows ? 1 : 0}`).digest("hex").slice(0, 12);
}

/** The tag of the frames as made (every lock, with rows, compact), kept in the ring. */
const EVERY_LOCK_TAG = filterTag(null, null, true);

/**
 * The events of a frame's text (the ring's: its locks compact), with their resources (the frame's id line dropped:
 * it is set again when replayed).
 */
function piecesOf(text: string): Piece[] {
  const out: Piece[] = [];
  for (const event of text.split("\n\n")) {
    if (event === "") continue;
    const lines = event.split("\n").filter((line) => !line.startsWith("id: "));
    const data = lines.find((line) => line.startsWith("data: "));
    if (!data) continue;
    const parsed = JSON.parse(data.slice("data: ".length)) as { resource: string; deployment?: string } | CompactLock;
    const kept = `${lines.join("\n")}\n\n`;
    if (Array.isArray(parsed)) {
      const lock = lockFromCompact(parsed);
      out.push({ resource: lock.resource, deployment: lock.deployment, lock, compact: kept });
    } else out.push({ resource: parsed.resource, deployment: parsed.deployment, text: kept });
  }
  return out;
}

/** A piece's event as a stream of whole locks gets it (made once per piece). */
function wholeText(piece: Piece): string {
  return (piece.text ??= `event: lock\ndata: ${JSON.stringify(piece.lock)}\n\n`);
}

/** A piece's event as a stream of compact locks gets it (made once per piece). */
function compactText(piece: Piece): string {
  if (piece.lock === undefined) return piece.text!;
  return (piece.compact ??= `event: lock\ndata: ${JSON.stringify(compactLock(piece.lock))}\n\n`);
}
