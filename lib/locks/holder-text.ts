import type { Lock, LockHolder } from "./types";

/** Holder text as the locks table shows it; the server names the grouped view's oldest holders the same way. */

/** One holder in a few words: who (label, host, Redisson client), thread, hold count, read or write side. */
export function holderLine(h: Lock["holders"][number]): string {
  const who = h.label ?? (h.host ? null : truncate(h.id, 28));
  const parts = [who, h.host ? `on ${h.host}` : null, h.pid !== undefined ? `pid ${h.pid}` : null, h.thread !== undefined ? `thread ${h.thread}` : null];
  if (h.count !== undefined && h.count > 1) parts.push(`×${h.count}`);
  if (h.mode) parts.push(`(${h.mode})`);
  const line = parts.filter(Boolean).join(" ");
  // One side of a split vote: where it is held.
  return h.nodes !== undefined && h.nodes.length > 0 ? `${line}, held on ${h.nodes.join(", ")}` : line;
}

/** An engine value's holder: label (host pid). */
export function engineHolderText(h: LockHolder): string {
  const where = [h.host, h.pid !== undefined ? `pid ${h.pid}` : null].filter(Boolean).join(" ");
  return [h.label, where ? `(${where})` : null].filter(Boolean).join(" ") || "engine lock (no label)";
}

/**
 * What the holder text is made of: a lock's fields, or a listed lock's few (the server sorts and searches a
 * group's locks by this text without building each lock: server/live/groups.ts).
 */
export interface HolderParts {
  format: Lock["format"];
  redisType: string;
  holders: readonly Lock["holders"][number][];
  /** This engine's (or ShedLock's) holder, decoded from the value; read only where the format names no holders. */
  holder: () => LockHolder | null;
  /** The value, where nothing else names the holder. */
  raw: () => string | null;
  /** A split vote with no side ahead: no value leads, so no holder is named. */
  split?: boolean;
}

/** The holder text of a split vote with no side ahead. */
export const SPLIT_VOTE_HOLDER = "split vote: no value leads";

export function holderTextOf(parts: HolderParts): string {
  const { format, holders } = parts;
  if (parts.split === true) return SPLIT_VOTE_HOLDER;
  if (format === "unknown") return `a ${parts.redisType} of unknown layout`;
  if (format !== "lockscope" && holders.length > 0) {
    const first = holders[0]!;
    if (holders.length > 1) return `${holders.length} holders: ${holders.slice(0, 2).map(holderLine).join(", ")}${holders.length > 2 ? ", …" : ""}`;
    return format === "token" && first.label === undefined ? `raw ${truncate(first.id, 28)}` : holderLine(first);
  }
  const holder = parts.holder();
  if (holder) return engineHolderText(holder);
  const raw = parts.raw();
  return raw === null ? "—" : `raw ${truncate(raw, 28)}`;
}

/** The value a lock's row stands for: the quorum's, else the one it ended with, else the leading one, else the first a node holds. */
const shownValue = (lock: Lock): string | null => lock.token ?? lock.endedToken ?? lock.leading ?? lock.nodes.find((n) => n.token !== null)?.token ?? null;

/** A live lock without a quorum whose nodes hold values none of which leads (see `Lock.leading`). */
export const isSplitVote = (lock: Lock): boolean => lock.state === "partial" && lock.token === null && lock.leading === undefined;

export function holderText(lock: Lock): string {
  return holderTextOf({ format: lock.format, redisType: lock.redisType, holders: lock.holders, holder: () => lock.holder, raw: () => shownValue(lock), split: isSplitVote(lock) });
}

/**
 * What a search finds a lock by besides its resource (the table of a small fleet, and the server for a group's):
 * the holder as the table shows it (`shown`), and a value that is not this engine's as it is held, in full (the
 * holder cell's title carries it where the table cuts it: a pasted token is found). An engine value holds label
 * and host percent-encoded beside a random id: only its holder as shown.
 */
export function holderSearchText(shown: string, value: string | null, format: Lock["format"]): string {
  return value === null || format === "lockscope" ? shown : `${shown}\n${value}`;
}

/** `holderSearchText` of a lock. */
export const lockSearchText = (lock: Lock): string => holderSearchText(holderText(lock), shownValue(lock), lock.format);

export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

