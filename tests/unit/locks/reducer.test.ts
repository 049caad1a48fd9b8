import { describe, expect, it } from "vitest";
import type { FormatReading } from "@/lib/locks/formats";
import { keptView } from "@/lib/locks/formats/view";
import {
  adoptFirstSeen,
  ALREADY_HELD,
  FORCE_HINT_MS,
  forceHintApplies,
  forceReleaseNoted,
  newLockStep,
  PROBE_AFTER_MS,
  probeAgainAt,
  readSamples,
  reduceLock,
  SETTLE_MS,
  type ForceHint,
  type LockContext,
  type LockEffect,
  LockRecord,
  type LockStep,
  type NodeSample,
} from "@/lib/locks/reducer";
import { encodeLockValue, lockValueId } from "@lockscope/redlock";

const T = 1_800_000_000_000;

/** A lock never counted yet, on three nodes (as the store makes one: every field empty). */
function fresh(timeline: LockRecord["timeline"] = []): LockRecord {
  return new LockRecord("lock:a", 3, timeline);
}

/** Three nodes, all counted, quorum 2; the keys are declared quorum locks unless a case says otherwise. */
function context(overrides: Partial<LockContext> = {}): LockContext {
  return { counted: [true, true, true], quorum: 2, nodes: 3, watching: true, declaredScope: () => "quorum", ...overrides };
}

const held = (node: number, value: string, expiry: number, cause: NodeSample["cause"] = null): NodeSample => ({ node, value, expiry, cause });
const gone = (node: number, cause: NodeSample["cause"] = "del"): NodeSample => ({ node, value: null, expiry: Number.NaN, cause });
const all = (value: string, expiry: number, cause: NodeSample["cause"] = null) => [0, 1, 2].map((node) => held(node, value, expiry, cause));
const allGone = (cause: NodeSample["cause"] = "del") => [0, 1, 2].map((node) => gone(node, cause));

/** Folds the samples in and steps the lock once, as the store does for new readings. */
function step(lock: LockRecord, samples: NodeSample[], now: number, options: { context?: LockContext; hint?: ForceHint | null } = {}) {
  const visible = readSamples(lock, samples, now);
  return reduceLock(lock, options.context ?? context(), options.hint ?? null, now, visible, newLockStep());
}

/** A lock held with `value` on every node since T. */
function heldLock(value = "v", expiry = T + 10_000): LockRecord {
  const lock = fresh();
  step(lock, all(value, expiry), T);
  return lock;
}

const timeline = (effects: LockEffect[]) => effects.flatMap((e) => (e.type === "timeline" ? [[e.item.type, e.item.detail ?? "", e.token]] : []));
const events = (effects: LockEffect[]) => effects.flatMap((e) => (e.type === "lock-event" ? [e.event] : []));
const counted = (effects: LockEffect[]) => effects.flatMap((e) => (e.type === "count" ? [e.counter] : []));

describe("a lock's step: acquisition", () => {
  it("acquires a foreign value held by a quorum: timeline, event, count, first sighting, holder, timer at its expiry", () => {
    const lock = fresh();
    const out = step(lock, all("v", T + 10_000), T);
    expect(out).toMatchObject({ outcome: "live", changed: true, wakeAt: T + 10_000, forceHintTaken: false });
    expect(lock).toMatchObject({ state: "held", token: "v", leading: "v", quorumHeld: 3, expiresAt: T + 10_000, acquiredAt: T, ttlMs: 10_000, scope: "quorum" });
    expect(timeline(out.effects)).toEqual([["acquired", "by a foreign client, on 3 of 3 nodes", "v"]]);
    expect(events(out.effects)).toEqual(["acquired"]);
    expect(counted(out.effects)).toEqual(["acquisitions"]);
    expect(out.effects).toContainEqual({ type: "first-seen", token: "v", seenAt: T, ttlMs: 10_000 });
    expect(out.effects).toContainEqual({ type: "holder", id: null });
  });

  it("takes an engine value's holder, fence and acquisition time from the value, with no first sighting", () => {
    const value = encodeLockValue({ label: "billing", host: "web-1", pid: 7, fence: "12", acquiredAt: T - 500 });
    const lock = fresh();
    const out = step(lock, all(value, T + 10_000), T);
    expect(lock.acquiredAt).toBe(T - 500);
    expect(timeline(out.effects)).toEqual([["acquired", "by billing, on 3 of 3 nodes, fence 12", value]]);
    expect(out.effects.some((e) => e.type === "first-seen")).toBe(false);
    expect(out.effects).toContainEqual({ type: "holder", id: lockValueId(value) });
  });

  it("records a lock found by the first reconcile in the history only, as already held, and counts no acquisition", () => {
    const lock = fresh(null);
    const out = step(lock, all("v", T + 10_000), T, { context: context({ watching: false }) });
    expect(lock.state).toBe("held");
    expect(timeline(out.effects)).toEqual([]);
    expect(out.effects).toContainEqual({ type: "history", item: { at: T, type: "acquired", detail: ALREADY_HELD }, token: "v" });
    expect(events(out.effects)).toEqual([]);
    expect(counted(out.effects)).toEqual([]);
  });

  it("drops a key never seen held", () => {
    const lock = fresh();
    expect(step(lock, allGone(null), T).outcome).toBe("never-held");
    expect(lock.state).toBeNull();
  });
});

describe("a lock's step: extension", () => {
  it("extends only when a node's own TTL end moved, not when the quorum's moved as more nodes were read", () => {
    const lock = fresh();
    // Each node's reading comes at its own moment: their TTL ends disagree by a few hundred ms.
    step(lock, [held(0, "v", T + 60_250), held(1, "v", T + 60_000)], T);
    reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
    expect(lock).toMatchObject({ state: "held", expiresAt: T + 60_000 });
    // Node 2's reading comes later and moves the quorum's TTL end: no node's own end moved.
    const more = step(lock, [held(2, "v", T + 60_400)], T + 40);
    expect(lock.expiresAt).toBe(T + 60_250);
    expect(events(more.effects)).toEqual([]);
    const extended = step(lock, all("v", T + 90_000), T + 200);
    expect(timeline(extended.effects)).toEqual([["extended", "by 29.8 s", "v"]]);
    expect(events(extended.effects)).toEqual(["extended"]);
    expect(extended.effects).toContainEqual({ type: "first-seen", token: "v", seenAt: T + 200, ttlMs: 89_800 });
    expect(lock.ttlMs).toBe(89_800);
  });

  it("does not call a TTL end moved by the node's clock (its offset moved since) an extension", () => {
    const lock = heldLock();
    // 89 ms later than before, read after the clock's offset moved by 89 ms: nothing changed on the node.
    const moved = step(lock, [0, 1, 2].map((n) => ({ ...held(n, "v", T + 10_089), slack: 50 + 89 })), T + 100);
    expect(events(moved.effects)).toEqual([]);
    // Without that move it would be one.
    const other = heldLock();
    expect(events(step(other, all("v", T + 10_089), T + 100).effects)).toEqual(["extended"]);
  });

  it("does not call a re-read of the same TTL end (a few ms off) an extension", () => {
    const lock = heldLock();
    const out = step(lock, all("v", T + 10_010), T + 100);
    expect(out.effects).toEqual([]);
    expect(out.changed).toBe(false);
  });

  it("calls a TTL removed (PERSIST) an extension without end", () => {
    const lock = heldLock();
    const out = step(lock, all("v", Infinity), T + 100);
    expect(timeline(out.effects)).toEqual([["extended", "TTL removed", "v"]]);
    expect(lock.expiresAt).toBeNull();
    expect(out.wakeAt).toBeNaN();
  });
});

