import { describe, expect, it } from "vitest";
import { firstInOrder, SortedStrings } from "@/lib/locks/sorted-strings";

/** A small seeded generator, so a failure replays. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

const sorted = (values: Iterable<string>) => [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

describe("SortedStrings", () => {
  it("keeps every string in order through thousands of additions and deletions, and reads any page both ways", () => {
    const next = random(7);
    const set = new SortedStrings();
    const reference = new Set<string>();
    for (let step = 0; step < 20_000; step++) {
      // Keys that share prefixes and differ in length, as lock keys do; upper case sorts before lower case.
      const key = `lock:${next() < 0.5 ? "orders" : "Users"}/${Math.floor(next() * 3_000)}`;
      if (next() < 0.6) {
        expect(set.add(key)).toBe(!reference.has(key));
        reference.add(key);
      } else {
        expect(set.delete(key)).toBe(reference.has(key));
        reference.delete(key);
      }
    }
    const expected = sorted(reference);
    expect(set.size).toBe(expected.length);
    expect(expected.length).toBeGreaterThan(2_000);
    expect(set.slice(0, expected.length)).toEqual(expected);
    for (const offset of [0, 1, 511, 512, 1_023, 1_024, 1_025, expected.length - 3]) {
      expect(set.slice(offset, 100)).toEqual(expected.slice(offset, offset + 100));
      expect(set.slice(offset, 100, true)).toEqual([...expected].reverse().slice(offset, offset + 100));
    }
    expect(set.slice(expected.length, 10)).toEqual([]);
  });

  it("starts from a sorted list and goes on from there", () => {
    const keys = Array.from({ length: 5_000 }, (_, i) => `lock:job/${String(i).padStart(5, "0")}`);
    const set = SortedStrings.fromSorted(keys);
    expect(set.size).toBe(5_000);
    expect(set.add("lock:job/00000")).toBe(false);
    expect(set.add("lock:job/02500a")).toBe(true);
    expect(set.delete("lock:job/04999")).toBe(true);
    expect(set.slice(2_499, 3)).toEqual(["lock:job/02499", "lock:job/02500", "lock:job/02500a"]);
    expect(set.slice(0, 2, true)).toEqual(["lock:job/04998", "lock:job/04997"]);
    for (const k of keys) set.delete(k);
    expect(set.slice(0, 10)).toEqual(["lock:job/02500a"]);
    expect(set.delete("lock:job/02500a")).toBe(true);
    expect(set.size).toBe(0);
    expect(set.has("lock:job/02500a")).toBe(false);
    expect(set.slice(0, 10)).toEqual([]);
  });

  it("goes on after a string, in either order, whether the string is still in the set or not", () => {
    const keys = Array.from({ length: 3_000 }, (_, i) => `lock:job/${String(i).padStart(5, "0")}`);
    const set = SortedStrings.fromSorted(keys);
    expect(set.slice(set.positionAfter("lock:job/01500"), 2)).toEqual(["lock:job/01501", "lock:job/01502"]);
    expect(set.slice(set.positionAfter("lock:job/01500", true), 2, true)).toEqual(["lock:job/01499", "lock:job/01498"]);
    set.delete("lock:job/01500");
    set.add("lock:job/00001a");
    expect(set.slice(set.positionAfter("lock:job/01500"), 1)).toEqual(["lock:job/01501"]);
    expect(set.slice(set.positionAfter("lock:job/01500", true), 1, true)).toEqual(["lock:job/01499"]);
    expect(set.slice(set.positionAfter("lock:job/02999"), 1)).toEqual([]);
    expect(set.slice(set.positionAfter("lock:job/00000", true), 1, true)).toEqual([]);
    expect(set.slice(set.positionAfter("a"), 1)).toEqual(["lock:job/00000"]);
    expect(new SortedStrings().positionAfter("x")).toBe(0);
  });
});

describe("firstInOrder", () => {
  it("gives what a sort of them all begins with, both ways, for any count", () => {
    const next = random(11);
    const values = [...new Set(Array.from({ length: 5_000 }, () => `lock:${next() < 0.5 ? "orders" : "Users"}/${Math.floor(next() * 100_000)}`))];
    const all = sorted(values);
    for (const count of [1, 2, 7, 100, 1_000, values.length, values.length + 10]) {
      expect(firstInOrder(values, count)).toEqual(all.slice(0, count));
      expect(firstInOrder(values, count, true)).toEqual(all.slice().reverse().slice(0, count));
    }
    expect(firstInOrder(values, 0)).toEqual([]);
    expect(firstInOrder([], 5)).toEqual([]);
  });

  it("reads its values once, as they come (a generator)", () => {
    function* names() {
      for (let i = 999; i >= 0; i--) yield `lock:jobs/${String(i).padStart(3, "0")}`;
    }
    expect(firstInOrder(names(), 3)).toEqual(["lock:jobs/000", "lock:jobs/001", "lock:jobs/002"]);
  });
});
