import { decodeLockValue, lockValueId } from "@lockscope/redlock";
import { decodeShedLockValue } from "./formats/shedlock";
import type { LiveState, LockHolder } from "./types";

/**
 * What each node says about one resource. `values[i]` is node i's reading reduced to what tells one holder
 * from another (a lock value, a holder id: any string a format chooses), null when it holds nothing.
 * `expiries[i]` is the absolute expiry (epoch ms, server clock) of node i's key: `Infinity` for a key without
 * a TTL, `NaN` when the node holds nothing. Where `up[i]` is false the node cannot be read right now and
 * `values[i]` / `expiries[i]` are the last reading the console has of it (null / NaN when none).
 */
export interface NodeSamples {
  up: readonly boolean[];
  values: ReadonlyArray<string | null>;
  expiries: readonly number[];
  quorum: number;
}

export interface MergedLock {
  /** null when no node holds any value, as far as the console can tell: the lock has ended (or never was). */
  state: LiveState | null;
  /** The value held by a quorum; null when none has one. */
  token: string | null;
  /**
   * The most widely held value (== token when held). Where no value has a quorum and several are held by the most
   * nodes (a split vote), the one the lock was shown with if it is among them, else null: no value leads, whatever
   * node holds which.
   */
  leading: string | null;
  quorumHeld: number;
  /** When the lock stops being held by a quorum (partial: when the last key goes); null without TTL. */
  expiresAt: number | null;
  /**
   * True when no reachable node holds a value but an unreachable one did at its last reading: the lock is
   * unknown, not ended. The other fields are then the last readings' merge.
   */
  unreadable: boolean;
}

const ALL = (): boolean => true;

/**
 * Merges per-node samples into one lock, as Redlock sees it: a value held by a quorum of nodes is
 * the lock; its validity ends when fewer than a quorum of those keys remain, i.e. at the quorum-th
 * latest expiry among them. Nodes that are down count as holding nothing while some reachable node holds a
 * value (the quorum is always out of all configured nodes). When no reachable node holds one but an
 * unreachable node held one when last read, and no reachable node was seen dropping it, the lock is not
 * over: nobody can tell, so it is the merge of the last readings, marked `unreadable`.
 */
export function mergeSamples(samples: NodeSamples, now: number, options: { endSeen?: boolean; ended?: boolean; shown?: string | null } = {}): MergedLock {
  const shown = options.shown ?? null;
  const current = mergeWhere(samples, now, (i) => samples.up[i] === true, shown);
  if (current.state !== null) return current;
  // `endSeen`: a reachable node was just read without the value it held. The lock's end was seen there;
  // what an unreachable node may still keep cannot bring it back. Unless the unreachable nodes held the value on
  // a quorum by themselves (of a lock not already ended, `ended`): one node's copy gone (deleted there alone,
  // evicted) says nothing of theirs, and while they keep it nobody else can take the lock.
  if (options.endSeen && (options.ended || !heldByUnreachableQuorum(samples, now, shown))) return current;
  const last = mergeWhere(samples, now, ALL, shown);
  return last.state === null ? current : { ...last, unreadable: true };
}

function heldByUnreachableQuorum(samples: NodeSamples, now: number, shown: string | null): boolean {
  if (samples.quorum <= 1) return false;
  const unreachable = mergeWhere(samples, now, (i) => samples.up[i] !== true, shown);
  return unreachable.token !== null && unreachable.quorumHeld >= samples.quorum;
}

