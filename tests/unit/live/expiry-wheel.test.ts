import { describe, expect, it } from "vitest";
import { ExpiryWheel, UNSCHEDULED } from "@/server/live/expiry-wheel";

const lock = (resource: string) => ({ resource, wheelAt: UNSCHEDULED });

describe("ExpiryWheel", () => {
  it("fires each lock once its time has come on the caller's clock, whether that clock is behind or ahead of the wall clock", () => {
    const made = Date.now();
    const locks = new Map([lock("early"), lock("late"), lock("never")].map((l) => [l.resource, l]));
    const wheel = new ExpiryWheel((r) => locks.get(r));
    // The store's callers pass their own clock: a test's fixed instant, or a clock stepped back.
    const past = made - 86_400_000;
    wheel.schedule(locks.get("early")!, past + 1_000);
    wheel.schedule(locks.get("late")!, made + 60_000);
    wheel.schedule(locks.get("never")!, made + 3_600_000);
    const fired: string[] = [];
    const fire = (now: number) => wheel.fire(now, (l) => fired.push(l.resource));
    fire(past + 500);
    expect(fired).toEqual([]);
    fire(past + 1_100);
    expect(fired).toEqual(["early"]);
    expect(locks.get("early")!.wheelAt).toBe(UNSCHEDULED);
    fire(made + 59_000);
    expect(fired).toEqual(["early"]);
    fire(made + 60_100);
    expect(fired).toEqual(["early", "late"]);
    expect(wheel.sizes()).toEqual({ entries: 1, buckets: 1 });
    // Bucket numbers stay small integers (kept inside the lock by V8), not epoch-sized ones.
    expect(Math.abs(locks.get("never")!.wheelAt)).toBeLessThan(2 ** 30);
    wheel.unschedule(locks.get("never")!);
    expect(wheel.sizes()).toEqual({ entries: 0, buckets: 0 });
  });

  it("keeps nothing of a lock taken out of its bucket as soon as it was put in, in a bucket other locks keep", () => {
    const T = 1_800_000_000_000;
    const locks = new Map(Array.from({ length: 10_010 }, (_, i) => lock(`lock:${i}`)).map((l) => [l.resource, l]));
    const wheel = new ExpiryWheel((r) => locks.get(r));
    for (let i = 0; i < 10; i++) wheel.schedule(locks.get(`lock:${i}`)!, T + 60_000);
    // Found at start and kept cold at once, each scheduled and forgotten in turn.
    for (let i = 10; i < 10_010; i++) {
      wheel.schedule(locks.get(`lock:${i}`)!, T + 60_000);
      wheel.forget(locks.get(`lock:${i}`)!);
    }
    expect(wheel.sizes()).toEqual({ entries: 10, buckets: 1 });
    const bucketArrays = (wheel as unknown as { buckets: Map<number, { items: string[] }> }).buckets;
    expect([...bucketArrays.values()].map((b) => b.items.length)).toEqual([10]);
    const fired: string[] = [];
    wheel.fire(T + 60_000, (l) => fired.push(l.resource));
    expect(fired).toHaveLength(10);
  });

  it("fires a lock moved between buckets once, at its last time, and keeps a bucket's array from filling with moved-on entries", () => {
    const T = 1_800_000_000_000;
    const locks = new Map(Array.from({ length: 1_000 }, (_, i) => lock(`lock:${i}`)).map((l) => [l.resource, l]));
    const wheel = new ExpiryWheel((r) => locks.get(r));
    for (const l of locks.values()) wheel.schedule(l, T + 10_000);
    // A lease renewed again and again: moved to later buckets, and back to the first one.
    const renewed = locks.get("lock:0")!;
    for (let i = 1; i <= 50; i++) wheel.schedule(renewed, T + 10_000 + i * 1_000);
    wheel.schedule(renewed, T + 10_000);
    wheel.schedule(renewed, T + 70_000);
    expect(wheel.sizes()).toEqual({ entries: 1_000, buckets: 2 });
    // Most of the bucket's locks end (unscheduled): its array is compacted rather than kept at 1,000.
    for (let i = 1; i < 990; i++) {
      wheel.unschedule(locks.get(`lock:${i}`)!);
      locks.delete(`lock:${i}`);
    }
    expect(wheel.sizes()).toEqual({ entries: 11, buckets: 2 });
    const bucketArrays = (wheel as unknown as { buckets: Map<number, { items: string[] }> }).buckets;
    for (const bucket of bucketArrays.values()) expect(bucket.items.length).toBeLessThanOrEqual(2 * 10 + 64);
    const fired: string[] = [];
    wheel.fire(T + 10_050, (l) => fired.push(l.resource));
    expect(fired.sort()).toEqual(["lock:990", "lock:991", "lock:992", "lock:993", "lock:994", "lock:995", "lock:996", "lock:997", "lock:998", "lock:999"]);
    wheel.fire(T + 69_999, (l) => fired.push(l.resource));
    expect(fired).toHaveLength(10);
    wheel.fire(T + 70_000, (l) => fired.push(l.resource));
    expect(fired.slice(10)).toEqual(["lock:0"]);
    expect(wheel.sizes()).toEqual({ entries: 0, buckets: 0 });
  });
});
