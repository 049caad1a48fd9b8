import type { Lock, LockHolder } from "./types";

/** Holder text as the locks table shows it; the server names the grouped view's oldest holders the same way. */

/** One holder in a few words: who (label, host, Redisson client), thread, hold count, read or write side. */
export function holderLine(h: Lock["holders"][number]): string {
  const who = h.label ?? (h.host ? null : truncate(h.id, 28));
  const parts = [who, h.host ? `on ${h.host}` : null, h.pid !== undefined ? `pid ${h.pid}` : null, h.thread !== undefined ? `thread ${h.thread}` : null];
  if (h.count !== undefined && h.count > 1) parts.push(`×${h.count}`);
  if (h.mode) parts.push(`(${h.mode})`);
  return parts.filter(Boolean).join(" ");
}

/** An engine value's holder: label (host pid). */
export function engineHolderText(h: LockHolder): string {
  const where = [h.host, h.pid !== undefined ? `pid ${h.pid}` : null].filter(Boolean).join(" ");
  return [h.label, where ? `(${where})` : null].filter(Boolean).join(" ") || "engine lock (no label)";
}

export function holderText(lock: Lock): string {
  if (lock.format === "unknown") return `a ${lock.redisType} of unknown layout`;
  if (lock.format !== "lockscope" && lock.holders.length > 0) {
    const first = lock.holders[0]!;
    if (lock.holders.length > 1) return `${lock.holders.length} holders: ${lock.holders.slice(0, 2).map(holderLine).join(", ")}${lock.holders.length > 2 ? ", …" : ""}`;
    return lock.format === "token" && first.label === undefined ? `raw ${truncate(first.id, 28)}` : holderLine(first);
  }
  if (lock.holder) return engineHolderText(lock.holder);
  const raw = lock.token ?? lock.endedToken ?? lock.nodes.find((n) => n.token !== null)?.token ?? null;
  return raw === null ? "—" : `raw ${truncate(raw, 28)}`;
}

export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