/** `shown`: the value the lock was shown with until now, which goes on leading a split vote it is one side of. */
function mergeWhere(samples: NodeSamples, now: number, counted: (i: number) => boolean, shown: string | null): MergedLock {
  // Runs for every change of every lock: counts in place (a handful of nodes) instead of building maps,
  // lists and sorted copies.
  const { values, expiries, quorum } = samples;
  const n = values.length;
  let leading: string | null = null;
  let best = 0;
  // Several values held by the most nodes: none of them leads by itself (which node holds which says nothing).
  let tied = false;
  let shownTied = false;
  for (let i = 0; i < n; i++) {
    const value = values[i] ?? null;
    if (value === null || !counted(i)) continue;
    let before = false;
    for (let j = 0; j < i && !before; j++) before = values[j] === value && counted(j);
    if (before) continue;
    let count = 1;
    for (let j = i + 1; j < n; j++) if (values[j] === value && counted(j)) count += 1;
    if (count > best) {
      best = count;
      leading = value;
      tied = false;
      shownTied = value === shown;
    } else if (count === best) {
      tied = true;
      if (value === shown) shownTied = true;
    }
  }
  if (leading === null) return { state: null, token: null, leading: null, quorumHeld: 0, expiresAt: null, unreadable: false };
  // (Two values cannot both hold a majority. A lock on one instance, merged with a quorum of one, held on two nodes
  // with different values keeps the one it was shown with, else the first node's: each node's is a lock of its own.)
  if (tied && shownTied) leading = shown;
  else if (tied && best < quorum) leading = null;
  if (leading === null) {
    let latest = -Infinity;
    for (let i = 0; i < n; i++) if (counted(i) && values[i] !== null && values[i] !== undefined) latest = Math.max(latest, expiries[i] ?? Number.NaN);
    return { state: "partial", token: null, leading: null, quorumHeld: best, expiresAt: Number.isFinite(latest) ? latest : null, unreadable: false };
  }
  if (best >= quorum) {
    // Validity ends at the quorum-th latest expiry among the nodes holding it (a missing one counts as earliest).
    let expiry = Number.NaN;
    for (let i = 0; i < n; i++) {
      if (values[i] !== leading || !counted(i)) continue;
      const e = expiries[i] ?? Number.NaN;
      let later = 0;
      for (let j = 0; j < n; j++) {
        if (j === i || values[j] !== leading || !counted(j)) continue;
        const f = expiries[j] ?? Number.NaN;
        if (rankBefore(f, j, e, i)) later += 1;
      }
      if (later === quorum - 1) {
        expiry = e;
        break;
      }
    }
    const expiresAt = Number.isFinite(expiry) ? expiry : null;
    const state: LiveState = expiresAt !== null && expiresAt <= now ? "elapsed" : "held";
    return { state, token: leading, leading, quorumHeld: best, expiresAt, unreadable: false };
  }
  // No quorum: the lock is in doubt until every key is gone, so its end is the latest expiry of any value.
  let latest = -Infinity;
  for (let i = 0; i < n; i++) {
    if (counted(i) && values[i] !== null && values[i] !== undefined) latest = Math.max(latest, expiries[i] ?? Number.NaN);
  }
  return { state: "partial", token: null, leading, quorumHeld: best, expiresAt: Number.isFinite(latest) ? latest : null, unreadable: false };
}

/**
 * The vote per holder for a lock whose value is a set of holders (one id per line, sorted: a Redlock semaphore's
 * permits). Each holder took its permit on a quorum of nodes on its own, so two holders can each hold a quorum
 * while no two nodes hold the same set (A on nodes 0 and 1, B on 1 and 2): the lock is held by every holder on a
 * quorum of the reachable nodes. Null when no holder has one (the lock is partial). The token is those holders'
 * ids, sorted, one per line; each one's permit lasts until the quorum-th latest expiry among the nodes that
 * have it, and the lock until the last of those; `quorumHeld` is the fewest nodes any of them is held on.
 */
export function voteHolders(samples: NodeSamples, now: number): MergedLock | null {
  const { values, expiries, quorum, up } = samples;
  const nodes = new Map<string, number[]>();
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (value === null || value === undefined || up[i] !== true) continue;
    for (const id of value.split("\n")) {
      if (id === "") continue;
      const on = nodes.get(id);
      if (on) on.push(i);
      else nodes.set(id, [i]);
    }
  }
  const held: string[] = [];
  let fewest = Infinity;
  let end = -Infinity;
  for (const [id, on] of nodes) {
    if (on.length < quorum) continue;
    held.push(id);
    fewest = Math.min(fewest, on.length);
    // The quorum-th latest expiry among the nodes that have this holder (a missing one counts as earliest).
    const ends = on.map((i) => expiries[i] ?? Number.NaN).map((e) => (Number.isNaN(e) ? -Infinity : e));
    ends.sort((a, b) => b - a);
    end = Math.max(end, ends[quorum - 1] ?? -Infinity);
  }
  if (held.length === 0) return null;
  const token = held.sort().join("\n");
  const expiresAt = end === Infinity || end === -Infinity ? null : end;
  const state: LiveState = expiresAt !== null && expiresAt <= now ? "elapsed" : "held";
  return { state, token, leading: token, quorumHeld: fewest, expiresAt, unreadable: false };
}

