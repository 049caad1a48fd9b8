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

export function holderText(lock: Lock): string {
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
