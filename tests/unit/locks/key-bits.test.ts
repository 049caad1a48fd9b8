import { describe, expect, it } from "vitest";
import { KeyBits } from "@/lib/locks/key-bits";

/** A small seeded generator, so a failure replays. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

describe("KeyBits", () => {
  it("gives every key exactly its own bits through growth, with keys that share prefixes, lengths and characters", () => {
    const next = random(11);
    const table = new KeyBits();
    const reference = new Map<string, number>();
    // Far past the first table and arena sizes (4,096 slots, 32,768 code units): both grow many times.
    const shapes = [
      (n: number) => `lock:orders/${n}`,
      (n: number) => `lock:orders/${n}x`,
      (n: number) => `${n}`,
      (n: number) => `lock:заказ/${n}`,
      (n: number) => `lock:🔒/${n}`,
      (n: number) => `lock:${"o".repeat(n % 300)}`,
    ];
    for (let step = 0; step < 60_000; step++) {
      const key = (shapes[Math.floor(next() * shapes.length)] as (n: number) => string)(Math.floor(next() * 20_000));
      const r = next();
      if (r < 0.8) {
        const bits = 1 << Math.floor(next() * 31);
        table.or(key, bits);
        reference.set(key, (reference.get(key) ?? 0) | bits);
      } else {
        table.clear(key);
        if (reference.has(key)) reference.set(key, 0);
      }
    }
    expect(reference.size).toBeGreaterThan(30_000);
    expect(table.size).toBe(reference.size);
    for (const [key, bits] of reference) expect(table.get(key)).toBe(bits);
    // Keys never given bits, including ones one character off and prefixes of keys that have some.
    for (const key of ["", "lock:orders/", "lock:orders/1xx", "lock:orders/20000", "lock:🔒", "lock:" + "o".repeat(300)]) {
      expect(table.get(key)).toBe(reference.get(key) ?? 0);
    }
  });

  it("keeps the empty key and a cleared key apart from absent ones, and clearing an absent key adds nothing", () => {
    const table = new KeyBits();
    table.clear("lock:never");
    expect(table.size).toBe(0);
    table.or("", 0b10);
    table.or("lock:a", 0b01);
    table.or("lock:a", 0b100);
    expect(table.get("")).toBe(0b10);
    expect(table.get("lock:a")).toBe(0b101);
    table.clear("lock:a");
    expect(table.get("lock:a")).toBe(0);
    table.or("lock:a", 0b1000);
    expect(table.get("lock:a")).toBe(0b1000);
    expect(table.size).toBe(2);
  });
});
