import { describe, expect, it } from "vitest";
import { decodeHolder, endReason, mergeSamples, transitions, voteHolders } from "@/lib/locks/merge";
import { missingNotifyFlags, mergedNotifyFlags } from "@/lib/locks/notify";
import { encodeLockValue } from "@lockscope/redlock";

const NOW = 1_700_000_000_000;
const up3 = [true, true, true];

describe("merging per-node samples into one lock", () => {
  it("is held when a quorum holds one value, until the quorum-th latest expiry", () => {
    const merged = mergeSamples({ up: up3, values: ["a", "a", "a"], expiries: [NOW + 900, NOW + 1_000, NOW + 1_100], quorum: 2 }, NOW);
    expect(merged).toEqual({ state: "held", token: "a", leading: "a", quorumHeld: 3, expiresAt: NOW + 1_000, unreadable: false });
  });

  it("is partial when no value has a quorum, until the last key goes", () => {
    const merged = mergeSamples({ up: up3, values: ["a", "b", null], expiries: [NOW + 500, NOW + 800, Number.NaN], quorum: 2 }, NOW);
    expect(merged.state).toBe("partial");
    expect(merged.token).toBeNull();
    expect(merged.quorumHeld).toBe(1);
    expect(merged.expiresAt).toBe(NOW + 800);
  });

  it("names no leading value for a split vote with no side ahead, whichever node holds which side", () => {
    const expiries = [NOW + 500, NOW + 800, Number.NaN];
    for (const values of [["a", "b", null], ["b", "a", null], [null, "b", "a"]]) {
      expect(mergeSamples({ up: up3, values, expiries, quorum: 2 }, NOW)).toMatchObject({ state: "partial", token: null, leading: null, quorumHeld: 1 });
    }
    // Five nodes split 2/2/1, in any order.
    const up5 = [true, true, true, true, true];
    const five = Array.from({ length: 5 }, () => NOW + 1_000);
    for (const values of [["a", "a", "b", "b", "c"], ["c", "b", "a", "b", "a"], ["b", "a", "c", "a", "b"]]) {
      expect(mergeSamples({ up: up5, values, expiries: five, quorum: 3 }, NOW)).toMatchObject({ state: "partial", leading: null, quorumHeld: 2 });
    }
    // A value ahead of the others leads, wherever it is.
    expect(mergeSamples({ up: up5, values: ["c", "b", "a", "b", null], expiries: five, quorum: 3 }, NOW)).toMatchObject({ state: "partial", leading: "b", quorumHeld: 2 });
    // The value the lock was shown with, one of those tied, goes on leading (its holder lost the quorum; another contends).
    expect(mergeSamples({ up: up3, values: ["b", "a", null], expiries, quorum: 2 }, NOW, { shown: "a" })).toMatchObject({ leading: "a", quorumHeld: 1 });
    expect(mergeSamples({ up: up3, values: ["b", "c", null], expiries, quorum: 2 }, NOW, { shown: "a" })).toMatchObject({ leading: null });
  });

  it("votes per holder for a set of holders: each with a quorum of its own holds, until its quorum-th latest expiry", () => {
    // A on nodes 0 and 1, B on 1 and 2, C on 2 only: no two nodes hold the same set.
    const samples = { up: up3, values: ["A", "A\nB", "B\nC"], expiries: [NOW + 1_000, NOW + 2_000, NOW + 3_000], quorum: 2 };
    expect(mergeSamples(samples, NOW).state).toBe("partial");
    // A's permit lasts while nodes 0 and 1 both have it (NOW + 1,000), B's while 1 and 2 do (NOW + 2,000).
    expect(voteHolders(samples, NOW)).toEqual({ state: "held", token: "A\nB", leading: "A\nB", quorumHeld: 2, expiresAt: NOW + 2_000, unreadable: false });
    expect(voteHolders(samples, NOW + 2_000)?.state).toBe("elapsed");
    // A node that cannot be read does not count; no holder with a quorum: none.
    expect(voteHolders({ ...samples, up: [true, false, true] }, NOW)).toBeNull();
  });

  it("counts nodes that are down as holding nothing: 2 of 3 still hold it", () => {
    const merged = mergeSamples({ up: [true, true, false], values: ["a", "a", "a"], expiries: [NOW + 1_000, NOW + 1_000, NOW + 1_000], quorum: 2 }, NOW);
    expect(merged).toMatchObject({ state: "held", quorumHeld: 2 });
    const lost = mergeSamples({ up: [true, false, false], values: ["a", "a", "a"], expiries: [NOW + 1_000, NOW + 1_000, NOW + 1_000], quorum: 2 }, NOW);
    expect(lost).toMatchObject({ state: "partial", quorumHeld: 1 });
  });

  it("keeps a lock whose only holders cannot be read as unreadable, with the last readings, not ended", () => {
    const single = mergeSamples({ up: [true, false, true], values: [null, "a", null], expiries: [Number.NaN, NOW + 1_000, Number.NaN], quorum: 2 }, NOW);
    expect(single).toEqual({ state: "partial", token: null, leading: "a", quorumHeld: 1, expiresAt: NOW + 1_000, unreadable: true });
    const quorum = mergeSamples({ up: [true, false, false], values: [null, "a", "a"], expiries: [Number.NaN, NOW + 1_000, NOW + 1_000], quorum: 2 }, NOW);
    expect(quorum).toMatchObject({ state: "held", token: "a", quorumHeld: 2, unreadable: true });
    // Some reachable node holds a value: that is current, and down nodes count as holding nothing.
    const current = mergeSamples({ up: [true, false, false], values: ["a", "a", "a"], expiries: [NOW + 1_000, NOW + 1_000, NOW + 1_000], quorum: 2 }, NOW);
    expect(current).toMatchObject({ state: "partial", unreadable: false });
  });

  it("ends a lock when a node was seen dropping it, whatever an unreachable node last held", () => {
    const merged = mergeSamples({ up: [true, true, false], values: [null, null, "a"], expiries: [Number.NaN, Number.NaN, NOW + 1_000], quorum: 2 }, NOW, { endSeen: true });
    expect(merged).toMatchObject({ state: null, unreadable: false });
  });

  it("does not end a lock that the unreachable nodes held on a quorum by themselves when one node drops it", () => {
    const samples = { up: [false, true, false], values: ["a", null, "a"], expiries: [NOW + 1_000, Number.NaN, NOW + 1_000], quorum: 2 };
    expect(mergeSamples(samples, NOW, { endSeen: true })).toMatchObject({ state: "held", token: "a", quorumHeld: 2, unreadable: true });
    // Already ended (released with every node read): what they keep does not bring it back.
    expect(mergeSamples(samples, NOW, { endSeen: true, ended: true })).toMatchObject({ state: null });
    // A quorum lock on one node only is not held by it: the end seen stands.
    expect(mergeSamples({ ...samples, values: ["a", null, null] }, NOW, { endSeen: true })).toMatchObject({ state: null });
  });

  it("is elapsed when the TTL ran out but the keys are still there", () => {
    const merged = mergeSamples({ up: up3, values: ["a", "a", "a"], expiries: [NOW - 10, NOW - 5, NOW - 1], quorum: 2 }, NOW);
    expect(merged.state).toBe("elapsed");
  });

  it("has no expiry for keys without a TTL", () => {
    const merged = mergeSamples({ up: up3, values: ["a", "a", null], expiries: [Infinity, Infinity, Number.NaN], quorum: 2 }, NOW);
    expect(merged).toMatchObject({ state: "held", expiresAt: null });
  });

  it("has no state when no reachable node holds anything", () => {
    expect(mergeSamples({ up: up3, values: [null, null, null], expiries: [Number.NaN, Number.NaN, Number.NaN], quorum: 2 }, NOW).state).toBeNull();
  });

  it("decodes engine values into holder and fence, and leaves foreign values raw", () => {
    const value = encodeLockValue({ label: "billing worker", host: "web-1", pid: 42, fence: "17", acquiredAt: NOW });
    expect(decodeHolder(value)).toEqual({ holder: { label: "billing worker", host: "web-1", pid: 42 }, fence: "17", acquiredAt: NOW });
    expect(decodeHolder("3f1c2a9e-node-redlock-value")).toEqual({ holder: null, fence: null, acquiredAt: null });
  });

  it("takes a ShedLock value's host and the time its task started as the holder and the acquisition time", () => {
    const started = Date.parse("2026-12-04T10:52:53.408Z");
    expect(decodeHolder("ADDED:2026-12-04T10:52:53.408Z@host-9")).toEqual({ holder: { host: "host-9" }, fence: null, acquiredAt: started });
    expect(decodeHolder("ADDED:2026-12-04T10:52:53.408Z@host-9:2f1e0c4a-9b3d-4c5e-8f7a-1b2c3d4e5f60")).toEqual({ holder: { host: "host-9" }, fence: null, acquiredAt: started });
    expect(decodeHolder("ADDED:not a time@host-9")).toEqual({ holder: { host: "host-9" }, fence: null, acquiredAt: null });
  });
});

