import "server-only";
import type { ContentionEvent, GaveUpEvent } from "@lockscope/redlock";
import type { LockContention } from "@/lib/locks/types";
import { BucketCounter } from "@/lib/locks/window";

/**
 * A waiter counts while it retried within this long, does not hold the lock and has not said it gave up (an
 * engine older than the give-up message, or a waiter that crashed, drops out after this).
 */
export const WAITER_STALE_MS = 3_000;
/** One attempt reaches us once per node where the resource was held: copies within this window are one. */
const DEDUPE_MS = 5_000;
const MAX_DEDUPE = 200_000;
const MAX_RESOURCES = 20_000;

interface ResourceContention {
  /** 5 s buckets over 10 minutes: the per-minute rate, the sparkline and the lock page's chart. */
  attempts: BucketCounter;
  waiters: Map<string, number>;
  lastSent: { attemptsPerMin: number | null; waiters: number | null } | null;
}

/**
 * Contention per resource from the engine's telemetry (failed `SET NX` attempts are invisible to keyspace
 * notifications). Bounded: a capped number of resources, fixed buckets per resource, a capped dedupe set.
 */
export class ContentionTracker {
  private readonly resources = new Map<string, ResourceContention>();
  private readonly seen = new Map<string, number>();
  /**
   * `waiterId|resource` of waiters that gave up, kept as long as copies of their attempts may still come
   * (each node's messages come on a connection of their own: one node's give-up can overtake another's
   * last refusal).
   */
  private readonly gone = new Map<string, number>();
  /** Attempts over all resources, per second, for the header's contention/s. */
  readonly total = new BucketCounter(1_000, 10);

  /** Records one telemetry message; false when it is a copy of one already counted. */
  record(event: ContentionEvent, now: number): boolean {
    const id = `${event.waiterId}|${event.attempt}|${event.resource}`;
    if (this.seen.has(id)) return false;
    this.seen.set(id, now);
    if (this.seen.size > MAX_DEDUPE) this.pruneSeen(now, true);
    let entry = this.resources.get(event.resource);
    if (!entry) {
      if (this.resources.size >= MAX_RESOURCES) this.dropQuietest(now);
      entry = { attempts: new BucketCounter(5_000, 120), waiters: new Map(), lastSent: null };
      this.resources.set(event.resource, entry);
    }
    entry.attempts.add(now);
    if (!this.gone.has(`${event.waiterId}|${event.resource}`)) entry.waiters.set(event.waiterId, now);
    this.total.add(now);
    return true;
  }

  /** A waiter stopped waiting without the lock; true when it was counted until now. */
  gaveUp(event: GaveUpEvent, now: number): boolean {
    const id = `${event.waiterId}|${event.resource}`;
    if (!this.gone.has(id)) {
      this.gone.set(id, now);
      if (this.gone.size > MAX_DEDUPE) prune(this.gone, now, true);
    }
    return this.resources.get(event.resource)?.waiters.delete(event.waiterId) ?? false;
  }

  /** The waiter holding the lock now (its value's id) is no longer waiting. */
  holderIs(resource: string, waiterId: string | null): void {
    if (waiterId) this.resources.get(resource)?.waiters.delete(waiterId);
  }

  get(resource: string, now: number, holderId: string | null = null): LockContention {
    const entry = this.resources.get(resource);
    if (!entry) return { attemptsPerMin: 0, waiters: 0, source: "engine" };
    const attemptsPerMin = entry.attempts.sum(now, 60_000);
    let waiters = 0;
    for (const [id, at] of entry.waiters) if (id !== holderId && now - at <= WAITER_STALE_MS) waiters += 1;
    const out: LockContention = { attemptsPerMin, waiters, source: "engine" };
    if (attemptsPerMin > 0) out.recent = entry.attempts.series(now, 12);
    return out;
  }

  /** Attempts per 10 s over the last 10 minutes, oldest first. */
  history(resource: string, now: number): { bucketMs: number; endsAt: number; attempts: number[] } {
    const entry = this.resources.get(resource);
    const fine = entry ? entry.attempts.series(now, 120) : new Array<number>(120).fill(0);
    const attempts: number[] = [];
    for (let i = 0; i < fine.length; i += 2) attempts.push((fine[i] ?? 0) + (fine[i + 1] ?? 0));
    return { bucketMs: 10_000, endsAt: (Math.floor(now / 5_000) + 1) * 5_000, attempts };
  }

  /**
   * Housekeeping, once a second: forgets stale waiters and quiet resources, and returns the resources whose
   * shown figures changed (the rate decays as attempts age out of the minute).
   */
  sweep(now: number, holderIdOf: (resource: string) => string | null): string[] {
    this.pruneSeen(now, false);
    const changed: string[] = [];
    for (const [resource, entry] of this.resources) {
      for (const [id, at] of entry.waiters) if (now - at > WAITER_STALE_MS) entry.waiters.delete(id);
      const current = this.get(resource, now, holderIdOf(resource));
      if (!entry.lastSent || entry.lastSent.attemptsPerMin !== current.attemptsPerMin || entry.lastSent.waiters !== current.waiters) {
        changed.push(resource);
      }
      if (entry.attempts.isEmpty(now) && entry.waiters.size === 0) this.resources.delete(resource);
    }
    return changed;
  }

  /** True when engine telemetry has anything for `resource` (an engine client contends for it, whatever holds it). */
  has(resource: string): boolean {
    return this.resources.has(resource);
  }

  markSent(resource: string, sent: LockContention): void {
    const entry = this.resources.get(resource);
    if (entry) entry.lastSent = { attemptsPerMin: sent.attemptsPerMin, waiters: sent.waiters };
  }

  private pruneSeen(now: number, force: boolean): void {
    prune(this.seen, now, force);
    prune(this.gone, now, force);
  }

  private dropQuietest(now: number): void {
    for (const [resource, entry] of this.resources) {
      if (entry.attempts.sum(now, 60_000) === 0) {
        this.resources.delete(resource);
        return;
      }
    }
    const oldest = this.resources.keys().next().value;
    if (oldest !== undefined) this.resources.delete(oldest);
  }
}

/** Forgets entries older than the dedupe window (with `force`, also the oldest half of a full map). */
function prune(map: Map<string, number>, now: number, force: boolean): void {
  for (const [id, at] of map) {
    if (now - at > DEDUPE_MS || (force && map.size > MAX_DEDUPE / 2)) map.delete(id);
    else if (!force) break; // insertion order is time order: the rest are newer
  }
}
