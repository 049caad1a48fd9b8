import { describe, expect, it } from "vitest";
import { NodeClock } from "@/lib/locks/node-clock";

describe("a node's clock on the console's", () => {
  it("gives two reads of an untouched key the same TTL end, however late the second reply was handled", () => {
    const clock = new NodeClock();
    // The node's clock runs 5 s ahead. A quick read (0.4 ms round trip)...
    const first = clock.toLocal(1_000_005_000, 1_000_000_000, 1_000_000_000.4) + 30_000;
    // ...and one whose reply waited 180 ms in a busy event loop, 2 s later, 2 s less PTTL.
    const second = clock.toLocal(1_000_007_000, 1_000_002_000, 1_000_002_180) + 28_000;
    expect(Math.abs(second - first)).toBeLessThan(1);
    expect(first).toBeCloseTo(1_000_030_000.2, 1);
  });

  it("follows a better round trip, and a slower one once the best has aged", () => {
    const clock = new NodeClock(60_000);
    const slow = clock.toLocal(2_000, 1_000, 1_100);
    expect(slow).toBeCloseTo(1_050, 5);
    // A quicker read replaces it at once.
    expect(clock.toLocal(3_000, 2_000, 2_002)).toBeCloseTo(2_001, 5);
    // Soon after, a slow read does not move the offset...
    expect(clock.toLocal(4_000, 3_000, 3_080)).toBeCloseTo(3_001, 5);
    // ...but a minute later (the best round trip aged by 10 ms) a 10 ms read does.
    expect(clock.toLocal(63_000, 62_000, 62_010)).toBeCloseTo(62_005, 5);
  });

  it("says how far its offset moved lately: a slow first read while the console starts, then a quick one", () => {
    const clock = new NodeClock(60_000);
    // The first read waited 180 ms (the start's own work): its TTL end is 90 ms off.
    clock.toLocal(1_000_000, 1_000_000, 1_000_180);
    expect(clock.recentShift(1_000_180)).toBe(0);
    clock.toLocal(1_001_000, 1_001_000, 1_001_002);
    expect(clock.recentShift(1_001_002)).toBeCloseTo(89, 5);
    // A minute later that move no longer counts.
    expect(clock.recentShift(1_061_003)).toBe(0);
  });

  it("falls back to the middle of the round trip when the node's time is not known", () => {
    expect(new NodeClock().toLocal(Number.NaN, 100, 300)).toBe(200);
  });
});