/** Whether expiry `f` (node j) ranks before `e` (node i) from the latest down: later first, a missing one last, ties by node. */
function rankBefore(f: number, j: number, e: number, i: number): boolean {
  const fv = Number.isNaN(f) ? -Infinity : f;
  const ev = Number.isNaN(e) ? -Infinity : e;
  return fv > ev || (fv === ev && j < i);
}

export interface DecodedHolder {
  holder: LockHolder | null;
  fence: string | null;
  acquiredAt: number | null;
}

/**
 * The holder, fence and acquisition time a value carries: an engine-made value's, or a ShedLock value's host and
 * the time its task started (`ADDED:<instant>@<host>`, by the holder's clock); nulls for any other value.
 */
export function decodeHolder(value: string | null): DecodedHolder {
  if (value === null) return { holder: null, fence: null, acquiredAt: null };
  if (value.startsWith("ADDED:")) {
    const shedlock = decodeShedLockValue(value);
    if (shedlock) return { holder: { host: shedlock.host }, fence: null, acquiredAt: shedlock.since };
  }
  const identity = decodeLockValue(value);
  if (!identity) return { holder: null, fence: null, acquiredAt: null };
  const holder: LockHolder = {};
  if (identity.label !== null) holder.label = identity.label;
  if (identity.host !== null) holder.host = identity.host;
  if (identity.pid !== null) holder.pid = identity.pid;
  return { holder, fence: identity.fence, acquiredAt: identity.acquiredAt };
}

/**
 * What made the keys go away, as the keyspace notifications (or an operator) said; `lost` where the node that
 * held them restarted without them or was replaced by a replica that never had them.
 */
export type EndCause = "del" | "expired" | "evicted" | "force-released" | "lost" | null;

/**
 * How a lock ended. The notification decides when there is one; without one (a reconnect found the keys
 * gone, or notifications are off) the keys' TTL does: gone after the expiry means it expired, gone before
 * means somebody deleted it.
 */
export function endReason(cause: EndCause, expiresAt: number | null, now: number): "released" | "expired" | "evicted" | "force-released" | "lost" {
  if (cause === "force-released") return "force-released";
  if (cause === "lost") return "lost";
  if (cause === "expired") return "expired";
  if (cause === "evicted") return "evicted";
  if (cause === "del") return "released";
  // A little slack: the sample's expiry is estimated from PTTL plus the read's round trip.
  return expiresAt !== null && now >= expiresAt - 25 ? "expired" : "released";
}

export interface LockSummary {
  state: LiveState | null;
  token: string | null;
  leading: string | null;
  expiresAt: number | null;
  /**
   * The value is a set of holders, one id per line (a semaphore's permits, a read-write lock's readers):
   * holders join and leave one lock, so a change of value that keeps a holder is not a new lock.
   */
  holderSet?: boolean;
  /**
   * Whether a node holding the value was read with a later TTL end than its previous reading of it. When
   * given, an extension needs it: the quorum's TTL end also moves as more nodes' readings come in (each read
   * at its own moment), and that is not an extension.
   */
  extensionSeen?: boolean;
  /**
   * The value the lock was shown with until now is held on none of the nodes read: whatever value leads now is
   * another lock's, even one held on fewer nodes than a quorum.
   */
  shownGone?: boolean;
  /**
   * The key was deleted (or expired, or evicted) and written again with the same value since the last reading
   * (a notification said so): another lock made of the same value (a constant such as `1`), not an extension.
   */
  madeAgain?: boolean;
  /**
   * The lock was a split vote with no side ahead, and the value held by a quorum now is one of its sides (a node
   * that held it then holds it still): the same lock goes on, decided, not another one acquired.
   */
  sideWon?: boolean;
}

export type Transition =
  | { type: "acquired"; token: string | null; partial: boolean }
  /** The holder changed with no read in between seeing the lock free: the previous lock ended there. */
  | { type: "replaced" }
  /** Holders joined or left a lock held by several at once (a semaphore, read locks): the same lock goes on. */
  | { type: "holders"; joined: string[]; left: string[] }
  | { type: "extended"; token: string; by: number }
  /** A lock held without a TTL was given one (SET NX then EXPIRE, the classic two-command lock; PERSIST then PEXPIRE). */
  | { type: "ttl-set"; token: string }
  | { type: "elapsed" }
  | { type: "partial" }
  /**
   * A partial lock's value holds a quorum (a node that was down came back with it, a slow write completed): the
   * same lock goes on.
   */
  | { type: "quorum" }
  | { type: "ended" };

