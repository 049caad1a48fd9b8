import { describe, expect, it } from "vitest";
import { shortestTtlText } from "@/components/locks/format";

describe("a group's shortest TTL in words", () => {
  const now = 1_800_000_000_000;

  it("says the time left of the live lock that expires first", () => {
    expect(shortestTtlText({ expiresAt: now + 4_200 }, now)).toBe("4.2 s");
    expect(shortestTtlText({ expiresAt: now + 95_000 }, now)).toBe("1 min 35 s");
  });

  it("says elapsed, as the lock's own row does, once that lock's TTL has run out and Redis has not reclaimed it yet", () => {
    expect(shortestTtlText({ expiresAt: now - 12_000 }, now)).toBe("elapsed");
    expect(shortestTtlText({ expiresAt: now }, now)).toBe("elapsed");
  });

  it("says nothing where every live lock of the group never expires by itself", () => {
    expect(shortestTtlText(null, now)).toBe("—");
  });
});
