import { describe, expect, it } from "vitest";
import type { ContentionEvent } from "@lockscope/redlock";
import { ContentionTracker, WAITER_STALE_MS } from "@/server/live/contention";

const refusal = (waiterId: string, attempt: number, resource = "lock:a"): ContentionEvent => ({ resource, waiterId, label: null, host: null, pid: null, attempt });

describe("contention figures from the engine's telemetry", () => {
  it("counts a waiter until it gives up, and each of its attempts once however many nodes report it", () => {
    const tracker = new ContentionTracker();
    for (const node of [0, 1, 2]) for (const attempt of [1, 2]) expect(tracker.record(refusal("w1", attempt), 1_000 + node)).toBe(node === 0);
    tracker.record(refusal("w2", 1), 1_010);
    expect(tracker.get("lock:a", 1_020)).toMatchObject({ attemptsPerMin: 3, waiters: 2 });
    expect(tracker.gaveUp({ resource: "lock:a", waiterId: "w1" }, 1_030)).toBe(true);
    // The other nodes' copies of the give-up change nothing more.
    expect(tracker.gaveUp({ resource: "lock:a", waiterId: "w1" }, 1_031)).toBe(false);
    expect(tracker.get("lock:a", 1_040)).toMatchObject({ attemptsPerMin: 3, waiters: 1 });
  });

  it("does not count again a waiter whose give-up came from one node before its last refusal came from another", () => {
    const tracker = new ContentionTracker();
    tracker.record(refusal("w1", 1), 1_000);
    tracker.gaveUp({ resource: "lock:a", waiterId: "w1" }, 1_010);
    // Node 1's report of attempt 2 (which node 0 granted) comes after node 0's give-up.
    expect(tracker.record(refusal("w1", 2), 1_020)).toBe(true);
    expect(tracker.get("lock:a", 1_030)).toMatchObject({ attemptsPerMin: 2, waiters: 0 });
    // A give-up for a waiter the console never counted, or for another resource, counts nothing.
    expect(tracker.gaveUp({ resource: "lock:b", waiterId: "w9" }, 1_040)).toBe(false);
    expect(tracker.has("lock:b")).toBe(false);
  });

  it("still drops a waiter that stopped without a word (a crash, an older engine) after the stale window, and reports the change", () => {
    const tracker = new ContentionTracker();
    tracker.record(refusal("w1", 1), 1_000);
    expect(tracker.sweep(1_500, () => null)).toEqual(["lock:a"]);
    tracker.markSent("lock:a", tracker.get("lock:a", 1_500));
    expect(tracker.get("lock:a", 1_000 + WAITER_STALE_MS).waiters).toBe(1);
    expect(tracker.sweep(1_001 + WAITER_STALE_MS, () => null)).toEqual(["lock:a"]);
    expect(tracker.get("lock:a", 1_001 + WAITER_STALE_MS).waiters).toBe(0);
  });

  it("stops counting the waiter that now holds the lock", () => {
    const tracker = new ContentionTracker();
    tracker.record(refusal("w1", 1), 1_000);
    tracker.record(refusal("w2", 1), 1_000);
    expect(tracker.get("lock:a", 1_010, "w1").waiters).toBe(1);
    tracker.holderIs("lock:a", "w2");
    expect(tracker.get("lock:a", 1_010).waiters).toBe(1);
  });
});