/** Expiry moves by a millisecond or two between two PTTL samples; anything less than this is not an extension. */
export const EXTEND_SLACK_MS = 50;

/**
 * A fenced acquisition writes its value twice: first without the fence, then (once the fence is recorded on a
 * quorum) the same value id with the fence. That rewrite is the same acquisition, not a new holder.
 */
function sameAcquisition(before: string | null, after: string): boolean {
  if (before === null) return false;
  const id = lockValueId(after);
  return id !== null && id === lockValueId(before);
}

/** The holders that joined and left between two holder-set values; null unless some holder stayed (else it is another lock). */
function holderChange(before: string | null, after: string | null): { joined: string[]; left: string[] } | null {
  if (before === null || after === null || before === after) return null;
  const was = new Set(before.split("\n").filter(Boolean));
  const now = new Set(after.split("\n").filter(Boolean));
  if (![...now].some((id) => was.has(id))) return null;
  return { joined: [...now].filter((id) => !was.has(id)), left: [...was].filter((id) => !now.has(id)) };
}

/**
 * The lock-level events between two merged views of one resource (pure; the lock reducer, reducer.ts, turns
 * them into timeline entries and live events).
 */
export function transitions(prev: LockSummary | null, next: LockSummary): Transition[] {
  const wasLive = prev !== null && prev.state !== null;
  if (next.state === null) return wasLive ? [{ type: "ended" }] : [];
  if (!wasLive) return [{ type: "acquired", token: next.token ?? next.leading, partial: next.state === "partial" }];
  const out: Transition[] = [];
  const shown = prev.token ?? prev.leading;
  const change = next.holderSet ? holderChange(shown, next.token ?? next.leading) : null;
  if (change) {
    out.push({ type: "holders", ...change });
  } else if (next.madeAgain === true && next.token !== null && prev.token === next.token) {
    out.push({ type: "replaced" }, { type: "acquired", token: next.token, partial: false });
  } else if (next.token !== null && prev.token !== next.token && prev.leading !== next.token && !sameAcquisition(shown, next.token) && next.sideWon !== true) {
    // A release that hands the lock to the next waiter (this engine's hand-over: the release script writes
    // the waiter's value), or a next holder quicker than one read batch. Either way one lock ended (a value
    // held on fewer nodes than a quorum too, once no node holds it any more).
    if (prev.token !== null || next.shownGone === true) out.push({ type: "replaced" });
    out.push({ type: "acquired", token: next.token, partial: false });
  } else if (next.state === "partial" && next.shownGone === true && next.leading !== shown && (next.leading === null || !sameAcquisition(shown, next.leading))) {
    // The same, with the next value on fewer nodes than a quorum (a contender that took one node, the next
    // holder's write not on a quorum yet), or a split vote with no side ahead (no value: null): the lock shown
    // until now ended, and this one is a lock of its own.
    out.push({ type: "replaced" }, { type: "acquired", token: next.leading, partial: true });
  } else if (next.token !== null && prev.token === next.token && next.expiresAt !== null && prev.expiresAt === null) {
    out.push({ type: "ttl-set", token: next.token });
  } else if (next.extensionSeen === false) {
    // No node's own TTL end moved: whatever the quorum's did, nothing was extended.
  } else if (next.token !== null && prev.token === next.token && next.expiresAt !== null && prev.expiresAt !== null && next.expiresAt > prev.expiresAt + EXTEND_SLACK_MS) {
    out.push({ type: "extended", token: next.token, by: next.expiresAt - prev.expiresAt });
  } else if (next.token !== null && prev.token === next.token && next.expiresAt === null && prev.expiresAt !== null) {
    out.push({ type: "extended", token: next.token, by: Infinity });
  }
  if (next.state === "elapsed" && prev.state !== "elapsed") out.push({ type: "elapsed" });
  const acquired = out.some((t) => t.type === "acquired");
  if (next.state === "partial" && prev.state !== "partial" && !acquired) out.push({ type: "partial" });
  if (prev.state === "partial" && next.state !== "partial" && next.token !== null && !acquired) out.push({ type: "quorum" });
  return out;
}
