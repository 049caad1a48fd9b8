import { describe, expect, it } from "vitest";
import { compactLock, lockFromCompact, lockOf, type CompactLock } from "@/lib/locks/compact-lock";
import type { Lock } from "@/lib/locks/types";

const T = 1_765_000_000_000;
const node = (i: number, token: string | null, up = true) => ({ id: `node-${i}`, up, token, pttlMs: token === null ? null : 30_000 - i });
const base: Lock = {
  resource: "lock:orders/42",
  deployment: "default",
  state: "held",
  format: "lockscope",
  redisType: "string",
  scope: "quorum",
  holders: [{ id: "tok-1", label: "checkout-api", host: "web-1", pid: 4242 }],
  warnings: [],
  token: "tok-1",
  holder: { label: "checkout-api", host: "web-1", pid: 4242 },
  fence: "17",
  nodes: [node(0, "tok-1"), node(1, "tok-1"), node(2, "tok-1")],
  quorumHeld: 3,
  quorum: 2,
  expiresAt: T + 30_000,
  acquiredAt: T - 5_000,
  ttlMs: 30_000,
  contention: { attemptsPerMin: 12, waiters: 2, source: "engine", recent: [0, 1, 3, 0, 0, 0, 0, 0, 0, 0, 2, 6] },
};

const { acquiredAt: _acquiredAt, ...neverSeenAcquired } = base;

/** Every shape a lock takes: each field the compact form writes apart (a value, null, left out). */
const shapes: Record<string, Lock> = {
  held: base,
  "held, one node holding another value and one down": { ...base, nodes: [node(0, "tok-1"), node(1, "other"), node(2, null, false)], quorumHeld: 1 },
  "partial, one value ahead": { ...base, state: "partial", token: null, leading: "tok-1", nodes: [node(0, "tok-1"), node(1, null), node(2, null)], quorumHeld: 1 },
  "a split vote with no side ahead": {
    ...base,
    state: "partial",
    token: null,
    holder: null,
    fence: null,
    holders: [
      { id: "a", nodes: ["node-0"] },
      { id: "b", nodes: ["node-1"] },
    ],
    nodes: [node(0, "a"), node(1, "b"), node(2, null)],
    quorumHeld: 1,
  },
  released: { ...base, state: "released", token: null, nodes: [node(0, null), node(1, null), node(2, null)], quorumHeld: 0, endedAt: T + 1_000, endedToken: "tok-1" },
  "force-released with no value": { ...base, state: "force-released", token: null, nodes: [node(0, null), node(1, null), node(2, null)], quorumHeld: 0, endedAt: T + 1_000, endedToken: null },
  "read last while its nodes are down": { ...base, unreadable: true, nodes: [node(0, "tok-1", false), node(1, "tok-1", false), node(2, "tok-1", false)] },
  "a foreign lock of one node, without TTL, never acquired as seen": {
    ...neverSeenAcquired,
    format: "redisson",
    redisType: "hash",
    scope: "single",
    holders: [{ id: "5b0d:1", thread: 1, count: 2 }],
    warnings: ["no-ttl"],
    token: "5b0d:1",
    holder: null,
    fence: null,
    nodes: [{ id: "node-0", up: true, token: "5b0d:1", pttlMs: null }],
    quorumHeld: 1,
    quorum: 1,
    expiresAt: null,
    ttlMs: null,
    contention: { attemptsPerMin: null, waiters: null, source: null },
  },
};

describe("a compact lock", () => {
  for (const [name, lock] of Object.entries(shapes)) {
    it(`stands for the same lock, field for field: ${name}`, () => {
      const sent = JSON.parse(JSON.stringify(compactLock(lock))) as CompactLock;
      expect(Array.isArray(sent)).toBe(true);
      expect(lockFromCompact(sent)).toStrictEqual(lock);
      expect(lockOf(sent)).toStrictEqual(lock);
      // A stream of whole locks is read as it comes.
      expect(lockOf(JSON.parse(JSON.stringify(lock)) as Lock)).toStrictEqual(lock);
    });
  }

  it("takes under 60 % of the bytes of a held lock of three nodes, and does not repeat the token its nodes hold", () => {
    const whole = JSON.stringify(base);
    const compact = JSON.stringify(compactLock(base));
    expect(compact.length).toBeLessThan(0.6 * whole.length);
    expect(compact.split('"tok-1"').length - 1).toBe(2); // its holder's id and its token
  });
});
