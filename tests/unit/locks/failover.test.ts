import { describe, expect, it } from "vitest";
import { lostInFailover, parseSwitchMaster, releasesUndone } from "@/lib/locks/failover";

describe("locks lost in failover", () => {
  const now = 1_000_000;
  const seen = [
    { resource: "lock:copied", token: "a", expiresAt: now + 30_000 },
    { resource: "lock:lost", token: "b", expiresAt: now + 30_000 },
    { resource: "lock:other-holder", token: "c", expiresAt: now + 30_000 },
    { resource: "lock:lease-over", token: "d", expiresAt: now - 1 },
    { resource: "lock:no-ttl", token: "e", expiresAt: null },
  ];

  it("are those still within their lease that the new primary does not hold with the same token", () => {
    const onNewPrimary = new Map<string, string | null>([
      ["lock:copied", "a"],
      ["lock:lost", null],
      ["lock:other-holder", "someone-else"],
      ["lock:lease-over", null],
      ["lock:no-ttl", null],
    ]);
    expect(lostInFailover(seen, onNewPrimary, now).map((l) => l.resource)).toEqual(["lock:lost", "lock:other-holder", "lock:no-ttl"]);
    expect(lostInFailover([], onNewPrimary, now)).toEqual([]);
  });

  it("undid the force releases whose value the new primary holds again, and no other", () => {
    const forced = [
      { resource: "lock:back", token: "a", expiresAt: now + 30_000 },
      { resource: "lock:gone", token: "b", expiresAt: now + 30_000 },
      { resource: "lock:taken-by-another", token: "c", expiresAt: now + 30_000 },
    ];
    const onNewPrimary = new Map<string, string | null>([
      ["lock:back", "a"],
      ["lock:gone", null],
      ["lock:taken-by-another", "d"],
    ]);
    expect(releasesUndone(forced, onNewPrimary).map((l) => l.resource)).toEqual(["lock:back"]);
    expect(releasesUndone([], onNewPrimary)).toEqual([]);
  });

  it("reads a sentinel's +switch-master message, and nothing else", () => {
    expect(parseSwitchMaster("locks 127.0.0.1 6380 127.0.0.1 6381")).toEqual({ master: "locks", from: { host: "127.0.0.1", port: 6380 }, to: { host: "127.0.0.1", port: 6381 } });
    expect(parseSwitchMaster("locks 127.0.0.1 6380")).toBeNull();
    expect(parseSwitchMaster("locks a x b y")).toBeNull();
  });
});
