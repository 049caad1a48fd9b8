import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { acquireNaive, decodeLockValue, encodeLockValue, lockValueId, Redlock, type NaiveLockClient, type RedlockClient } from "../index.ts";

describe("lock values carry the holder's identity", () => {
  const fields = { label: "checkout worker", host: "web-1.internal", pid: 4242, fence: "17", acquiredAt: 1_760_000_000_123 };

  it("round-trips label, host, pid, fence and acquisition time", () => {
    const value = encodeLockValue(fields);
    expect(decodeLockValue(value)).toEqual(fields);
  });

  it("is a unique, compact, printable ASCII token", () => {
    const values = new Set(Array.from({ length: 5000 }, () => encodeLockValue(fields)));
    expect(values.size).toBe(5000);
    for (const value of [...values].slice(0, 50)) {
      expect(value).toMatch(/^[\x21-\x7e]+$/);
      expect(value.length).toBeLessThan(80);
      expect(lockValueId(value)).toMatch(/^[A-Za-z0-9_-]{16}$/);
    }
  });

  it("keeps separators and non-ASCII text in labels and hosts intact", () => {
    const odd = { label: "a:b|c%d ñ 🚀", host: "h:1", pid: null, fence: null, acquiredAt: 0 };
    expect(decodeLockValue(encodeLockValue(odd))).toEqual(odd);
  });

  it("reads missing fields as null", () => {
    const bare = { label: null, host: null, pid: null, fence: null, acquiredAt: 5 };
    expect(decodeLockValue(encodeLockValue(bare))).toEqual(bare);
  });

  it.each([
    ["node-redlock's random hex", "9f2c4e1a7b3d5f60a1b2c3d4e5f60718"],
    ["a uuid", "3b241101-e2bb-4255-8caf-4136c566a962"],
    ["a bare token", "token"],
    ["garbage", "lk1:::::::"],
    ["a damaged value", "lk1:AAAAAAAAAAAAAAAA:zz:1::%E0%A4%A:x"],
    ["an empty string", ""],
  ])("returns null for %s", (_name, value) => {
    expect(decodeLockValue(value)).toBeNull();
    expect(lockValueId(value)).toBeNull();
  });

  it("refuses, with a TypeError naming it, a label or host no value could carry readably", async () => {
    // 400 "é" are 2400 characters percent-encoded: the lock was taken, but its value read back as null (no
    // holder, no contention for any console); a lone surrogate threw a URIError from the constructor.
    const longest = "x".repeat(1024);
    expect(decodeLockValue(encodeLockValue({ ...fields, label: longest, host: longest }))).toEqual({ ...fields, label: longest, host: longest });
    const client = { evalsha: () => new Promise(() => {}), eval: () => new Promise(() => {}), set: () => new Promise(() => {}), duplicate: () => { throw new Error("not here"); } } as unknown as RedlockClient;
    for (const [name, text] of [["label", "é".repeat(400)], ["label", "x".repeat(1025)], ["host", "h".repeat(1025)], ["label", "\ud800"], ["host", "web-\udfff"]] as const) {
      const expected = `Expected \`${name}\` to be a string or null of well-formed text, at most 1024 characters once percent-encoded`;
      expect(() => encodeLockValue({ ...fields, [name]: text })).toThrow(expected);
      expect(() => new Redlock([client], { [name]: text })).toThrow(expected);
      await expect(acquireNaive({} as NaiveLockClient, "lock:a", 1000, { [name]: text })).rejects.toThrow(expected);
      if (name === "label") await expect(new Redlock([client]).acquire(["lock:a"], 1000, { label: text })).rejects.toThrow(expected);
    }
  });

  it("reads the README's example value as the holder it describes", () => {
    const readme = readFileSync(path.join(import.meta.dirname, "..", "README.md"), "utf8");
    const example = /^lk1:[^<\s]+$/m.exec(readme)?.[0];
    expect(example).toBeDefined();
    expect(decodeLockValue(example!)).toEqual({ label: "checkout worker", host: "web-1", pid: 4242, fence: "17", acquiredAt: parseInt("mh2x1k3f", 36) });
    expect(lockValueId(example!)).toMatch(/^[A-Za-z0-9_-]{16}$/);
  });

  it("refuses, with a TypeError naming it, a pid, fence or time no value could carry readably", async () => {
    // A pid of 11 digits, a negative or fractional one, a fence that is no decimal, a time that is no number:
    // each was written into a value that decodeLockValue read as null (no holder, no contention shown).
    const widest = { ...fields, pid: 9_999_999_999 };
    expect(decodeLockValue(encodeLockValue(widest))).toEqual(widest);
    const client = { evalsha: () => new Promise(() => {}), eval: () => new Promise(() => {}), set: () => new Promise(() => {}), duplicate: () => { throw new Error("not here"); } } as unknown as RedlockClient;
    for (const pid of [10_000_000_000, -1, 1.5]) {
      const expected = "Expected `pid` to be null or a non-negative integer of at most 9999999999";
      expect(() => encodeLockValue({ ...fields, pid })).toThrow(expected);
      expect(() => new Redlock([client], { pid })).toThrow(expected);
      await expect(acquireNaive({} as NaiveLockClient, "lock:a", 1000, { pid })).rejects.toThrow(expected);
    }
    expect(() => encodeLockValue({ ...fields, fence: "x7" })).toThrow("Expected `fence` to be a decimal fence string");
    expect(() => encodeLockValue({ ...fields, acquiredAt: Number.NaN })).toThrow("Expected `acquiredAt` to be a non-negative integer");
  });
});