describe("a lock's step: change of hands", () => {
  it("says so when a hold's value comes back after it ended (a failover to a replica that had not copied the release), not a new holder's acquisition", () => {
    const lock = heldLock("v", T + 60_000);
    step(lock, allGone("del"), T + 1_000);
    expect(lock.state).toBe("released");
    const back = step(lock, all("v", T + 60_000), T + 3_500);
    expect(timeline(back.effects)).toEqual([
      [
        "acquired",
        "by a foreign client, on 3 of 3 nodes; the same value as the hold released 2.5 s before: its holder took it again, or a node served an older copy (a failover to a replica that had not copied the end, a restart from an older file)",
        "v",
      ],
    ]);
    // Another value after that end is a new holder's, said plainly.
    step(lock, allGone("del"), T + 4_000);
    expect(timeline(step(lock, all("w", T + 60_000), T + 4_500).effects)).toEqual([["acquired", "by a foreign client, on 3 of 3 nodes", "w"]]);
  });

  it("counts a hand-over (del, then the next holder's value) as the old value released and the new one acquired", () => {
    const lock = heldLock("v");
    const out = step(lock, all("w", T + 20_000, "del"), T + 50);
    expect(timeline(out.effects)).toEqual([
      ["released", "handed straight to the next holder", "v"],
      ["acquired", "by a foreign client, on 3 of 3 nodes", "w"],
    ]);
    expect(events(out.effects)).toEqual(["released", "acquired"]);
    expect(lock).toMatchObject({ state: "held", token: "w", acquiredAt: T + 50, cause: null, endedAt: null });
  });

  it("ends a held lock whose value is gone everywhere when another value is left on fewer nodes than a quorum, and says that one's acquisition", () => {
    const lock = heldLock("v");
    // v is released on every node; another client's w is on node 0 only (it took no other node).
    step(lock, [held(0, "w", T + 30_000, "del"), gone(1), gone(2)], T + 1_000);
    const out = reduceLock(lock, context(), null, T + 1_000 + SETTLE_MS, false, newLockStep());
    expect(timeline(out.effects)).toEqual([
      ["released", "handed straight to the next holder", "v"],
      ["acquired", "by a foreign client, on 1 of 3 nodes (no quorum)", "w"],
    ]);
    expect(events(out.effects)).toEqual(["released", "acquired"]);
    expect(lock).toMatchObject({ state: "partial", token: null, leading: "w", acquiredAt: T + 1_000 + SETTLE_MS });
    // w takes a quorum: the same lock goes on.
    step(lock, [held(1, "w", T + 30_000)], T + 2_000);
    const more = reduceLock(lock, context(), null, T + 2_000 + SETTLE_MS, false, newLockStep());
    expect(timeline(more.effects).map(([type]) => type)).toEqual(["quorum"]);
    expect(lock).toMatchObject({ state: "held", token: "w", acquiredAt: T + 1_000 + SETTLE_MS });
  });

  it("says no hand-over when a held lock is released and a value another client left on one node before stays", () => {
    const lock = fresh();
    // v on nodes 0 and 1; a contender's value on node 2 since before (it took no other node).
    step(lock, [held(0, "v", T + 60_000), held(1, "v", T + 60_000), held(2, "s", T + 2_000)], T);
    reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
    expect(lock).toMatchObject({ state: "held", token: "v" });
    step(lock, [gone(0, "del"), gone(1, "del")], T + 1_000);
    const out = reduceLock(lock, context(), null, T + 1_000 + SETTLE_MS, false, newLockStep());
    expect(timeline(out.effects)).toEqual([
      ["released", "", "v"],
      ["acquired", "by a foreign client, on 1 of 3 nodes (no quorum)", "s"],
    ]);
  });

  it("ends a partial lock whose value is gone everywhere when another value replaces it, held or not", () => {
    const lock = heldLock("v");
    // A release that reached two of three nodes: v is left on node 0 alone.
    step(lock, [gone(1), gone(2)], T + 1_000);
    reduceLock(lock, context(), null, T + 1_000 + SETTLE_MS, false, newLockStep());
    expect(lock).toMatchObject({ state: "partial", leading: "v" });
    // On node 0, v is deleted and another client's w written within one read.
    step(lock, [held(0, "w", T + 30_000, "del")], T + 2_000);
    const out = reduceLock(lock, context(), null, T + 2_000 + SETTLE_MS, false, newLockStep());
    expect(timeline(out.effects).map(([type, , token]) => [type, token])).toEqual([
      ["released", "v"],
      ["acquired", "w"],
    ]);
    expect(lock).toMatchObject({ state: "partial", leading: "w", acquiredAt: T + 2_000 + SETTLE_MS });
    // Partial w, gone everywhere, replaced by x on a quorum: w ended, x acquired.
    const taken = step(lock, all("x", T + 40_000, "del"), T + 3_000);
    expect(timeline(taken.effects).map(([type, , token]) => [type, token])).toEqual([
      ["released", "w"],
      ["acquired", "x"],
    ]);
    expect(lock).toMatchObject({ state: "held", token: "x", acquiredAt: T + 3_000 });
  });

  it("ends a partial lock whose last copy goes as another value arrives on another node in the same read, and says that one's acquisition", () => {
    const lock = heldLock("v");
    // A release that reached two of three nodes: v is left on node 0 alone.
    step(lock, [gone(1), gone(2)], T + 1_000);
    reduceLock(lock, context(), null, T + 1_000 + SETTLE_MS, false, newLockStep());
    expect(lock).toMatchObject({ state: "partial", leading: "v" });
    // v's last copy is deleted on node 0 while another client takes node 1, both before the next read.
    step(lock, [gone(0, "del"), held(1, "w", T + 30_000, null)], T + 2_000);
    const out = reduceLock(lock, context(), null, T + 2_000 + SETTLE_MS, false, newLockStep());
    expect(timeline(out.effects).map(([type, , token]) => [type, token])).toEqual([
      ["released", "v"],
      ["acquired", "w"],
    ]);
    expect(lock).toMatchObject({ state: "partial", leading: "w", acquiredAt: T + 2_000 + SETTLE_MS });
  });

  it("keeps a held lock whose value some node still holds going as partial when another value leads the vote", () => {
    const lock = heldLock("v");
    step(lock, [held(0, "w", T + 30_000, "del"), gone(2)], T + 1_000);
    const out = reduceLock(lock, context(), null, T + 1_000 + SETTLE_MS, false, newLockStep());
    expect(timeline(out.effects).map(([type]) => type)).toEqual(["partial"]);
  });

  it("ends a lock on one node whose key was deleted and written again with the same value within one read, and counts the new one", () => {
    const one = context({ counted: [true], quorum: 1, nodes: 1 });
    const lock = new LockRecord("lock:a", 1, []);
    step(lock, [held(0, "1", T + 10_000)], T, { context: one });
    const out = step(lock, [held(0, "1", T + 15_000, "del")], T + 5_000, { context: one });
    expect(timeline(out.effects)).toEqual([
      ["released", "handed straight to the next holder", "1"],
      ["acquired", "by a foreign client, on 1 of 1 nodes", "1"],
    ]);
    expect(events(out.effects)).toEqual(["released", "acquired"]);
    expect(counted(out.effects)).toEqual(["acquisitions"]);
    expect(out.effects).toContainEqual({ type: "first-seen", token: "1", seenAt: T + 5_000, ttlMs: 10_000, notBefore: T + 5_000 });
    expect(lock).toMatchObject({ state: "held", token: "1", acquiredAt: T + 5_000, ttlMs: 10_000, cause: null });
    // Written again (an extension by SET XX), no end in between: an extension, as before.
    const extended = step(lock, [held(0, "1", T + 20_000)], T + 6_000, { context: one });
    expect(timeline(extended.effects).map(([type]) => type)).toEqual(["extended"]);
    // Expired and taken again with the same value: expired, then acquired.
    const again = step(lock, [held(0, "1", T + 40_000, "expired")], T + 20_010, { context: one });
    expect(timeline(again.effects).map(([type]) => type)).toEqual(["expired", "acquired"]);
    // Deleted on one Redis Cluster primary and found on another with its TTL end (its slot moved): the same lock.
    const moved = step(lock, [held(0, "1", T + 40_000, "del")], T + 21_000, { context: one });
    expect(moved.effects).toEqual([]);
    expect(lock).toMatchObject({ state: "held", acquiredAt: T + 20_010 });
  });

  it("ends a Redlock whose keys were deleted and written again with the same value on a quorum within one read, and counts the new one", () => {
    const lock = heldLock("1", T + 10_000);
    const out = step(lock, all("1", T + 15_000, "del"), T + 5_000);
    expect(timeline(out.effects)).toEqual([
      ["released", "handed straight to the next holder", "1"],
      ["acquired", "by a foreign client, on 3 of 3 nodes", "1"],
    ]);
    expect(events(out.effects)).toEqual(["released", "acquired"]);
    expect(counted(out.effects)).toEqual(["acquisitions"]);
    expect(out.effects).toContainEqual({ type: "first-seen", token: "1", seenAt: T + 5_000, ttlMs: 10_000, notBefore: T + 5_000 });
    expect(lock).toMatchObject({ state: "held", token: "1", acquiredAt: T + 5_000, ttlMs: 10_000, cause: null });
    // Expired and taken again with the same value, one node's notification not yet in when it was read (its TTL end
    // moved, no cause): expired, then acquired.
    const again = step(lock, [held(0, "1", T + 40_000, "expired"), held(1, "1", T + 40_000, "expired"), held(2, "1", T + 40_000)], T + 15_010);
    expect(timeline(again.effects).map(([type]) => type)).toEqual(["expired", "acquired"]);
    expect(lock.acquiredAt).toBe(T + 15_010);
    // That node's late notification, its reading the same as before: nothing more.
    expect(step(lock, [held(2, "1", T + 40_000, "expired")], T + 15_020).effects).toEqual([]);
    // Extended on every node (no end in between): an extension, as before.
    const extended = step(lock, all("1", T + 50_000), T + 16_000);
    expect(timeline(extended.effects).map(([type]) => type)).toEqual(["extended"]);
  });

  it("ends a Redlock deleted and written again with the same value node by node, each node in a read of its own, and counts the new one", () => {
    // The next worker's DEL and SET reach the nodes one after another, a millisecond or two apart (remote nodes): the
    // console reads the key at each node's notification, so each node's write comes in a read batch of its own.
    const lock = heldLock("1", T + 10_000);
    const out = [0, 1, 2].map((node) => step(lock, [held(node, "1", T + 15_000 + node, "del")], T + 5_000 + 2 * node));
    out.push(reduceLock(lock, context(), null, T + 5_004 + SETTLE_MS, false, newLockStep()));
    const effects = out.flatMap((o) => o.effects);
    expect(timeline(effects)).toEqual([
      ["released", "handed straight to the next holder", "1"],
      ["acquired", "by a foreign client, on 3 of 3 nodes", "1"],
    ]);
    expect(counted(effects)).toEqual(["acquisitions"]);
    expect(lock).toMatchObject({ state: "held", token: "1", cause: null });
    expect(lock.acquiredAt).toBeGreaterThanOrEqual(T + 5_000);
  });

  it("extends a Redlock whose holder extended it on a quorum as one node's copy expired, in the same read", () => {
    const lock = heldLock("v", T + 10_000);
    const out = step(lock, [gone(0, "expired"), held(1, "v", T + 20_000), held(2, "v", T + 20_000)], T + 9_990);
    const settled = reduceLock(lock, context(), null, T + 9_990 + SETTLE_MS, false, newLockStep());
    expect([...timeline(out.effects), ...timeline(settled.effects)].map(([type]) => type)).toEqual(["extended"]);
    expect(lock).toMatchObject({ state: "held", token: "v", acquiredAt: T });
  });

  it("keeps a Redlock going when one node's copy alone was deleted and written again with its value", () => {
    const lock = heldLock("1", T + 10_000);
    // (The rest of a write to every node is waited for a moment: none comes.)
    const out = [step(lock, [held(0, "1", T + 15_000, "del")], T + 5_000), reduceLock(lock, context(), null, T + 5_000 + SETTLE_MS, false, newLockStep())];
    expect(out.flatMap((o) => timeline(o.effects))).toEqual([]);
    expect(lock).toMatchObject({ state: "held", token: "1", acquiredAt: T, cause: null });
  });

  it("counts a lock that expired and was taken within one read as expired", () => {
    const lock = heldLock("v", T + 1_000);
    const out = step(lock, all("w", T + 11_000, "expired"), T + 1_002);
    expect(timeline(out.effects).map(([type, detail]) => [type, detail])).toEqual([
      ["expired", "the next holder took it at once"],
      ["acquired", "by a foreign client, on 3 of 3 nodes"],
    ]);
    expect(counted(out.effects)).toEqual(["expirations", "acquisitions"]);
  });

  it("does not pass a late node's hand-over cause on to the lock that followed", () => {
    const lock = heldLock("x");
    step(lock, [held(0, "w", T + 1_000, "del"), held(1, "w", T + 1_000, "del")], T + 5);
    step(lock, [], T + 5 + SETTLE_MS);
    expect(lock.token).toBe("w");
    readSamples(lock, [held(2, "w", T + 1_000, "del")]);
    expect(lock.cause).toBeNull();
    // w's keys are found gone after its expiry, with no notification: it expired, it was not released.
    step(lock, allGone(null), T + 1_500);
    expect(lock.state).toBe("expired");
  });
});

