import { decodeLockValue, INSTANCE_TAG_LENGTH, lockValueId } from "./identity.ts";

/**
 * Pub/sub channels the engine's scripts publish on. The console subscribes to them on every node; the
 * engine subscribes to RELEASE_CHANNEL (to wake waiters) and REVOKE_CHANNEL (to abort `using()` when an
 * operator force-releases its lock).
 *
 * Every script runs on every node, so one event arrives once per node that ran it: dedupe contention by
 * (waiterId, attempt, resource), releases by resource within a few milliseconds.
 *
 * These names are also written literally inside the Lua scripts; change them together.
 */

/**
 * A failed acquisition attempt, published by the acquire script on each node where the resource was held:
 *
 *   c1|<attempt>|<at epoch ms, node clock>|<waiter's lock value>|<resource>
 *
 * The waiter's lock value is an engine value (`lk1:...`, no '|' in it) carrying its id, label, host and
 * pid; the resource comes last and may contain anything.
 */
export const CONTENTION_CHANNEL = "lockscope:contention";

/**
 * On the same channel, a waiter that stopped waiting without the lock (its last attempt failed, its signal
 * aborted, an error) and had been refused at least once, published by the leave-queue script on every node:
 *
 *   l1|<waiter's lock value>|<resource>
 *
 * A subscriber counting waiters stops counting it at once instead of after its retry window. Consumers
 * that only know `c1` ignore it.
 */
export const GAVE_UP_PREFIX = "l1|";

/**
 * A lock released, published on the node that deleted it: by the release script for each resource that
 * has queued waiters there (an uncontended release publishes nothing), and by `forceRelease` for each
 * resource it deleted:
 *
 *   r1|<next waiter id or empty>|<resource>
 *
 * `next` is the head of the resource's waiter queue: only that waiter retries at once. Empty (nobody
 * queued): every waiter for the resource retries at once.
 */
export const RELEASE_CHANNEL = "lockscope:released";

/**
 * The engine's own wake-up channels, one per engine instance: `lockscope:wake:<tag>`, where `<tag>` is
 * the first `INSTANCE_TAG_LENGTH` characters of the waiter ids that instance makes, so only the waiter's
 * engine instance receives what concerns it (instead of every instance that waits). Whenever a release
 * publishes on RELEASE_CHANNEL naming a next waiter, that waiter's wake channel gets either the same
 * message (wake up and try again) or, when the release handed the lock over (see HAND_OVER_LUA):
 *
 *   g1|<waiter id>|<attempt>|<the node's fence for the resource, or empty>|<resource>
 *
 * and `forceRelease`, besides REVOKE_CHANNEL, tells the holder's own instance (the one that made the
 * deleted engine value), so the count of subscribers that heard it says whether the holder was told:
 *
 *   v1|<the deleted lock value>|<resource>
 */
export const WAKE_CHANNEL_PREFIX = "lockscope:wake:";

/** The wake channel of the engine instance that made waiter id `waiterId`. */
export const wakeChannel = (waiterId: string): string => WAKE_CHANNEL_PREFIX + waiterId.slice(0, INSTANCE_TAG_LENGTH);

/**
 * A lock taken away by `forceRelease`, published for each resource it deleted on that node, as JSON
 * (the revoked value is arbitrary, maybe foreign):
 *
 *   {"v":1,"resource":"<resource>","value":"<the value that was deleted>"}
 *
 * The engine aborts the `using()` signal of the holder whose value this is.
 */
export const REVOKE_CHANNEL = "lockscope:revoked";

export interface ContentionEvent {
  resource: string;
  /** The waiter's id, the random part of its lock value: the same id shows up in the value once it holds. */
  waiterId: string;
  label: string | null;
  host: string | null;
  pid: number | null;
  /** 1 for the first attempt of an acquisition. */
  attempt: number;
  /** Epoch ms on the node's clock. */
  at?: number;
}

/** A waiter that gave up (see GAVE_UP_PREFIX). */
export interface GaveUpEvent {
  resource: string;
  waiterId: string;
}

