import { describe, expect, it } from "vitest";
import { ColdLocks, type ColdLock } from "@/lib/locks/cold-locks";

const out = (): ColdLock => ({ value: "", slot: -1, code: 0, wakeAt: 0 });

/** A small deterministic generator (the same sequence every run). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return s / 2 ** 32;
  };
}

describe("the cold locks' table", () => {
  it("gives back each key's value, slot, code and wake time exactly as put, and forgets it once taken", () => {
    const cold = new ColdLocks();
    const keys = ["lock:a", "lock:😀/ü", "lock:\uD800lone", "", "lock:b"];
    keys.forEach((key, i) => cold.put(key, `value-${i}\u0000\uDFFF`, 100 + i, i, i === 4 ? Number.POSITIVE_INFINITY : 1_000 * i));
    expect(cold.size).toBe(5);
    for (const key of keys) {
      const record = cold.recordOf(key);
      expect(cold.isLive(record)).toBe(true);
      expect(cold.keyOf(record)).toBe(key);
    }
    expect(cold.take("lock:😀/ü", out())).toEqual({ value: "value-1\u0000\uDFFF", slot: 101, code: 1, wakeAt: 1_000 });
    expect(cold.take("lock:😀/ü", out())).toBeNull();
    expect(cold.has("lock:😀/ü")).toBe(false);
    expect(cold.has("lock:\uD800lone")).toBe(true);
    expect(cold.has("lock:\uD800lonE")).toBe(false);
    expect(cold.take("lock:b", out())).toEqual({ value: "value-4\u0000\uDFFF", slot: 104, code: 4, wakeAt: Number.POSITIVE_INFINITY });
    expect(cold.size).toBe(3);
  });

  it("refuses a key it keeps already, rather than keeping it twice", () => {
    const cold = new ColdLocks();
    cold.put("lock:a", "v", 1, 0, 0);
    expect(() => cold.put("lock:a", "w", 2, 0, 0)).toThrow(/"lock:a" not to be kept cold already/);
    expect(cold.take("lock:a", out())?.value).toBe("v");
  });

  it("keeps values longer than one decoding step whole", () => {
    const cold = new ColdLocks();
    const value = Array.from({ length: 20_001 }, (_, i) => String.fromCharCode(32 + (i % 60_000))).join("");
    cold.put("lock:long", value, 0, 0, 0);
    expect(cold.valueOf(cold.recordOf("lock:long"))).toBe(value);
  });

  it("agrees with a Map through 60,000 random puts and takes (its table grows, entries move back, the arena compacts)", () => {
    const cold = new ColdLocks();
    const model = new Map<string, { value: string; slot: number }>();
    const next = random(7);
    for (let step = 0; step < 60_000; step++) {
      // Keys from a space of 5,000, many sharing a prefix; values of varied length.
      const key = `lock:orders/${Math.floor(next() * 5_000)}`;
      if (model.has(key)) {
        const kept = model.get(key)!;
        expect(cold.take(key, out())).toMatchObject({ value: kept.value, slot: kept.slot });
        model.delete(key);
      } else {
        const value = `v${step}-`.repeat(1 + Math.floor(next() * 8));
        cold.put(key, value, step, 0, step);
        model.set(key, { value, slot: step });
      }
      expect(cold.size).toBe(model.size);
    }
    for (const [key, kept] of model) {
      const record = cold.recordOf(key);
      expect(cold.valueOf(record)).toBe(kept.value);
      expect(cold.slotOf(record)).toBe(kept.slot);
    }
    let live = 0;
    for (let record = 0; record < cold.span; record++) if (cold.isLive(record)) live++;
    expect(live).toBe(model.size);
    for (const key of [...model.keys()]) expect(cold.take(key, out())).not.toBeNull();
    expect(cold.size).toBe(0);
    expect(cold.span).toBe(0);
  });

  it("names the locks due by a time, once each, and none taken before", () => {
    const cold = new ColdLocks();
    cold.put("lock:soon", "v", 0, 0, 1_000);
    cold.put("lock:later", "v", 1, 0, 5_000);
    cold.put("lock:never", "v", 2, 0, Number.POSITIVE_INFINITY);
    cold.put("lock:gone", "v", 3, 0, 500);
    cold.take("lock:gone", out());
    expect(cold.due(999)).toEqual([]);
    expect(cold.due(1_000)).toEqual(["lock:soon"]);
    cold.take("lock:soon", out());
    expect(cold.due(4_999)).toEqual([]);
    expect(cold.due(10_000)).toEqual(["lock:later"]);
    // A lock put back earlier than what the last pass found is due again.
    cold.take("lock:later", out());
    cold.put("lock:later", "v", 1, 0, 2_000);
    expect(cold.due(2_000)).toEqual(["lock:later"]);
  });
});