describe("a lock's step: partial, elapsed, settling, unreadable", () => {
  it("holds back a view where the nodes disagree for SETTLE_MS, then counts it", () => {
    const lock = heldLock();
    const waiting = step(lock, [gone(0), gone(1)], T + 100);
    expect(waiting.outcome).toBe("settling");
    expect(lock).toMatchObject({ state: "held", settleUntil: T + 100 + SETTLE_MS });
    const settled = reduceLock(lock, context(), null, T + 100 + SETTLE_MS, false, newLockStep());
    expect(settled.outcome).toBe("live");
    expect(timeline(settled.effects)).toEqual([["partial", "no value on a quorum: 1 of 3 nodes hold the most common one", "v"]]);
    expect(lock).toMatchObject({ state: "partial", token: null, leading: "v", quorumHeld: 1 });
  });

  it("holds back a release caught half-way on a lock held on two of three nodes, as on three", () => {
    const lock = fresh();
    step(lock, [held(0, "v", T + 10_000), held(1, "v", T + 10_000), gone(2, null)], T);
    reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
    expect(lock).toMatchObject({ state: "held", quorumHeld: 2 });
    // Its holder's delete reached node 0, not node 1 yet, when the nodes were read.
    const half = step(lock, [gone(0)], T + 1_000);
    expect(half.outcome).toBe("settling");
    expect(lock).toMatchObject({ state: "held", quorumHeld: 2 });
    const done = step(lock, [gone(1)], T + 1_010);
    expect(timeline(done.effects).map(([type]) => type)).toEqual(["released"]);
    expect(lock.state).toBe("released");
  });

  it("holds back a hand-over caught half-way on a lock held on two of three nodes: the old value released, the new acquired", () => {
    const lock = fresh();
    step(lock, [held(0, "v", T + 10_000), held(1, "v", T + 10_000), gone(2, null)], T);
    reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
    // Node 0 handed over to w; node 1 not yet.
    const half = step(lock, [held(0, "w", T + 20_000, "del")], T + 1_000);
    expect(half.outcome).toBe("settling");
    step(lock, [held(1, "w", T + 20_000, "del")], T + 1_010);
    const done = reduceLock(lock, context(), null, T + 1_000 + SETTLE_MS, false, newLockStep());
    expect(timeline(done.effects)).toEqual([
      ["released", "handed straight to the next holder", "v"],
      ["acquired", "by a foreign client, on 2 of 3 nodes", "w"],
    ]);
    expect(lock).toMatchObject({ state: "held", token: "w", acquiredAt: T + 1_000 + SETTLE_MS });
  });

  it("does not draw out a wait already running with more changes", () => {
    const lock = heldLock();
    expect(step(lock, [gone(0)], T + 100).outcome).toBe("settling");
    expect(step(lock, [held(0, "w", T + 20_000)], T + 110).outcome).toBe("settling");
    expect(lock.settleUntil).toBe(T + 100 + SETTLE_MS);
  });

  it("says when a lock first seen without a quorum is acquired", () => {
    const lock = fresh();
    step(lock, [held(0, "v", T + 10_000), gone(1, null), gone(2, null)], T);
    const out = reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
    expect(timeline(out.effects)).toEqual([["acquired", "by a foreign client, on 1 of 3 nodes (no quorum)", "v"]]);
    expect(lock.state).toBe("partial");
  });

  it("marks a lock whose TTL ran out while its keys remain as elapsed, and probes it a while later", () => {
    const lock = heldLock("v", T + 500);
    expect(probeAgainAt(lock, T + 600)).toBeNaN();
    const out = reduceLock(lock, context(), null, T + 600, false, newLockStep());
    expect(timeline(out.effects)).toEqual([["elapsed", "TTL ran out; Redis has not reclaimed the key yet", "v"]]);
    expect(out.wakeAt).toBe(T + 500 + PROBE_AFTER_MS);
    expect(probeAgainAt(lock, T + 500 + PROBE_AFTER_MS)).toBe(T + 500 + 2 * PROBE_AFTER_MS);
  });

  it("keeps a Redlock whose TTL ran out elapsed while its nodes reclaim its keys one by one, not partial, then expired", () => {
    for (const wheelFirst of [true, false]) {
      const lock = heldLock("v", T + 1_000);
      const out: LockStep[] = [];
      // The expiry timer fires at the TTL's end, or Redis's own expiry cycle comes first on a node.
      if (wheelFirst) out.push(reduceLock(lock, context(), null, T + 1_000, false, newLockStep()));
      // Each node reclaims its copy in its own expiry cycle, further apart than the wait for the nodes to agree.
      for (const [node, at] of [
        [0, T + 1_005],
        [1, T + 1_070],
      ] as const) {
        out.push(step(lock, [gone(node, "expired")], at), reduceLock(lock, context(), null, at + SETTLE_MS, false, newLockStep()));
        expect([wheelFirst, node, lock.state, lock.token]).toEqual([wheelFirst, node, "elapsed", "v"]);
      }
      expect(lock).toMatchObject({ quorumHeld: 1, expiresAt: T + 1_000 });
      out.push(step(lock, [gone(2, "expired")], T + 1_150));
      expect(lock.state).toBe("expired");
      expect(out.flatMap((o) => timeline(o.effects)).map(([type]) => type)).toEqual(["elapsed", "expired"]);
    }
    // A copy left with a TTL of its own still running (written again there), or with none: partial, as before.
    const stuck = heldLock("v", T + 1_000);
    step(stuck, [gone(0, "expired"), gone(1, "expired"), held(2, "v", Number.POSITIVE_INFINITY)], T + 1_010);
    reduceLock(stuck, context(), null, T + 1_010 + SETTLE_MS, false, newLockStep());
    expect(stuck.state).toBe("partial");
  });

  it("says that a lock whose expiry time is in its value (the SETNX pattern) is taken over, not reclaimed by Redis", () => {
    const expiry = T + 2_000;
    const value = String(expiry / 1000);
    const lock = heldLock(value, expiry);
    const out = reduceLock(lock, context(), null, expiry + 100, false, newLockStep());
    expect(timeline(out.effects)).toEqual([
      ["elapsed", "the expiry time in its value has passed; a client that wants the lock takes it over (a key without a TTL stays until then, or until force-released)", value],
    ]);
  });

  it("reads a SETNX-pattern lock left after the expiry time in its value less and less often, not every second for ever", () => {
    // A key without a TTL: no read removes it, only a client taking it over (or a force release).
    const expiry = T + 2_000;
    const value = String(expiry / 1000);
    const lock = heldLock(value, expiry);
    reduceLock(lock, context(), null, expiry + 100, false, newLockStep());
    expect(lock.state).toBe("elapsed");
    // Read once a second after, as a key whose TTL ran out is (the read itself would remove that one).
    expect(probeAgainAt(lock, expiry + PROBE_AFTER_MS)).toBe(expiry + 2 * PROBE_AFTER_MS);
    // Then as long again as it has been elapsed, up to once a minute.
    expect(probeAgainAt(lock, expiry + 10_000)).toBe(expiry + 20_000);
    expect(probeAgainAt(lock, expiry + 3_600_000)).toBe(expiry + 3_600_000 + 60_000);
  });

  it("reads a partial lock whose last key's TTL ran out a while later, once a second, as an elapsed one", () => {
    const lock = fresh();
    step(lock, [held(0, "v", T + 500), gone(1, null), gone(2, null)], T);
    reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
    const out = reduceLock(lock, context(), null, T + 600, false, newLockStep());
    expect(lock).toMatchObject({ state: "partial", expiresAt: T + 500 });
    expect(out.wakeAt).toBe(T + 500 + PROBE_AFTER_MS);
    expect(probeAgainAt(lock, T + 500 + PROBE_AFTER_MS)).toBe(T + 500 + 2 * PROBE_AFTER_MS);
  });

  it("sets no timer for a partial lock past its TTL while no node holding it can be read: only a node back changes it", () => {
    const lock = fresh();
    step(lock, [held(0, "v", T + 500), held(1, "w", T + 400), gone(2, null)], T);
    reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
    const down = reduceLock(lock, context({ counted: [false, false, false] }), null, T + 1_000, true, newLockStep());
    expect(lock).toMatchObject({ state: "partial", unreadable: true, expiresAt: T + 500 });
    expect(down.wakeAt).toBeNaN();
    expect(probeAgainAt(lock, T + 60_000)).toBeNaN();
  });

  it("keeps a lock whose nodes cannot be read as unreadable, neither ended nor changed in state", () => {
    const lock = heldLock();
    const out = reduceLock(lock, context({ counted: [false, false, false] }), null, T + 100, false, newLockStep());
    expect(out).toMatchObject({ outcome: "live", changed: true });
    expect(lock).toMatchObject({ state: "held", unreadable: true });
    expect(out.effects).toEqual([]);
  });

  it("counts every node while the console starts, and only the nodes up once it watches", () => {
    const lock = fresh(null);
    const starting = context({ watching: false, counted: [true, true, true] });
    step(lock, [held(1, "v", T + 30_000)], T, { context: starting });
    step(lock, [held(2, "v", T + 30_000)], T + 1, { context: starting });
    reduceLock(lock, starting, null, T + 1 + SETTLE_MS, false, newLockStep());
    expect(lock).toMatchObject({ state: "held", quorumHeld: 2 });
    const watching = reduceLock(lock, context({ counted: [true, false, true] }), null, T + 100, true, newLockStep());
    expect(lock).toMatchObject({ state: "partial", quorumHeld: 1 });
    expect(timeline(watching.effects).map(([type]) => type)).toEqual(["partial"]);
  });
});

