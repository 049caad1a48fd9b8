import { describe, expect, it } from "vitest";
import { LockRecord, lockSlots } from "@/lib/locks/reducer";
import { TimeSlots } from "@/lib/locks/time-slots";

describe("a table of locks' numbers", () => {
  it("gives each lock a place of its own, past one block, and a freed place to the next lock, cleared", () => {
    const slots = new TimeSlots(9);
    const taken = Array.from({ length: 10_000 }, (_, i) => {
      const slot = slots.take();
      for (let j = 0; j < 9; j++) slots.set(slot, j, i * 10 + j);
      return slot;
    });
    expect(new Set(taken).size).toBe(10_000);
    expect(taken.every((slot, i) => Array.from({ length: 9 }, (_, j) => slots.get(slot, j)).every((v, j) => v === i * 10 + j))).toBe(true);
    slots.give(taken[4_100] as number);
    expect(slots.size).toBe(9_999);
    const again = slots.take();
    expect(again).toBe(taken[4_100]);
    expect(Array.from({ length: 9 }, (_, j) => slots.get(again, j)).every(Number.isNaN)).toBe(true);
    // Its neighbours keep their numbers.
    expect(slots.get(taken[4_099] as number, 8)).toBe(4_099 * 10 + 8);
    expect(slots.get(taken[4_101] as number, 0)).toBe(4_101 * 10);
  });

  it("takes the lowest free place first and lets the table shrink back after a burst, keeping one spare block", () => {
    const slots = new TimeSlots(17);
    const block = 1_024 * 17 * 8;
    const burst = Array.from({ length: 3_000 }, () => slots.take());
    expect(slots.bytes).toBe(3 * block);
    // The burst's last locks go: the emptied last block is kept, as the one spare block.
    for (const slot of burst.slice(2_048)) slots.give(slot);
    expect([slots.size, slots.bytes]).toEqual([2_048, 3 * block]);
    // The second block's locks go too: one empty block is released, the other kept.
    for (const slot of burst.slice(1_024, 2_048)) slots.give(slot);
    expect([slots.size, slots.bytes]).toEqual([1_024, 2 * block]);
    for (let i = 0; i < 1_024; i++) expect(slots.take()).toBeLessThan(2_048);
    // A lock of the first block goes: the next lock takes its place, not one past the rest.
    slots.give(burst[10] as number);
    expect(slots.take()).toBe(burst[10]);
    // Giving a place back twice changes nothing.
    slots.give(burst[20] as number);
    slots.give(burst[20] as number);
    expect(slots.size).toBe(2_047);
    for (let slot = 0; slot < 2_048; slot++) slots.give(slot);
    expect([slots.size, slots.bytes]).toEqual([0, block]);
    expect(slots.take()).toBe(0);
  });

  it("refuses a width that is not a positive whole number", () => {
    expect(() => new TimeSlots(0)).toThrow("Expected a positive whole number of doubles a slot, got 0");
  });

  it("keeps a lock's times until it is disposed of, then reads none and keeps none", () => {
    const slots = lockSlots(3);
    const lock = new LockRecord("lock:a", 3, null, slots);
    lock.expiresAt = 1_000;
    lock.setExpiryOn(2, 2_000);
    expect([lock.expiresAt, lock.expiryOn(2), lock.settleUntil, slots.size]).toEqual([1_000, 2_000, 0, 1]);
    lock.dispose();
    lock.dispose();
    expect(slots.size).toBe(0);
    lock.expiresAt = 5;
    expect([lock.expiresAt, lock.expiryOn(2)]).toEqual([null, Number.NaN]);
    // The next lock takes the place, with none of the first one's times.
    const next = new LockRecord("lock:b", 3, null, slots);
    expect([next.expiresAt, next.expiryOn(2), next.settleUntil, lock.expiresAt]).toEqual([null, Number.NaN, 0, null]);
  });

  it("refuses a table made for another number of nodes", () => {
    expect(() => new LockRecord("lock:a", 5, null, lockSlots(3))).toThrow("Expected slots of 19 numbers for a lock on 5 nodes, got 17");
  });
});
