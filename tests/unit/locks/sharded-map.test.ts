import { describe, expect, it } from "vitest";
import { ShardedMap } from "@/lib/locks/sharded-map";

describe("ShardedMap", () => {
  it("holds what a Map holds through additions, replacements and deletions, and lists every entry once", () => {
    const map = new ShardedMap<number>();
    const reference = new Map<string, number>();
    for (let i = 0; i < 50_000; i++) {
      const key = `lock:orders/${(i * 7_919) % 20_000}`;
      if (i % 5 === 4) expect(map.delete(key)).toBe(reference.delete(key));
      else {
        map.set(key, i);
        reference.set(key, i);
      }
    }
    expect(map.size).toBe(reference.size);
    expect(map.size).toBeGreaterThan(10_000);
    for (const [key, value] of reference) {
      expect(map.has(key)).toBe(true);
      expect(map.get(key)).toBe(value);
    }
    expect(map.get("lock:orders/20000")).toBeUndefined();
    expect(map.has("lock:orders/20000")).toBe(false);
    expect(map.delete("lock:orders/20000")).toBe(false);
    expect(new Map(map)).toEqual(reference);
    expect([...map.values()].sort((a, b) => a - b)).toEqual([...reference.values()].sort((a, b) => a - b));
  });

  it("an iteration that goes on while entries come and go sees every entry that stayed, and none that left", () => {
    const map = new ShardedMap<string>();
    for (let i = 0; i < 1_000; i++) map.set(`k${i}`, `v${i}`);
    const seen = new Set<string>();
    const deletedUnseen = new Set<string>();
    let step = 0;
    for (const [key] of map) {
      expect(deletedUnseen.has(key)).toBe(false);
      seen.add(key);
      // Meanwhile: the odd keys leave, new ones come.
      if (step < 500) {
        const gone = `k${2 * step + 1}`;
        map.delete(gone);
        if (!seen.has(gone)) deletedUnseen.add(gone);
      }
      map.set(`new${step++}`, "x");
      if (step > 5_000) break;
    }
    for (let i = 0; i < 1_000; i += 2) expect(seen.has(`k${i}`)).toBe(true);
    expect(deletedUnseen.size).toBeGreaterThan(100);
    expect(map.size).toBe(500 + step);
  });

  it("a pass that pauses visits each key once, with its value when visited, whatever is deleted and set again meanwhile", () => {
    const map = new ShardedMap<string>();
    for (let i = 0; i < 5_000; i++) map.set(`k${i}`, `k${i}:first`);
    const visits = new Map<string, number>();
    const seen: string[] = [];
    let step = 0;
    for (const value of map.valuesOnce()) {
      seen.push(value);
      const key = value.split(":")[0] as string;
      visits.set(key, (visits.get(key) ?? 0) + 1);
      // Meanwhile, each visited key and one not visited yet end and are taken again (to the end of their shard).
      const again = `k${(step * 7) % 5_000}`;
      for (const k of [key, again]) {
        map.delete(k);
        map.set(k, `${k}:again`);
      }
      step += 1;
    }
    expect(visits.size).toBe(5_000);
    expect([...visits.values()].every((n) => n === 1)).toBe(true);
    // A key taken again before its turn is visited with its value then.
    expect(seen.filter((v) => v.endsWith(":again")).length).toBeGreaterThan(100);
    // A plain iteration would visit keys set again behind it a second time.
    let plain = 0;
    for (const [key] of map) {
      plain += 1;
      map.delete(key);
      map.set(key, "x");
      if (plain > 20_000) break;
    }
    expect(plain).toBeGreaterThan(5_000);
  });
});