describe("a lock's step: the end", () => {
  it("acquires nothing when a node that did not answer as the lock ended answers again with its value; another value there is a new lock", () => {
    const lock = heldLock("v");
    // Its holder deletes it on the two nodes that answer, node 1 being down: it ends there.
    step(lock, [gone(0), gone(2)], T + 100, { context: context({ counted: [true, false, true] }) });
    expect(lock.state).toBe("released");
    // Node 1 answers again, still with the value its holder's delete never reached: what is left of that lock.
    const back = [step(lock, [held(1, "v", T + 10_000)], T + 200), reduceLock(lock, context(), null, T + 200 + SETTLE_MS, false, newLockStep())];
    expect(lock).toMatchObject({ state: "released", endedToken: "v" });
    expect(back.flatMap((out) => [...timeline(out.effects), ...events(out.effects), ...counted(out.effects)])).toEqual([]);
    // Node 1 is read with another value: that one is a lock of its own.
    const next = [step(lock, [held(1, "w", T + 20_000)], T + 300), reduceLock(lock, context(), null, T + 300 + SETTLE_MS, false, newLockStep())];
    expect(lock).toMatchObject({ state: "partial", leading: "w" });
    expect(next.flatMap((out) => timeline(out.effects)).map(([type, detail]) => `${type} ${detail}`)).toEqual(["acquired by a foreign client, on 1 of 3 nodes (no quorum)"]);
  });

  const endedBy = (cause: NodeSample["cause"], at = T + 100, expiry = T + 10_000) => {
    const lock = heldLock("v", expiry);
    const out = step(lock, allGone(cause), at);
    return { lock, out };
  };

  it("ends as released on a deletion", () => {
    const { lock, out } = endedBy("del");
    expect(out).toMatchObject({ outcome: "ended", changed: true });
    expect(lock).toMatchObject({ state: "released", token: null, leading: null, quorumHeld: 0, endedAt: T + 100, endedToken: "v" });
    expect(timeline(out.effects)).toEqual([["released", "", "v"]]);
    expect(events(out.effects)).toEqual(["released"]);
    expect(counted(out.effects)).toEqual([]);
  });

  it("ends as expired on an expiry notification, counted", () => {
    const { lock, out } = endedBy("expired");
    expect(lock.state).toBe("expired");
    expect(events(out.effects)).toEqual(["expired"]);
    expect(counted(out.effects)).toEqual(["expirations"]);
  });

  it("ends an evicted lock as expired, saying it was evicted", () => {
    const { lock, out } = endedBy("evicted");
    expect(lock.state).toBe("expired");
    expect(timeline(out.effects)).toEqual([["evicted", "evicted under memory pressure (maxmemory)", "v"]]);
    expect(events(out.effects)).toEqual(["evicted"]);
    expect(counted(out.effects)).toEqual(["expirations"]);
  });

  it("judges by the TTL without a notification", () => {
    expect(endedBy(null, T + 2_000, T + 1_000).lock.state).toBe("expired");
    expect(endedBy(null, T + 100, T + 1_000).lock.state).toBe("released");
  });

  it("judges by the TTL a lock that went on after one node's copy was deleted, its last keys then read gone after their expiry", () => {
    const lock = heldLock("v", T + 1_000);
    // A release that reached node 0 only (its holder stopped there): held on nodes 1 and 2.
    step(lock, [gone(0, "del")], T + 100);
    reduceLock(lock, context(), null, T + 100 + SETTLE_MS, false, newLockStep());
    expect(lock).toMatchObject({ state: "held", quorumHeld: 2 });
    // The TTL runs out; Redis has not reclaimed the keys; the probe a second later reads them gone, no notification yet.
    reduceLock(lock, context(), null, T + 1_000, false, newLockStep());
    expect(lock.state).toBe("elapsed");
    const out = step(lock, [gone(1, null), gone(2, null)], T + 2_000);
    expect(lock.state).toBe("expired");
    expect(counted(out.effects)).toEqual(["expirations"]);
  });

  it("ends as force-released, in the operator's words, when a force-release of this value was noted", () => {
    const lock = heldLock("v");
    const out = step(lock, allGone("del"), T + 100, { hint: { at: T + 90, value: "v", detail: "by alice: “stuck”" } });
    expect(lock.state).toBe("force-released");
    expect(out.forceHintTaken).toBe(true);
    expect(timeline(out.effects)).toEqual([["force-released", "by alice: “stuck”", "v"]]);
    expect(events(out.effects)).toEqual(["force-released"]);
  });

  it("uses a force hint only for the value it names (or its fenced rewrite), and only while it is recent", () => {
    const first = encodeLockValue({ label: "w", host: "h", pid: 1, fence: null, acquiredAt: T });
    const fenced = first.replace(/^(lk1:[^:]+:[^:]+:[^:]*:)/, "$17");
    const hint = (value: string | null, at = T): ForceHint => ({ at, value, detail: null });
    expect(forceHintApplies(hint(first), fenced, T + 1)).toBe(true);
    expect(forceHintApplies(hint(null), "anything", T + 1)).toBe(true);
    expect(forceHintApplies(hint("x"), "y", T + 1)).toBe(false);
    expect(forceHintApplies(hint("x"), "x", T + FORCE_HINT_MS)).toBe(false);
    expect(forceHintApplies(null, "x", T)).toBe(false);
    const lock = heldLock("w");
    const out = step(lock, allGone("del"), T + 100, { hint: hint("x", T + 90) });
    expect(lock.state).toBe("released");
    expect(out.forceHintTaken).toBe(false);
  });

  it("uses a force hint for the lock a hand-over ended, not for the next holder's", () => {
    const lock = heldLock("x");
    const out = step(lock, all("w", T + 20_000, "del"), T + 12, { hint: { at: T + 10, value: "x", detail: "by alice" } });
    expect(out.forceHintTaken).toBe(true);
    expect(timeline(out.effects).map(([type, detail]) => [type, detail])).toEqual([
      ["force-released", "by alice"],
      ["acquired", "by a foreign client, on 3 of 3 nodes"],
    ]);
  });

  it("says a force release of the value shown when the lock goes on under another (one side of a split vote)", () => {
    const lock = fresh();
    // Held with a on nodes 0 and 2, b on node 1; then node 2's copy goes: a and b on one node each, a still shown.
    step(lock, [held(0, "a", T + 60_000), held(1, "b", T + 60_000), held(2, "a", T + 60_000)], T);
    step(lock, [], T + SETTLE_MS);
    step(lock, [gone(2)], T + 100);
    step(lock, [], T + 100 + SETTLE_MS);
    expect(lock).toMatchObject({ state: "partial", leading: "a" });
    const at = T + 100 + SETTLE_MS + 50;
    const hint = { at: at - 10, value: "a", detail: "by olivia" };
    step(lock, [gone(0)], at, { hint });
    const out = reduceLock(lock, context(), hint, at + SETTLE_MS, false, newLockStep());
    expect(out.forceHintTaken).toBe(true);
    expect(timeline(out.effects)).toEqual([["force-released", "by olivia; the lock goes on with another value on 1 of 3 nodes", "a"]]);
    expect(lock).toMatchObject({ state: "partial", leading: "b" });
  });

  it("says a force release of one side of a split vote that showed no value", () => {
    const lock = fresh();
    step(lock, [held(0, "a", T + 60_000), held(1, "b", T + 60_000)], T);
    step(lock, [], T + SETTLE_MS);
    expect(lock).toMatchObject({ state: "partial", leading: null });
    const at = T + SETTLE_MS + 50;
    const hint = { at: at - 10, value: "a", detail: "by olivia" };
    step(lock, [gone(0)], at, { hint });
    const out = reduceLock(lock, context(), hint, at + SETTLE_MS, false, newLockStep());
    expect(out.forceHintTaken).toBe(true);
    expect(timeline(out.effects)).toEqual([["force-released", "by olivia; the lock goes on with another value on 1 of 3 nodes", "a"]]);
    expect(lock).toMatchObject({ state: "partial", leading: "b" });
  });

  it("leaves a force hint left over from an ended lock off its next holder's timeline", () => {
    const { lock } = endedBy("del");
    // The release is noted again after it finished (or another console's notice comes late): the hint outlives the end.
    const hint: ForceHint = { at: T + 150, value: "v", detail: "by alice" };
    const acquired = step(lock, all("w", T + 20_000), T + 200, { hint });
    const extended = step(lock, all("w", T + 30_000), T + 300, { hint });
    expect([...timeline(acquired.effects), ...timeline(extended.effects)].map(([type]) => type)).toEqual(["acquired", "extended"]);
    expect(acquired.forceHintTaken || extended.forceHintTaken).toBe(false);
  });

  it("relabels a lock that ended a moment ago when the force-release is noted after its keys went", () => {
    const { lock } = endedBy("del");
    expect(forceReleaseNoted(lock, T + 100 + 3_000)).toBe("relabel");
    expect(lock.state).toBe("force-released");
    expect(forceReleaseNoted(lock, T + 100 + 3_000)).toBe("reword");
    const late = endedBy("expired").lock;
    expect(forceReleaseNoted(late, T + 100 + 3_001)).toBeNull();
    expect(late.state).toBe("expired");
    expect(forceReleaseNoted(heldLock(), T + 100)).toBeNull();
  });

  it("ends a lock when a node was seen dropping it, even while another node cannot be read", () => {
    const lock = heldLock();
    const out = step(lock, [gone(0), gone(1)], T + 20, { context: context({ counted: [true, true, false] }) });
    expect(out.outcome).toBe("ended");
    expect(lock.state).toBe("released");
  });
});

