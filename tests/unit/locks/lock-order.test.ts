import { describe, expect, it } from "vitest";
import { LOCK_SORTS, LockColumns, type LockSummary } from "@/lib/locks/groups";
import { holderText } from "@/lib/locks/holder-text";
import { sortLocks } from "@/lib/locks/lock-order";
import type { Lock } from "@/lib/locks/types";

/** A held lock whose holder is a foreign token shown as `raw <token>`, with the fields given. */
function lock(resource: string, fields: Partial<Lock> = {}): Lock {
  const token = fields.token === undefined ? `${resource}-token` : fields.token;
  return {
    resource,
    deployment: "default",
    state: "held",
    format: "token",
    redisType: "string",
    scope: "quorum",
    holders: [],
    warnings: [],
    token,
    holder: null,
    fence: null,
    nodes: [{ id: "node-0", up: true, token, pttlMs: 30_000 }],
    quorumHeld: 1,
    quorum: 1,
    expiresAt: 60_000,
    acquiredAt: 1_000,
    ttlMs: 30_000,
    contention: { attemptsPerMin: null, waiters: null, source: null },
    ...fields,
  };
}

/** How the console pages a group's locks for `key` and `order` (server/live/groups.ts). */
function serverOrder(locks: readonly Lock[], key: (typeof LOCK_SORTS)[number], order: "asc" | "desc"): string[] {
  const byResource = new Map(locks.map((l) => [l.resource, l]));
  const columns = new LockColumns(key, { holder: (s) => holderText(byResource.get(s.resource)!), fence: (s) => byResource.get(s.resource)!.fence });
  for (const l of locks) {
    const summary: LockSummary = {
      resource: l.resource,
      state: l.state,
      acquiredAt: l.acquiredAt ?? null,
      expiresAt: l.expiresAt,
      token: l.token,
      quorumHeld: l.quorumHeld,
      attemptsPerMin: l.contention.attemptsPerMin,
      waiters: l.contention.waiters,
      deployment: l.deployment,
    };
    columns.add(summary);
  }
  return columns
    .rows()
    .sort(columns.compare(order))
    .map((i) => `${columns.resources[i]!} on ${columns.deployments[i]!}`);
}

describe("the order of the locks table", () => {
  // Holders that differ in case, accents and punctuation, figures that tie and figures that are unknown.
  const locks = [
    lock("lock:e", { token: "alice-1", expiresAt: null, fence: "12", acquiredAt: 3_000 }),
    lock("lock:b", { token: "Bob-2", state: "partial", fence: "7", contention: { attemptsPerMin: 4, waiters: 1, source: "engine" } }),
    lock("lock:a", { token: "Émile-3", quorumHeld: 2, fence: null, acquiredAt: 500 }),
    lock("lock:d", { token: "bob-4", expiresAt: 30_000, contention: { attemptsPerMin: 0, waiters: 0, source: "engine" } }),
    lock("lock:c", { token: "_carol-5", state: "elapsed", fence: "9007199254740993" }),
    lock("Lock:f", { token: "zed-6", fence: "9007199254740992" }),
    // The same resource on two deployments (listed in the order the console may hold them, not by name): two rows.
    lock("lock:g", { deployment: "orders", token: "same-7" }),
    lock("lock:g", { deployment: "cache", token: "same-7" }),
  ];

  it.each(LOCK_SORTS.flatMap((key) => [[key, "asc"] as const, [key, "desc"] as const]))("by %s %s is the order the console pages a group in", (key, order) => {
    const shown = sortLocks(locks.slice(), key, order === "asc" ? 1 : -1).map((l) => `${l.resource} on ${l.deployment}`);
    expect(shown).toEqual(serverOrder(locks, key, order));
  });

  it.each([["ttl", "asc"], ["ttl", "desc"], ["heldFor", "asc"], ["heldFor", "desc"]] as const)(
    "by %s %s puts ended locks (whose TTL and held for show —) after every live one, in both tables",
    (key, order) => {
      const rows = [
        // Released a moment ago: it kept the expiry and acquisition of its last holder, which no longer count.
        lock("lock:ended", { state: "released", token: null, expiresAt: 5_000, acquiredAt: 100 }),
        lock("lock:soon", { expiresAt: 20_000, acquiredAt: 2_000 }),
        lock("lock:later", { expiresAt: 90_000, acquiredAt: 4_000 }),
      ];
      const shown = sortLocks(rows.slice(), key, order === "asc" ? 1 : -1).map((l) => l.resource);
      expect(shown.at(-1)).toBe("lock:ended");
      expect(serverOrder(rows, key, order).map((r) => r.replace(/ on .*$/, ""))).toEqual(shown);
    },
  );
});
