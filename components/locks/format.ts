import type { Lock } from "@/lib/locks/types";

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return "∞";
  const abs = Math.max(0, ms);
  if (abs < 10_000) return `${(abs / 1000).toFixed(1)} s`;
  if (abs < 60_000) return `${Math.floor(abs / 1000)} s`;
  if (abs < 3_600_000) return `${Math.floor(abs / 60_000)} min ${Math.floor((abs % 60_000) / 1000)} s`;
  if (abs < 86_400_000) return `${Math.floor(abs / 3_600_000)} h ${Math.floor((abs % 3_600_000) / 60_000)} min`;
  return `${Math.floor(abs / 86_400_000)} d ${Math.floor((abs % 86_400_000) / 3_600_000)} h`;
}

/** The lock libraries behind each format, as the table names them. */
export const FORMAT_LABEL: Record<Lock["format"], string> = {
  lockscope: "Lockscope",
  token: "token",
  redisson: "Redisson",
  "redisson-rw": "Redisson read-write",
  "redis-semaphore": "redis-semaphore",
  shedlock: "ShedLock",
  unknown: "unknown layout",
};

/** One holder in a few words: who (label, host, Redisson client), thread, hold count, read or write side. */
export function holderLine(h: Lock["holders"][number]): string {
  const who = h.label ?? (h.host ? null : truncate(h.id, 28));
  const parts = [who, h.host ? `on ${h.host}` : null, h.pid !== undefined ? `pid ${h.pid}` : null, h.thread !== undefined ? `thread ${h.thread}` : null];
  if (h.count !== undefined && h.count > 1) parts.push(`×${h.count}`);
  if (h.mode) parts.push(`(${h.mode})`);
  return parts.filter(Boolean).join(" ");
}

/** Contention as far as it can be known: a figure, or "not visible" where nothing in Redis shows it. */
export function contentionText(c: Lock["contention"]): string {
  if (c.source === null) return "not visible";
  const attempts = c.attemptsPerMin === null ? null : `${c.attemptsPerMin} failed attempts/min`;
  const waiters = c.waiters === null ? null : `${c.waiters} waiting${c.source === "queue" ? " in the library's queue" : ""}`;
  return [attempts, waiters].filter(Boolean).join(", ");
}

export function holderText(lock: Lock): string {
  if (lock.format === "unknown") return `a ${lock.redisType} of unknown layout`;
  if (lock.format !== "lockscope" && lock.holders.length > 0) {
    const first = lock.holders[0]!;
    if (lock.holders.length > 1) return `${lock.holders.length} holders: ${lock.holders.slice(0, 2).map(holderLine).join(", ")}${lock.holders.length > 2 ? ", …" : ""}`;
    return lock.format === "token" && first.label === undefined ? `raw ${truncate(first.id, 28)}` : holderLine(first);
  }
  const h = lock.holder;
  if (h) {
    const where = [h.host, h.pid !== undefined ? `pid ${h.pid}` : null].filter(Boolean).join(" ");
    return [h.label, where ? `(${where})` : null].filter(Boolean).join(" ") || "engine lock (no label)";
  }
  const raw = lock.token ?? lock.endedToken ?? lock.nodes.find((n) => n.token !== null)?.token ?? null;
  return raw === null ? "—" : `raw ${truncate(raw, 28)}`;
}

export function truncate(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export const STATE_LABEL: Record<Lock["state"], string> = {
  held: "held",
  partial: "partial",
  elapsed: "TTL elapsed",
  released: "released",
  expired: "expired",
  "force-released": "force-released",
};

export function lockHref(resource: string): string {
  return `/locks/${encodeURIComponent(resource)}`;
}

export function remainingMs(lock: Lock, now: number, offsetMs: number): number {
  if (lock.expiresAt === null) return Infinity;
  return lock.expiresAt - (now + offsetMs);
}