describe("a lock's step: a split vote", () => {
  it("shows a lock first seen split between values on as many nodes each with no holder, whichever node holds which", () => {
    for (const [first, second] of [
      ["a", "b"],
      ["b", "a"],
    ] as const) {
      const lock = fresh();
      step(lock, [held(0, first, T + 10_000), held(1, second, T + 10_000), gone(2, null)], T);
      const out = reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
      expect(lock).toMatchObject({ state: "partial", token: null, leading: null, quorumHeld: 1 });
      expect(timeline(out.effects)).toEqual([["acquired", "split vote: 2 values on 1 of 3 nodes each, none on a quorum", null]]);
      expect(out.effects.some((e) => e.type === "first-seen")).toBe(false);
    }
    // Five nodes split 2/2/1.
    const five = new LockRecord("lock:a", 5, []);
    const ctx5 = context({ counted: [true, true, true, true, true], quorum: 3, nodes: 5 });
    step(five, ["c", "b", "a", "b", "a"].map((v, node) => held(node, v, T + 10_000)), T, { context: ctx5 });
    const out = reduceLock(five, ctx5, null, T + SETTLE_MS, false, newLockStep());
    expect(five).toMatchObject({ state: "partial", leading: null, quorumHeld: 2 });
    expect(timeline(out.effects)).toEqual([["acquired", "split vote: 2 values on 2 of 5 nodes each, none on a quorum", null]]);
  });

  it("keeps the value a lock was held with leading when another ties with it, wherever each is", () => {
    for (const [node, other] of [
      [0, 1],
      [1, 0],
    ] as const) {
      const lock = heldLock("a");
      step(lock, [held(other, "b", T + 20_000, "del"), gone(2)], T + 1_000);
      const out = reduceLock(lock, context(), null, T + 1_000 + SETTLE_MS, false, newLockStep());
      expect(lock.valueOn(node)).toBe("a");
      expect(lock).toMatchObject({ state: "partial", token: null, leading: "a", quorumHeld: 1, acquiredAt: T });
      expect(timeline(out.effects).map(([type]) => type)).toEqual(["partial"]);
      // The other side takes a quorum and the first is gone: it ended, the other acquired it.
      step(lock, [held(node, "b", T + 20_000, "del")], T + 2_000);
      const taken = reduceLock(lock, context(), null, T + 2_000 + SETTLE_MS, false, newLockStep());
      expect(timeline(taken.effects).map(([type, , token]) => [type, token])).toEqual([
        ["released", "a"],
        ["acquired", "b"],
      ]);
    }
  });

  it("says a held lock's value replaced by a split vote ended, and the split began, whichever node holds which", () => {
    for (const values of [
      ["b", "c"],
      ["c", "b"],
    ]) {
      const lock = heldLock("a");
      step(lock, [held(0, values[0] as string, T + 20_000, "del"), held(1, values[1] as string, T + 20_000, "del"), gone(2)], T + 1_000);
      const out = reduceLock(lock, context(), null, T + 1_000 + SETTLE_MS, false, newLockStep());
      expect(timeline(out.effects)).toEqual([
        ["released", "handed straight to the next holder", "a"],
        ["acquired", "split vote: 2 values on 1 of 3 nodes each, none on a quorum", null],
      ]);
      expect(lock).toMatchObject({ state: "partial", token: null, leading: null });
    }
  });
  it("ends a split vote whose sides are all gone when another value replaces them, held or not, and says that one's acquisition", () => {
    for (const [replacing, expected] of [
      [all("c", T + 20_000, "del"), ["acquired", "by a foreign client, on 3 of 3 nodes", "c", "held"]],
      [[held(0, "c", T + 20_000, "del"), gone(1, "del")], ["acquired", "by a foreign client, on 1 of 3 nodes (no quorum)", "c", "partial"]],
    ] as const) {
      const lock = fresh();
      step(lock, [held(0, "a", T + 10_000), held(1, "b", T + 10_000), gone(2, null)], T);
      reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
      expect(lock).toMatchObject({ state: "partial", leading: null });
      const read = step(lock, [...replacing], T + 100);
      const out = [read, reduceLock(lock, context(), null, T + 100 + SETTLE_MS, false, newLockStep())];
      const [type, detail, token, state] = expected;
      expect(out.flatMap((o) => timeline(o.effects))).toEqual([
        ["released", "handed straight to the next holder", null],
        [type, detail, token],
      ]);
      expect(out.flatMap((o) => events(o.effects))).toEqual(["released", "acquired"]);
      expect(lock).toMatchObject({ state, leading: "c", acquiredAt: read.outcome === "settling" ? T + 100 + SETTLE_MS : T + 100 });
    }
  });

  it("counts one acquisition when a side of a split vote takes a quorum: the same lock goes on, with that side's holder", () => {
    for (const [nodes, quorum, sides, gain] of [
      [3, 2, ["a", "b", null], [2]],
      [5, 3, ["a", "a", "b", "b", null], [4]],
      // The other side's node handed over to the winner (its value deleted, the winner's written).
      [3, 2, ["a", "b", null], [1]],
    ] as const) {
      const ctx = context({ counted: new Array<boolean>(nodes).fill(true), quorum, nodes });
      const lock = new LockRecord("lock:a", nodes, []);
      const first = step(lock, sides.map((v, node) => (v === null ? gone(node, null) : held(node, v, T + 10_000))), T, { context: ctx });
      const split = [first, reduceLock(lock, ctx, null, T + SETTLE_MS, false, newLockStep())];
      expect(lock).toMatchObject({ state: "partial", leading: null });
      expect(split.flatMap((out) => counted(out.effects))).toEqual(["acquisitions"]);
      const read = step(lock, gain.map((node) => held(node, "a", T + 10_000, sides[node] === null ? null : "del")), T + 100, { context: ctx });
      const won = [read, reduceLock(lock, ctx, null, T + 100 + SETTLE_MS, false, newLockStep())];
      expect(lock).toMatchObject({ state: "held", token: "a", acquiredAt: T + SETTLE_MS });
      const effects = won.flatMap((out) => out.effects);
      expect(timeline(effects)).toEqual([["quorum", `a quorum holds one side's value: by a foreign client, on ${lock.quorumHeld} of ${nodes} nodes`, "a"]]);
      expect(events(effects)).toEqual([]);
      expect(counted(effects)).toEqual([]);
      // Its first sighting is the split's, shared with the other consoles; its holder is the contention figures'.
      expect(effects).toContainEqual({ type: "first-seen", token: "a", seenAt: T + SETTLE_MS, ttlMs: lock.ttlMs });
      expect(effects).toContainEqual({ type: "holder", id: null });
    }
  });
});

