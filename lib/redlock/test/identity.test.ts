import { describe, expect, it } from "vitest";
import { decodeLockValue, encodeLockValue, lockValueId } from "../index.ts";

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
});
