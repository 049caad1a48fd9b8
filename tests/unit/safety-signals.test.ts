import { describe, expect, it } from "vitest";
import { lockSafetyCounts, readNodeSafety } from "@/lib/safety-signals";

const isLab = (r: string) => r.startsWith("lock:lab:");

describe("lock-safety signals", () => {
  it("counts present locks without TTL, below quorum and past their TTL, and the oldest of any state", () => {
    const counts = lockSafetyCounts(
      [
        { resource: "lock:a", state: "held", expiresAt: 5_000, acquiredAt: 3_000 },
        { resource: "lock:b", state: "held", expiresAt: null, acquiredAt: 2_000 },
        { resource: "lock:c", state: "partial", expiresAt: 9_000, acquiredAt: 1_000 },
        { resource: "lock:d", state: "elapsed", expiresAt: 100, acquiredAt: 4_000 },
        { resource: "lock:lab:r1:fence", state: "elapsed", expiresAt: 50, acquiredAt: 4_000 },
        { resource: "lock:e", state: "released", expiresAt: null, acquiredAt: 10 },
        { resource: "lock:lab:r1:stock", state: "partial", expiresAt: null, acquiredAt: 5 },
      ],
      isLab,
    );
    // The single-node lock (partial) is the oldest: held-too-long must see it.
    // The lock longest past its TTL is lock:d (the lab's own is left out).
    expect(counts).toEqual({ withoutTtl: 1, belowQuorum: 1, pastTtl: 1, oldestAcquiredAt: 1_000, oldestPastTtlAt: 100 });
    expect(lockSafetyCounts([], isLab)).toEqual({ withoutTtl: 0, belowQuorum: 0, pastTtl: 0, oldestAcquiredAt: null, oldestPastTtlAt: null });
  });

  it("counts for nothing a lock whose TTL ran out while no node holding it can be read, and still counts one whose TTL runs", () => {
    const counts = lockSafetyCounts(
      [
        { resource: "lock:gone", state: "elapsed", expiresAt: 100, acquiredAt: 50, unreadable: true },
        { resource: "lock:running", state: "held", expiresAt: 9_000, acquiredAt: 2_000, unreadable: true },
      ],
      isLab,
    );
    expect(counts).toEqual({ withoutTtl: 0, belowQuorum: 0, pastTtl: 0, oldestAcquiredAt: 2_000, oldestPastTtlAt: null });
  });

  it("reads the watcher's node facts and tolerates missing ones", () => {
    expect(readNodeSafety({ uptimeSec: 12, restartRisk: true, clockSkewMs: -250, longestTtlMs: 30_000, persistence: { appendonly: "no", save: "" } })).toEqual({
      uptimeSec: 12,
      restartHazard: true,
      clockSkewMs: -250,
      longestTtlMs: 30_000,
      aof: false,
      rdb: false,
    });
    expect(readNodeSafety({ persistence: { appendonly: "yes", save: "3600 1" } })).toMatchObject({ aof: true, rdb: true, uptimeSec: null, restartHazard: null });
    expect(readNodeSafety({})).toEqual({ uptimeSec: null, restartHazard: null, clockSkewMs: null, longestTtlMs: null, aof: null, rdb: null });
  });
});