describe("a lock's step: the holder of a partial lock", () => {
  /** A plain token's reading, as the watcher decodes one. */
  const token = (node: number, value: string, expiry = T + 60_000, cause: NodeSample["cause"] = null): NodeSample => ({
    node,
    value,
    expiry,
    cause,
    reading: { format: "token", redisType: "string", fingerprint: value, holders: [{ id: value }], expiresAt: expiry, keyExpiresAt: expiry, warnings: [], waiters: null },
  });
  /** The holders the lock's row names (its kept reading's). */
  const holders = (lock: LockRecord) => (lock.reading === null ? [] : keptView(lock.reading).holders.map((h) => h.id));

  it("names the value node 0 holds once node 1, the other side of a split vote, restarts empty, whichever side was read last", () => {
    for (const order of [
      [0, 1],
      [1, 0],
    ] as const) {
      const lock = fresh();
      const sides = [token(0, "only-on-node-0"), token(1, "only-on-node-1")];
      step(lock, [sides[order[0]] as NodeSample, sides[order[1]] as NodeSample, gone(2, null)], T);
      reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
      expect(lock).toMatchObject({ state: "partial", leading: null });
      // Node 1 restarted without its key (one node holding a value, two none: waited out as any disagreement).
      step(lock, [gone(1, "lost")], T + 1_000);
      const out = reduceLock(lock, context(), null, T + 1_000 + SETTLE_MS, false, newLockStep());
      expect([order, lock.state, lock.leading, holders(lock), out.changed]).toEqual([order, "partial", "only-on-node-0", ["only-on-node-0"], true]);
      // The nodes agree again: nothing is kept aside for the lock any more.
      expect(lock.pending).toBeNull();
    }
  });

  it("names the value a node holds once the node holding the value shown restarts empty or goes down", () => {
    const shownThenOther = () => {
      const lock = fresh();
      // Held on node 1 first (partial: declared a Redlock), then another client takes node 0: node 1's value goes on
      // being shown.
      step(lock, [token(1, "first-on-node-1"), gone(0, null), gone(2, null)], T);
      reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
      step(lock, [token(0, "then-on-node-0")], T + 100);
      reduceLock(lock, context(), null, T + 100 + SETTLE_MS, false, newLockStep());
      expect([lock.state, lock.leading, holders(lock)]).toEqual(["partial", "first-on-node-1", ["first-on-node-1"]]);
      return lock;
    };
    const restarted = shownThenOther();
    step(restarted, [gone(1, "lost")], T + 1_000);
    reduceLock(restarted, context(), null, T + 1_000 + SETTLE_MS, false, newLockStep());
    expect([restarted.leading, holders(restarted)]).toEqual(["then-on-node-0", ["then-on-node-0"]]);
    const down = shownThenOther();
    reduceLock(down, context({ counted: [true, false, true] }), null, T + 1_000, true, newLockStep());
    expect([down.leading, holders(down)]).toEqual(["then-on-node-0", ["then-on-node-0"]]);
    // Node 1 back (not read again yet), then node 0 down: node 1's value leads again, named as before.
    reduceLock(down, context(), null, T + 2_000, true, newLockStep());
    reduceLock(down, context({ counted: [false, true, true] }), null, T + 3_000, true, newLockStep());
    expect([down.leading, holders(down)]).toEqual(["first-on-node-1", ["first-on-node-1"]]);
  });
});

