import { describe, expect, it } from "vitest";
import { BucketCounter, pushCapped } from "@/lib/locks/window";

describe("sliding-window counters", () => {
  it("sums the last minute and forgets what aged out", () => {
    const c = new BucketCounter(5_000, 12);
    const t0 = 1_000_000_000;
    c.add(t0, 3);
    c.add(t0 + 30_000, 2);
    expect(c.sum(t0 + 30_000, 60_000)).toBe(5);
    expect(c.sum(t0 + 61_000, 60_000)).toBe(2);
    expect(c.sum(t0 + 200_000, 60_000)).toBe(0);
    expect(c.isEmpty(t0 + 200_000)).toBe(true);
  });

  it("gives the series oldest first", () => {
    const c = new BucketCounter(1_000, 4);
    const t0 = 5_000_000;
    c.add(t0);
    c.add(t0 + 2_000, 2);
    c.add(t0 + 3_000, 3);
    expect(c.series(t0 + 3_000)).toEqual([1, 0, 2, 3]);
  });

  it("keeps capped lists bounded", () => {
    const list: number[] = [];
    for (let i = 0; i < 1_000; i++) pushCapped(list, i, 100);
    expect(list.length).toBeLessThanOrEqual(113);
    expect(list[list.length - 1]).toBe(999);
  });
});
