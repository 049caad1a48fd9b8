import { describe, expect, it } from "vitest";
import { lostInFailover, parseSwitchMaster } from "@/lib/locks/failover";

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

  it("reads a sentinel's +switch-master message, and nothing else", () => {
    expect(parseSwitchMaster("locks 127.0.0.1 6380 127.0.0.1 6381")).toEqual({ master: "locks", from: { host: "127.0.0.1", port: 6380 }, to: { host: "127.0.0.1", port: 6381 } });
    expect(parseSwitchMaster("locks 127.0.0.1 6380")).toBeNull();
    expect(parseSwitchMaster("locks a x b y")).toBeNull();
  });
});