describe("how a lock ended and what changed", () => {
  it("takes the notification's word, else judges by the TTL", () => {
    expect(endReason("del", NOW + 5_000, NOW)).toBe("released");
    expect(endReason("expired", NOW + 5_000, NOW)).toBe("expired");
    expect(endReason("evicted", NOW + 5_000, NOW)).toBe("evicted");
    expect(endReason("force-released", NOW - 5_000, NOW)).toBe("force-released");
    expect(endReason(null, NOW - 100, NOW)).toBe("expired");
    expect(endReason(null, NOW + 5_000, NOW)).toBe("released");
    expect(endReason(null, null, NOW)).toBe("released");
  });

  it("reports acquisition, extension, a change of hands and the end", () => {
    const held = { state: "held" as const, token: "a", leading: "a", expiresAt: NOW + 1_000 };
    expect(transitions(null, held)).toEqual([{ type: "acquired", token: "a", partial: false }]);
    expect(transitions(held, { ...held, expiresAt: NOW + 1_010 })).toEqual([]);
    expect(transitions(held, { ...held, expiresAt: NOW + 5_000 })).toEqual([{ type: "extended", token: "a", by: 4_000 }]);
    // A TTL given to a lock held without one, and taken away again.
    expect(transitions({ ...held, expiresAt: null }, { ...held, extensionSeen: false })).toEqual([{ type: "ttl-set", token: "a" }]);
    expect(transitions(held, { ...held, expiresAt: null })).toEqual([{ type: "extended", token: "a", by: Infinity }]);
    // A change of hands with no free moment seen in between (a release that hands the lock over): one lock
    // ended and another began.
    expect(transitions(held, { ...held, token: "b", leading: "b" })).toEqual([{ type: "replaced" }, { type: "acquired", token: "b", partial: false }]);
    expect(transitions(held, { state: null, token: null, leading: null, expiresAt: null })).toEqual([{ type: "ended" }]);
    expect(transitions(held, { ...held, state: "elapsed" })).toEqual([{ type: "elapsed" }]);
  });

  it("does not count a fenced acquisition's rewrite (same value id, fence added) as a second acquisition", () => {
    const first = encodeLockValue({ label: "w", host: "h", pid: 1, fence: null, acquiredAt: NOW });
    const fenced = first.replace(/^(lk1:[^:]+:[^:]+:[^:]*:)/, "$17");
    expect(decodeHolder(fenced).fence).toBe("7");
    const held = { state: "held" as const, token: first, leading: first, expiresAt: NOW + 1_000 };
    expect(transitions(held, { ...held, token: fenced, leading: fenced })).toEqual([]);
    const other = encodeLockValue({ label: "w", host: "h", pid: 1, fence: "7", acquiredAt: NOW });
    expect(transitions(held, { ...held, token: other, leading: other })).toEqual([{ type: "replaced" }, { type: "acquired", token: other, partial: false }]);
  });

  it("does not count a partial write completing as a second acquisition", () => {
    const partial = { state: "partial" as const, token: null, leading: "a", expiresAt: NOW + 1_000 };
    expect(transitions(null, partial)).toEqual([{ type: "acquired", token: "a", partial: true }]);
    // (The timeline says the quorum was reached; no second acquisition.)
    expect(transitions(partial, { state: "held", token: "a", leading: "a", expiresAt: NOW + 1_000 })).toEqual([{ type: "quorum" }]);
  });
});

describe("keyspace notification flags", () => {
  it("adds only what is missing and keeps the node's own flags", () => {
    // Strings ($), Redisson's hashes (h) and redis-semaphore's sorted sets (z), besides K g x e.
    expect(missingNotifyFlags("")).toBe("Kgxe$zh");
    expect(missingNotifyFlags("Kg$xe")).toBe("zh");
    expect(missingNotifyFlags("KEA")).toBe("");
    expect(missingNotifyFlags("EA")).toBe("K");
    expect(missingNotifyFlags("Kx")).toBe("ge$zh");
    expect(mergedNotifyFlags("Elh")).toBe("ElhKgxe$z");
  });
});