export interface ReleaseEvent {
  resource: string;
  /** The head of the resource's waiter queue: the waiter that should retry first. */
  nextWaiterId: string | null;
}

export interface RevokeEvent {
  resource: string;
  value: string;
}

function splitHead(raw: string, count: number): { head: string[]; rest: string } | null {
  const head: string[] = [];
  let from = 0;
  for (let i = 0; i < count; i++) {
    const bar = raw.indexOf("|", from);
    if (bar < 0) return null;
    head.push(raw.slice(from, bar));
    from = bar + 1;
  }
  return { head, rest: raw.slice(from) };
}

/** Parses a CONTENTION_CHANNEL message; null for anything else. */
export function parseContentionMessage(raw: string): ContentionEvent | null {
  const parts = splitHead(raw, 4);
  if (!parts) return null;
  const [version, attempt, at, value] = parts.head;
  if (version !== "c1" || !attempt || !/^[1-9][0-9]{0,9}$/.test(attempt) || value === undefined) return null;
  const identity = decodeLockValue(value);
  const waiterId = lockValueId(value);
  if (!identity || !waiterId || parts.rest === "") return null;
  const event: ContentionEvent = {
    resource: parts.rest,
    waiterId,
    label: identity.label,
    host: identity.host,
    pid: identity.pid,
    attempt: Number(attempt),
  };
  if (at && /^[0-9]{1,16}$/.test(at)) event.at = Number(at);
  return event;
}

/** Parses a waiter's give-up message on CONTENTION_CHANNEL (`l1|…`); null for anything else. */
export function parseGaveUpMessage(raw: string): GaveUpEvent | null {
  if (!raw.startsWith(GAVE_UP_PREFIX)) return null;
  const parts = splitHead(raw, 2);
  if (!parts || parts.rest === "") return null;
  const waiterId = lockValueId(parts.head[1]!);
  return waiterId ? { resource: parts.rest, waiterId } : null;
}

/** Parses a RELEASE_CHANNEL message; null for anything else. */
export function parseReleaseMessage(raw: string): ReleaseEvent | null {
  const parts = splitHead(raw, 2);
  if (!parts || parts.head[0] !== "r1" || parts.rest === "") return null;
  return { resource: parts.rest, nextWaiterId: parts.head[1] || null };
}

/**
 * A message on an engine instance's wake channel: a wake-up, a lock written in the waiter's value, or one of
 * the instance's locks taken away by `forceRelease`.
 */
export type WakeEvent =
  | ({ kind: "wake" } & ReleaseEvent)
  | { kind: "grant"; resource: string; nextWaiterId: string; attempt: number; fence: string }
  | ({ kind: "revoke" } & RevokeEvent);

/** Parses a wake channel message (`r1|...`, `g1|...` or `v1|...`); null for anything else. */
export function parseWakeMessage(raw: string): WakeEvent | null {
  if (raw.startsWith("r1|")) {
    const release = parseReleaseMessage(raw);
    return release && { kind: "wake", ...release };
  }
  if (raw.startsWith("v1|")) {
    const revoked = splitHead(raw, 2);
    if (!revoked || revoked.rest === "" || lockValueId(revoked.head[1]!) === null) return null;
    return { kind: "revoke", resource: revoked.rest, value: revoked.head[1]! };
  }
  const parts = splitHead(raw, 4);
  if (!parts || parts.head[0] !== "g1" || parts.rest === "") return null;
  const [, id, attempt, fence] = parts.head as [string, string, string, string];
  if (id === "" || !/^[1-9][0-9]{0,9}$/.test(attempt) || !/^[0-9]*$/.test(fence)) return null;
  return { kind: "grant", resource: parts.rest, nextWaiterId: id, attempt: Number(attempt), fence };
}

/** Parses a REVOKE_CHANNEL message; null for anything else. */
export function parseRevokeMessage(raw: string): RevokeEvent | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return null;
  }
  if (typeof parsed !== "object" || parsed === null) return null;
  const { v, resource, value } = parsed as Record<string, unknown>;
  if (v !== 1 || typeof resource !== "string" || typeof value !== "string") return null;
  return { resource, value };
}