describe("a lock's step: holder sets and readings", () => {
  const semaphore = (node: number, holders: string, expiry = T + 30_000): NodeSample => {
    const reading: FormatReading = {
      format: "redis-semaphore",
      redisType: "zset",
      fingerprint: holders,
      holders: holders.split("\n").map((id) => ({ id })),
      expiresAt: expiry,
      keyExpiresAt: expiry,
      warnings: [],
      waiters: null,
    };
    return { node, reading, value: holders, expiry, cause: null };
  };

  it("sees holders join and leave one semaphore, not a new lock each time", () => {
    const lock = fresh();
    const single = context({ declaredScope: () => null });
    step(lock, [semaphore(0, "a")], T, { context: single });
    // (The other nodes hold nothing: the view settles first.)
    reduceLock(lock, single, null, T + SETTLE_MS, false, newLockStep());
    expect(lock).toMatchObject({ state: "held", scope: "single", reading: { format: "redis-semaphore" } });
    const joined = step(lock, [semaphore(0, "a\nb")], T + 100, { context: single });
    // (Each with the holder set it changed to, which the lock history holds from then on.)
    expect(timeline(joined.effects)).toEqual([["holders", "joined: b", "a\nb"]]);
    expect(events(joined.effects)).toEqual(["extended"]);
    const left = step(lock, [semaphore(0, "b")], T + 200, { context: single });
    expect(timeline(left.effects)).toEqual([["holders", "left: a", "b"]]);
    expect(lock.token).toBe("b");
  });

  it("votes a Redlock semaphore per holder, each holder's permit ending when its own does", () => {
    // A on nodes 0 and 1, B on 1 and 2; D on node 1 and C on node 2, alone, keep those keys alive longest
    // but hold nothing.
    const permits = (node: number, ids: Array<[string, number]>): NodeSample => {
      const expiry = Math.max(...ids.map(([, end]) => end));
      const reading: FormatReading = {
        format: "redis-semaphore",
        redisType: "zset",
        fingerprint: ids.map(([id]) => id).join("\n"),
        holders: ids.map(([id, end]) => ({ id, expiresAt: end })),
        expiresAt: expiry,
        keyExpiresAt: expiry,
        warnings: [],
        waiters: null,
      };
      return { node, reading, value: reading.fingerprint, expiry, cause: null };
    };
    const lock = fresh();
    step(lock, [permits(0, [["A", T + 10_000]]), permits(1, [["A", T + 10_000], ["B", T + 12_000], ["D", T + 60_000]]), permits(2, [["B", T + 12_000], ["C", T + 60_000]])], T);
    reduceLock(lock, context(), null, T + SETTLE_MS, false, newLockStep());
    expect(lock).toMatchObject({ state: "held", token: "A\nB", quorumHeld: 2, expiresAt: T + 12_000 });
    expect(lock.reading).toMatchObject({ holders: [{ id: "A", expiresAt: T + 10_000 }, { id: "B", expiresAt: T + 12_000 }] });
  });

  it("reads a key held with different values on two nodes as a Redlock whose vote is split: partial", () => {
    const lock = fresh();
    const inferred = context({ declaredScope: () => null });
    step(lock, [held(0, "x", T + 10_000), held(1, "y", T + 10_000), gone(2, null)], T, { context: inferred });
    reduceLock(lock, inferred, null, T + SETTLE_MS, false, newLockStep());
    expect(lock).toMatchObject({ state: "partial", scope: "quorum", quorumHeld: 1 });
  });

  it("takes the operator's declared scope over the inference, and infers a lock on one node single", () => {
    const declared = fresh();
    step(declared, [held(0, "t", T + 10_000), gone(1, null), gone(2, null)], T);
    reduceLock(declared, context(), null, T + SETTLE_MS, false, newLockStep());
    expect(declared).toMatchObject({ state: "partial", scope: "quorum" });
    const inferred = fresh();
    const none = context({ declaredScope: () => null });
    step(inferred, [held(0, "t", T + 10_000), gone(1, null), gone(2, null)], T, { context: none });
    reduceLock(inferred, none, null, T + SETTLE_MS, false, newLockStep());
    expect(inferred).toMatchObject({ state: "held", scope: "single", quorumHeld: 1 });
  });

  it("tells a plain value replaced (a new lock) from a holder set changing", () => {
    const lock = fresh();
    step(lock, all("a", T + 30_000), T);
    const out = step(lock, all("a\nb", T + 30_000, "del"), T + 100);
    expect(timeline(out.effects).map(([type]) => type)).toEqual(["released", "acquired"]);
  });

  it("notes what each reading says: an end seen, an extension seen, a change shown", () => {
    const lock = heldLock("v", T + 10_000);
    expect(readSamples(lock, [held(0, "v", T + 10_005)])).toBe(false);
    expect(lock).toMatchObject({ endSeen: false, extensionSeen: false });
    expect(readSamples(lock, [held(0, "v", T + 20_000)])).toBe(true);
    expect(lock.extensionSeen).toBe(true);
    expect(readSamples(lock, [gone(1, "del")])).toBe(true);
    expect(lock).toMatchObject({ endSeen: true, cause: "del" });
  });
});

