import { describe, expect, it } from "vitest";
import { ExpiryWheel, UNSCHEDULED } from "@/server/live/expiry-wheel";

const lock = (resource: string) => ({ resource, wheelAt: UNSCHEDULED });

describe("ExpiryWheel", () => {
  it("fires each lock once its time has come on the caller's clock, whether that clock is behind or ahead of the wall clock", () => {
    const made = Date.now();
    const wheel = new ExpiryWheel();
    // The store's callers pass their own clock: a test's fixed instant, or a clock stepped back.
    const past = made - 86_400_000;
    const locks = new Map([lock("early"), lock("late"), lock("never")].map((l) => [l.resource, l]));
    wheel.schedule(locks.get("early")!, past + 1_000);
    wheel.schedule(locks.get("late")!, made + 60_000);
    wheel.schedule(locks.get("never")!, made + 3_600_000);
    const fired: string[] = [];
    const fire = (now: number) => wheel.fire(now, (r) => locks.get(r), (l) => fired.push(l.resource));
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
});
