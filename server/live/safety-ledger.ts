import "server-only";
import { isLabResource } from "@/lib/lab/keys";
import { SAFETY, safetyFlags, type LockSafetyCounts } from "@/lib/safety-signals";
import type { LockRecord } from "@/lib/locks/reducer";

const { COUNTED, NO_TTL, PARTIAL, ELAPSED, HELD } = SAFETY;

export interface LockSafetyFacts extends LockSafetyCounts {
  /** Acquisition time (epoch ms) of the lock held longest now (held or elapsed, the lab's included); null when none. */
  oldestHeldAt: number | null;
}

/** A lock with what the ledger needs of it: its state and times, and its `SAFETY` bits as last counted. */
export type LedgerLock = Pick<LockRecord, "resource" | "state" | "expiresAt" | "acquiredAt" | "unreadable"> & { safety: number };

/** The three oldest kept: the present locks' by acquisition, the held ones' by acquisition, the past-TTL ones' by expiry. */
type Oldests = [Oldest, Oldest, Oldest];

/**
 * The oldest of a set of locks, kept as they change. When the one it names leaves the set (or is re-acquired,
 * younger) it goes `stale`: it then keeps only the oldest of the locks seen since, until a pass over all of
 * them finds the oldest again.
 */
class Oldest {
  at: number | null = null;
  resource: string | null = null;
  stale = false;

  /** `resource` is in the set now (`inSet`) with acquisition time `at`, or not. */
  see(resource: string, inSet: boolean, at: number | null): void {
    if (resource === this.resource) {
      if (inSet && at !== null && at <= (this.at as number)) {
        this.at = at;
        return;
      }
      this.stale = true;
      this.at = null;
      this.resource = null;
      return;
    }
    if (inSet && at !== null && (this.at === null || at < this.at)) {
      this.at = at;
      this.resource = resource;
    }
  }
}

/**
 * Passes in slices made at most for one read: under churn the oldest a pass found may leave before it ends, and
 * again. Then one last pass in one go (no lock can change during it) makes the read exact.
 */
const MAX_PASSES = 3;

/**
 * The lock-safety counts and oldest-lock times that `/metrics` exports, kept as locks change instead of by a
 * pass over every lock at each scrape: at a million locks that pass cost the console about a second of its
 * one thread per scrape, and held up the live view meanwhile (a Prometheus scrapes every 15 seconds). Counts
 * are exact at all times; an oldest time is exact too, except after the oldest lock left (or was re-acquired),
 * when the next read finds the new oldest with one pass over the locks, in slices.
 */
export class SafetyLedger {
  /**
   * The oldest present lock's acquisition time as known now, without a pass: exact, or after the oldest left,
   * the oldest seen since (a later time: what is read from it errs towards "younger").
   */
  get oldestKnownAt(): number | null {
    return this.oldest.at;
  }

  private withoutTtl = 0;
  private belowQuorum = 0;
  private pastTtl = 0;
  private readonly oldest = new Oldest();
  private readonly oldestHeld = new Oldest();
  /** The counted lock longest past its TTL, by when its TTL ran out. */
  private readonly oldestPastTtl = new Oldest();
  /** A pass finding the oldest again, shared by the reads that come meanwhile. */
  private pass: Promise<void> | null = null;
  /** What the running pass has found so far: changes meanwhile are told to it too. */
  private finding: Oldests | null = null;

  /** The lock's state or times may have changed (or it left the list: state null): its counts follow. */
  update(lock: LedgerLock): void {
    this.count(lock, safetyFlags(lock, isLabResource));
  }

  /** The lock leaves the store, whatever its state: it counts for nothing any more. */
  leave(lock: LedgerLock): void {
    this.count(lock, 0);
  }