describe("a lock's first sighting shared by the consoles", () => {
  it("adopts the agreed first-seen time for the value it holds only", () => {
    const lock = heldLock("v");
    expect(adoptFirstSeen(lock, "other", T - 5_000)).toBe(false);
    expect(adoptFirstSeen(lock, "v", T - 5_000)).toBe(true);
    expect(lock.acquiredAt).toBe(T - 5_000);
    expect(adoptFirstSeen(lock, "v", T - 5_000)).toBe(false);
  });
});

describe("a lock record's values on its nodes", () => {
  const values = (lock: LockRecord) => Array.from({ length: lock.nodeCount }, (_, i) => lock.valueOn(i));

  it("keeps each node's value through agreement, a split and agreement again", () => {
    const lock = fresh();
    readSamples(lock, [held(0, "a", T + 1_000), held(2, "a", T + 1_000)]);
    expect(values(lock)).toEqual(["a", null, "a"]);
    // A hand-over written on one node so far: the nodes disagree.
    readSamples(lock, [held(1, "b", T + 2_000)]);
    expect(values(lock)).toEqual(["a", "b", "a"]);
    readSamples(lock, [held(0, "b", T + 2_000)]);
    expect(values(lock)).toEqual(["b", "b", "a"]);
    readSamples(lock, [held(2, "b", T + 2_000)]);
    expect(values(lock)).toEqual(["b", "b", "b"]);
    readSamples(lock, [gone(1)]);
    expect(values(lock)).toEqual(["b", null, "b"]);
    readSamples(lock, [gone(0), gone(2)]);
    expect(values(lock)).toEqual([null, null, null]);
    // One node alone, then another value on it.
    readSamples(lock, [held(1, "c", T + 3_000)]);
    readSamples(lock, [held(1, "d", T + 3_000)]);
    expect(values(lock)).toEqual([null, "d", null]);
    expect(lock.nodeHolding("d")).toBe(1);
    expect(lock.nodeHolding("c")).toBe(-1);
  });

  it("merges a split vote the same whichever way its values are kept", () => {
    const lock = fresh();
    step(lock, [held(0, "a", T + 10_000), held(1, "b", T + 10_000), held(2, "b", T + 10_000)], T);
    expect(values(lock)).toEqual(["a", "b", "b"]);
    // Held back while the nodes disagree, then counted.
    const out = step(lock, [], T + SETTLE_MS);
    expect(lock.token).toBe("b");
    expect(lock.quorumHeld).toBe(2);
    expect(timeline(out.effects).map(([type]) => type)).toEqual(["acquired"]);
  });

  it("keeps one copy of a value all nodes hold, however many strings the nodes' replies were", () => {
    const lock = fresh();
    const copies = [0, 1, 2].map((i) => ["to", "ken"].join("") + "".padEnd(i, ""));
    readSamples(lock, copies.map((value, node) => held(node, value, T + 1_000)));
    expect(lock.keptCopy("token")).toBe(lock.valueOn(0));
    expect(lock.valueOn(1)).toBe(lock.valueOn(0));
  });

  it("keeps every node's value on a deployment of more nodes than a bit mask holds", () => {
    const lock = new LockRecord("lock:wide", 40, []);
    const samples = Array.from({ length: 40 }, (_, node) => held(node, node === 35 ? "other" : "v", T + 1_000));
    readSamples(lock, samples);
    expect(values(lock).filter((v) => v === "v")).toHaveLength(39);
    expect(lock.valueOn(35)).toBe("other");
    readSamples(lock, [held(35, "v", T + 1_000)]);
    expect(values(lock).every((v) => v === "v")).toBe(true);
    readSamples(lock, [gone(39)]);
    expect(lock.valueOn(39)).toBeNull();
    expect(lock.valueOn(38)).toBe("v");
  });
});
