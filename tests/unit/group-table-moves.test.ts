import { describe, expect, it } from "vitest";
import { mayMove } from "@/components/locks/groups-view";
import type { Lock } from "@/lib/locks/types";

const held: Lock = {
  resource: "lock:orders/7",
  deployment: "default",
  state: "held",
  format: "token",
  redisType: "string",
  scope: "quorum",
  holders: [{ id: "tok-7" }],
  warnings: [],
  token: "tok-7",
  holder: null,
  fence: null,
  nodes: [{ id: "node-0", up: true, token: "tok-7", pttlMs: 30_000 }],
  quorumHeld: 1,
  quorum: 1,
  expiresAt: 1_800_000_030_000,
  acquiredAt: 1_800_000_000_000,
  ttlMs: 30_000,
  contention: { attemptsPerMin: null, waiters: null, source: null },
};
/** The same lock released: it keeps the expiry and acquisition of its last holder. */
const released: Lock = { ...held, state: "released", token: null, quorumHeld: 0, endedAt: 1_800_000_001_000, endedToken: "tok-7" };

describe("a change on screen in a group's table sorted on the server", () => {
  it("reorders a table sorted by TTL or held for when a lock on screen ends (ended locks go last)", () => {
    expect(mayMove("ttl", false, held, released)).toBe(true);
    expect(mayMove("heldFor", false, held, released)).toBe(true);
  });

  it("leaves a table sorted by resource as it is", () => {
    expect(mayMove("resource", false, held, released)).toBe(false);
  });
});