  /** The lock counts as `now` (its `SAFETY` bits) from here on. */
  private count(lock: LedgerLock, now: number): void {
    const was = lock.safety;
    if (was !== now) {
      lock.safety = now;
      if ((was | now) & COUNTED) {
        this.withoutTtl += counted(now, NO_TTL) - counted(was, NO_TTL);
        this.belowQuorum += counted(now, PARTIAL) - counted(was, PARTIAL);
        this.pastTtl += counted(now, ELAPSED) - counted(was, ELAPSED);
      }
    }
    if ((was | now) & COUNTED) {
      this.oldest.see(lock.resource, (now & COUNTED) !== 0, lock.acquiredAt);
      this.finding?.[0].see(lock.resource, (now & COUNTED) !== 0, lock.acquiredAt);
    }
    if ((was | now) & HELD) {
      this.oldestHeld.see(lock.resource, (now & HELD) !== 0, lock.acquiredAt);
      this.finding?.[1].see(lock.resource, (now & HELD) !== 0, lock.acquiredAt);
    }
    if (((was | now) & COUNTED) && ((was | now) & ELAPSED)) {
      this.oldestPastTtl.see(lock.resource, counted(now, ELAPSED) === 1, lock.expiresAt);
      this.finding?.[2].see(lock.resource, counted(now, ELAPSED) === 1, lock.expiresAt);
    }
  }

  /**
   * The facts now. `locks` (every lock of the store; a null step is a lock the pass has visited already) is
   * passed over, in slices with the event loop free between them, only when an oldest time has to be found again.
   */
  async facts(locks: () => Iterator<LedgerLock | null>, slice = 5_000): Promise<LockSafetyFacts> {
    const stale = () => this.oldest.stale || this.oldestHeld.stale || this.oldestPastTtl.stale;
    for (let passes = 0; passes < MAX_PASSES && stale(); passes++) {
      this.pass ??= this.findOldest(locks(), slice).finally(() => {
        this.pass = null;
        this.finding = null;
      });
      await this.pass;
    }
    if (stale()) this.findOldestNow(locks());
    return {
      withoutTtl: this.withoutTtl,
      belowQuorum: this.belowQuorum,
      pastTtl: this.pastTtl,
      oldestAcquiredAt: this.oldest.at,
      oldestHeldAt: this.oldestHeld.at,
      oldestPastTtlAt: this.oldestPastTtl.at,
    };
  }

  private async findOldest(locks: Iterator<LedgerLock | null>, slice: number): Promise<void> {
    const finding: Oldests = [new Oldest(), new Oldest(), new Oldest()];
    this.finding = finding;
    for (;;) {
      for (let i = 0; i < slice; i++) {
        const next = locks.next();
        if (next.done) {
          // Locks that changed during the pass were told to `finding` as they changed: it is exact unless the
          // one it found left meanwhile (then it is stale, and the read passes again).
          this.adopt(finding);
          return;
        }
        if (next.value !== null) seeAll(finding, next.value);
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
  }

  /** One pass in one go (tens of milliseconds at a million locks): for a read whose passes in slices kept losing their oldest. */
  private findOldestNow(locks: Iterator<LedgerLock | null>): void {
    const found: Oldests = [new Oldest(), new Oldest(), new Oldest()];
    for (let next = locks.next(); !next.done; next = locks.next()) if (next.value !== null) seeAll(found, next.value);
    this.adopt(found);
  }

  /** What a pass found becomes the oldest kept. */
  private adopt(found: Oldests): void {
    for (const [kept, one] of [[this.oldest, found[0]], [this.oldestHeld, found[1]], [this.oldestPastTtl, found[2]]] as const) {
      kept.at = one.at;
      kept.resource = one.resource;
      kept.stale = one.stale;
    }
  }
}

function seeAll(found: Oldests, lock: LedgerLock): void {
  found[0].see(lock.resource, (lock.safety & COUNTED) !== 0, lock.acquiredAt);
  found[1].see(lock.resource, (lock.safety & HELD) !== 0, lock.acquiredAt);
  found[2].see(lock.resource, counted(lock.safety, ELAPSED) === 1, lock.expiresAt);
}

const counted = (flags: number, flag: number): number => ((flags & COUNTED) !== 0 && (flags & flag) !== 0 ? 1 : 0);
