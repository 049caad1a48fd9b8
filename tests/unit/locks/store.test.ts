import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import type { LiveEventMap } from "@/server/live/events";
import { LINGER_MS, LockStore, LOSSES_KEPT_MS, MAX_LOSSES, RECENT_CAP, SETTLE_MS, type NodeSample } from "@/server/live/store";

function storeStarting() {
  const events = new EventEmitter<LiveEventMap>();
  const seen: string[] = [];
  events.on("lock-event", (e) => seen.push(`${e.type} ${e.resource}`));
  const store = new LockStore(NODES, 2, events);
  // These cases are about the Redlock vote: the keys are declared quorum locks (scope is tested on its own).
  store.declaredScope = () => "quorum";
  return { store, seen };
}

const T = 1_800_000_000_000;
const NODES = ["node-0", "node-1", "node-2"];

function storeWithNodesUp() {
  const events = new EventEmitter<LiveEventMap>();
  const seen: string[] = [];
  events.on("lock-event", (e) => seen.push(`${e.type} ${e.resource}`));
  const store = new LockStore(NODES, 2, events);
  store.declaredScope = () => "quorum";
  NODES.forEach((_, i) => store.setNodeUp(i, true, T));
  store.watching = true;
  return { store, seen };
}

/** One node, as a single Redis server (or a Sentinel or cluster deployment) is watched. */
function storeOnOneNode() {
  const events = new EventEmitter<LiveEventMap>();
  const seen: string[] = [];
  events.on("lock-event", (e) => seen.push(`${e.type} ${e.resource}`));
  const store = new LockStore(["node-0"], 1, events);
  store.setNodeUp(0, true, T);
  store.watching = true;
  return { store, seen };
}

const held = (node: number, value: string, expiry: number): NodeSample => ({ node, value, expiry, cause: null });
const gone = (node: number, cause: NodeSample["cause"] = "del"): NodeSample => ({ node, value: null, expiry: Number.NaN, cause });

describe("the lock store", () => {
  it("counts a Redlock write seen on one node first as one acquisition, never as a partial lock", () => {
    const { store, seen } = storeWithNodesUp();
    store.apply("lock:a", [held(0, "v", T + 10_000), gone(1, null), gone(2, null)], T);
    expect(store.lock("lock:a", T)).toBeNull();
    store.apply("lock:a", [held(0, "v", T + 10_000), held(1, "v", T + 10_005), held(2, "v", T + 10_010)], T + 3);
    expect(store.lock("lock:a", T + 3)).toMatchObject({ state: "held", token: "v", quorumHeld: 3, expiresAt: T + 10_005 });
    expect(store.get("lock:a", T + 3)?.timeline.map((e) => e.type)).toEqual(["acquired"]);
    expect(seen).toEqual(["acquired lock:a"]);
    const drained = store.drain(T + 10, 100, 100);
    expect(drained.upserts.map((l) => [l.resource, l.state])).toEqual([["lock:a", "held"]]);
  });

  it("shows a disagreement that lasts as partial", () => {
    const { store } = storeWithNodesUp();
    store.apply("lock:b", [held(0, "x", T + 10_000), gone(1, null), gone(2, null)], T);
    store.tick(T + SETTLE_MS + 1);
    expect(store.lock("lock:b", T + SETTLE_MS + 1)).toMatchObject({ state: "partial", token: null, quorumHeld: 1 });
  });

  it("reports a release deleted node by node as released, without a quorum-lost step", () => {
    const { store, seen } = storeWithNodesUp();
    store.apply("lock:c", [held(0, "v", T + 10_000), held(1, "v", T + 10_000), held(2, "v", T + 10_000)], T);
    store.apply("lock:c", [gone(0), gone(1), held(2, "v", T + 10_000)], T + 100);
    store.apply("lock:c", [gone(2)], T + 102);
    expect(store.lock("lock:c", T + 102)).toMatchObject({ state: "released", token: null, endedToken: "v" });
    expect(store.get("lock:c", T + 102)?.timeline.map((e) => e.type)).toEqual(["acquired", "released"]);
    expect(seen).toEqual(["acquired lock:c", "released lock:c"]);
  });

  it("marks a lock whose TTL ran out while its keys remain as elapsed", () => {
    const { store } = storeWithNodesUp();
    store.apply("lock:f", [held(0, "v", T + 500), held(1, "v", T + 500), held(2, "v", T + 500)], T);
    store.tick(T + 600);
    expect(store.lock("lock:f", T + 600)?.state).toBe("elapsed");
  });

  it("sends a lock at most once per coalescing window, with its latest state", () => {
    const { store } = storeWithNodesUp();
    store.apply("lock:g", [held(0, "v", T + 10_000), held(1, "v", T + 10_000), held(2, "v", T + 10_000)], T);
    expect(store.drain(T, 100, 100).upserts).toHaveLength(1);
    store.apply("lock:g", [held(0, "v", T + 30_000), held(1, "v", T + 30_000), held(2, "v", T + 30_000)], T + 20);
    expect(store.drain(T + 20, 100, 100).upserts).toHaveLength(0);
    const later = store.drain(T + 100, 100, 100).upserts;
    expect(later).toHaveLength(1);
    expect(later[0]?.expiresAt).toBe(T + 30_000);
    expect(store.get("lock:g", T + 100)?.timeline.map((e) => e.type)).toEqual(["acquired", "extended"]);
  });

  it("sends every changed lock over as many drains as the cap needs, none twice and none lost, however many wait", () => {
    for (const count of [7, 50]) {
      const { store } = storeWithNodesUp();
      for (let i = 0; i < count; i++) store.apply(`lock:n${i}`, [held(0, "v", T + 10_000), held(1, "v", T + 10_000), held(2, "v", T + 10_000)], T);
      const sent: string[] = [];
      for (let round = 0; round < 20; round++) sent.push(...store.drain(T + round, 100, 3).upserts.map((l) => l.resource));
      expect(sent.sort()).toEqual(Array.from({ length: count }, (_, i) => `lock:n${i}`).sort());
    }
  });

  it("keeps an ended lock listed a few seconds, then removes it but keeps its page", () => {
    const { store } = storeWithNodesUp();
    store.apply("lock:h", [held(0, "v", T + 10_000), held(1, "v", T + 10_000), held(2, "v", T + 10_000)], T);
    store.apply("lock:h", [gone(0), gone(1), gone(2)], T + 10);
    store.drain(T + 10, 0, 100);
    store.tick(T + 10 + LINGER_MS);
    expect(store.lock("lock:h", T + 10 + LINGER_MS)).toBeNull();
    expect(store.drain(T + 10 + LINGER_MS, 0, 100).removed).toEqual(["lock:h"]);
    expect(store.get("lock:h", T + 10 + LINGER_MS)?.state).toBe("released");
    expect(store.counts().byState.released).toBe(0);
  });

  it("shows a lock held on 3 nodes as held by 2 when one node goes down", () => {
    const { store } = storeWithNodesUp();
    store.apply("lock:i", [held(0, "v", T + 10_000), held(1, "v", T + 10_000), held(2, "v", T + 10_000)], T);
    store.setNodeUp(2, false, T + 5);
    const lock = store.lock("lock:i", T + 5);
    expect(lock).toMatchObject({ state: "held", quorumHeld: 2 });
    expect(lock?.nodes.map((n) => n.up)).toEqual([true, true, false]);
  });

  it("says a lock held on exactly a quorum lost it while one of its nodes was down, and regained it when the node came back", () => {
    const { store } = storeWithNodesUp();
    store.apply("lock:q", [held(0, "v", T + 60_000), held(1, "v", T + 60_000), gone(2, null)], T);
    store.tick(T + SETTLE_MS + 1);
    expect(store.lock("lock:q", T + SETTLE_MS + 1)?.state).toBe("held");
    store.setNodeUp(1, false, T + 1_000);
    store.tick(T + 1_000 + SETTLE_MS + 1);
    expect(store.lock("lock:q", T + 1_000 + SETTLE_MS + 1)?.state).toBe("partial");
    store.setNodeUp(1, true, T + 5_000);
    store.tick(T + 5_000 + SETTLE_MS + 1);
    expect(store.lock("lock:q", T + 5_000 + SETTLE_MS + 1)).toMatchObject({ state: "held", token: "v", quorumHeld: 2 });
    const timeline = store.get("lock:q", T + 5_000 + SETTLE_MS + 1)?.timeline ?? [];
    expect(timeline.map((e) => e.type)).toEqual(["acquired", "partial", "quorum"]);
    expect(timeline.at(-1)?.detail).toBe("a quorum holds its value: 2 of 3 nodes");
  });

  it("counts a hand-over (the release writes the next holder's value) as a release and an acquisition", () => {
    const { store, seen } = storeWithNodesUp();
    store.apply("lock:k", [held(0, "v", T + 10_000), held(1, "v", T + 10_000), held(2, "v", T + 10_000)], T);
    // Each node deleted v and wrote w in one script: the notifications said del, then set.
    const next = (node: number): NodeSample => ({ node, value: "w", expiry: T + 20_000, cause: "del" });
    store.apply("lock:k", [next(0), next(1), next(2)], T + 50);
    expect(store.lock("lock:k", T + 50)).toMatchObject({ state: "held", token: "w" });
    expect(store.get("lock:k", T + 50)?.timeline.map((e) => [e.type, e.detail ?? ""])).toEqual([
      ["acquired", expect.stringContaining("by ")],
      ["released", "handed straight to the next holder"],
      ["acquired", expect.stringContaining("by ")],
    ]);
    expect(seen).toEqual(["acquired lock:k", "released lock:k", "acquired lock:k"]);
    // The next holder's lock ends in its turn, by its own cause.
    store.apply("lock:k", [gone(0, "expired"), gone(1, "expired"), gone(2, "expired")], T + 20_001);
    expect(store.get("lock:k", T + 20_001)?.timeline.map((e) => e.type)).toEqual(["acquired", "released", "acquired", "expired"]);
  });

  it("ends only the force-released lock as forced, not the holders that follow it by hand-over", () => {
    const { store, seen } = storeWithNodesUp();
    const all = (value: string, expiry: number, cause: NodeSample["cause"] = null) => [0, 1, 2].map((node): NodeSample => ({ node, value, expiry, cause }));
    store.apply("lock:m", all("x", T + 10_000), T);
    store.noteForceRelease("lock:m", { value: "x", actor: "alice", reason: "stuck" }, T + 10);
    store.apply("lock:m", all("w", T + 20_000, "del"), T + 12);
    store.apply("lock:m", all("z", T + 30_000, "del"), T + 40);
    expect(store.get("lock:m", T + 40)?.timeline.map((e) => [e.type, e.detail ?? ""])).toEqual([
      ["acquired", expect.any(String)],
      ["force-released", "by alice: “stuck”"],
      ["acquired", expect.any(String)],
      ["released", "handed straight to the next holder"],
      ["acquired", expect.any(String)],
    ]);
    expect(seen.filter((e) => e.startsWith("force-released"))).toHaveLength(1);
  });

  it("asks for a fresh read of a lock force-released while it still shows held, so a missed notification cannot leave it held", () => {
    const { store } = storeWithNodesUp();
    const probed: string[][] = [];
    store.onProbe = (resources) => probed.push(resources);
    store.apply("lock:p", [held(0, "v", T + 30_000), held(1, "v", T + 30_000), held(2, "v", T + 30_000)], T);
    store.noteForceRelease("lock:p", { value: "v", actor: "alice" }, T + 5);
    expect(probed).toEqual([["lock:p"]]);
    // The read finds the keys gone: the lock ends as the operator's release.
    store.apply("lock:p", [gone(0, null), gone(1, null), gone(2, null)], T + 8);
    expect(store.lock("lock:p", T + 8)?.state).toBe("force-released");
    // A lock that already ended is relabelled, not read again; one nobody showed is not read at all.
    store.noteForceRelease("lock:p", { value: "v", actor: "bob" }, T + 9);
    store.noteForceRelease("lock:unknown", { value: "u" }, T + 9);
    expect(probed).toEqual([["lock:p"]]);
  });

  it("counts a failed attempt once: its waiter giving up later is no second contention event", () => {
    const events = new EventEmitter<LiveEventMap>();
    const counted: string[] = [];
    events.on("contention", (e) => counted.push(e.resource));
    const store = new LockStore(NODES, 2, events);
    NODES.forEach((_, i) => store.setNodeUp(i, true, T));
    store.watching = true;
    store.recordContention({ resource: "lock:c", waiterId: "w1", label: "checkout", host: null, pid: null, attempt: 1 }, T);
    expect(store.get("lock:c", T)).toBeNull();
    store.recordGaveUp({ resource: "lock:c", waiterId: "w1" }, T + 10);
    expect(counted).toEqual(["lock:c"]);
  });

  it("relabels a lock that just ended as force-released when the revocation arrives", () => {
    const { store, seen } = storeWithNodesUp();
    store.apply("lock:j", [held(0, "v", T + 10_000), held(1, "v", T + 10_000), held(2, "v", T + 10_000)], T);
    store.apply("lock:j", [gone(0), gone(1), gone(2)], T + 10);
    store.noteForceRelease("lock:j", { value: "v", actor: "alice", reason: "stuck worker" }, T + 12);
    expect(store.lock("lock:j", T + 12)?.state).toBe("force-released");
    expect(store.get("lock:j", T + 12)?.timeline.at(-1)).toMatchObject({ type: "force-released", detail: "by alice: “stuck worker”" });
    expect(seen).toContain("force-released lock:j");
  });

  it("ends a lock a restarted node came back without as lost, and only the first reading that finds it gone", () => {
    const { store, seen } = storeOnOneNode();
    store.apply("lock:r", [held(0, "v", T + 60_000)], T);
    store.apply("lock:short", [held(0, "s", T + 500)], T);
    store.apply("lock:kept", [held(0, "k", T + 60_000)], T);
    const before = store.heldOn(0);
    store.suspectLost(0, before, T + 100);
    // Read again: one gone with its TTL running, one whose TTL ran out before the reading, one the node kept.
    store.apply("lock:r", [gone(0, null)], T + 1_000);
    store.apply("lock:short", [gone(0, null)], T + 1_000);
    store.apply("lock:kept", [held(0, "k", T + 60_000)], T + 1_000);
    expect(store.lock("lock:r", T + 1_000)).toMatchObject({ state: "lost", endedToken: "v" });
    expect(store.get("lock:r", T + 1_000)?.timeline.at(-1)).toMatchObject({ type: "lost", detail: expect.stringContaining("nobody released it") as unknown });
    expect(store.lock("lock:short", T + 1_000)?.state).toBe("expired");
    expect(store.lock("lock:kept", T + 1_000)?.state).toBe("held");
    // Taken again and released (no notification seen) before the suspicion is cleared: a release, not a loss.
    store.apply("lock:r", [held(0, "w", T + 60_000)], T + 1_100);
    store.apply("lock:r", [gone(0, null)], T + 1_200);
    expect(store.lock("lock:r", T + 1_200)?.state).toBe("released");
    store.clearSuspects(0, before);
    store.apply("lock:kept", [gone(0, null)], T + 1_300);
    expect(store.lock("lock:kept", T + 1_300)?.state).toBe("released");
    expect(seen.filter((e) => !e.startsWith("acquired"))).toEqual(["lost lock:r", "expired lock:short", "released lock:r", "released lock:kept"]);
  });

  it("ends a lock a failover's promoted replica never had as lost, whether the replica is read after the comparison or before it", () => {
    const { store, seen } = storeOnOneNode();
    store.apply("lock:late", [held(0, "a", T + 60_000)], T);
    store.apply("lock:early", [held(0, "b", T + 60_000)], T);
    // The watcher read the promoted replica before the comparison said what it lacks: first taken for a release.
    store.apply("lock:early", [gone(0, null)], T + 50);
    expect(store.lock("lock:early", T + 50)?.state).toBe("released");
    store.noteLostInFailover({ resource: "lock:early", token: "b", expiresAt: T + 60_000 }, "not on the replica", T + 10, T + 60);
    store.noteLostInFailover({ resource: "lock:late", token: "a", expiresAt: T + 60_000 }, "not on the replica", T + 10, T + 60);
    store.apply("lock:late", [gone(0, null)], T + 80);
    expect(store.lock("lock:early", T + 80)?.state).toBe("lost");
    expect(store.get("lock:early", T + 80)?.timeline.map((e) => e.type)).toEqual(["acquired", "lost", "lost-in-failover"]);
    expect(store.lock("lock:late", T + 80)?.state).toBe("lost");
    expect(store.get("lock:late", T + 80)?.timeline.map((e) => e.type)).toEqual(["acquired", "lost-in-failover", "lost"]);
    expect(store.counts().byState).toMatchObject({ lost: 2, released: 0 });
    // A lock taken again there later ends as it ends: the suspicion was used up.
    store.apply("lock:late", [held(0, "c", T + 60_000)], T + 200);
    store.apply("lock:late", [gone(0, null)], T + 300);
    expect(store.lock("lock:late", T + 300)?.state).toBe("released");
    expect(seen.filter((e) => !e.startsWith("acquired"))).toEqual(["released lock:early", "lost lock:early", "lost lock:late", "released lock:late"]);
  });

  it("lists the locks lost in the last 24 hours, newest first, at most 1,000, each with whether it goes on", () => {
    const { store } = storeOnOneNode();
    const seen = (resource: string) => ({ resource, token: `t-${resource}`, expiresAt: null });
    store.apply("lock:on", [held(0, "t-lock:on", T + 60_000)], T);
    store.noteLostInFailover(seen("lock:old"), "lost", T, T);
    store.noteLostInFailover(seen("lock:on"), "lost", T + 1, T + 1);
    // (More than twice the cap: the log is trimmed in batches.)
    const n = 2 * MAX_LOSSES + 500;
    for (let i = 0; i < n; i++) store.noteLostInFailover(seen(`lock:n${i}`), "lost", T + 2, T + LOSSES_KEPT_MS + i);
    const losses = store.losses("default", T + LOSSES_KEPT_MS + n);
    expect(losses).toHaveLength(MAX_LOSSES);
    expect(losses[0]).toMatchObject({ resource: `lock:n${n - 1}`, deployment: "default", node: "node-0", kind: "failover", token: `t-lock:n${n - 1}`, wentOn: false });
    expect(losses.at(-1)?.resource).toBe(`lock:n${n - MAX_LOSSES}`);
    // Fewer than 1,000 and within the day: the older ones stay.
    const { store: other } = storeOnOneNode();
    other.noteLostInFailover(seen("lock:old"), "lost", T, T);
    other.noteLostInFailover(seen("lock:new"), "lost", T + 1, T + 1);
    expect(other.losses("default", T + 2).map((l) => l.resource)).toEqual(["lock:new", "lock:old"]);
    expect(other.losses("default", T + LOSSES_KEPT_MS + 2)).toEqual([]);
  });

  it("keeps a Redlock whose restarted node lost its copy going, listed as going on, and ends it later as its holder ends it", () => {
    const { store, seen } = storeWithNodesUp();
    for (const resource of ["lock:kept", "lock:handed"]) store.apply(resource, [0, 1, 2].map((node) => held(node, `v-${resource}`, T + 60_000)), T);
    const before = store.heldOn(0);
    store.suspectLost(0, before, T + 100);
    for (const resource of ["lock:kept", "lock:handed"]) store.apply(resource, [gone(0, null)], T + 1_000);
    store.tick(T + 1_000 + SETTLE_MS + 1);
    store.lostInRestart(0, before, T + 100, "without an append-only file", T + 1_100);
    store.clearSuspects(0, before);
    expect(store.lock("lock:kept", T + 1_100)).toMatchObject({ state: "held", quorumHeld: 2 });
    // Its holder releases one, and hands the other to the next holder (a plain SET, no notification): neither is lost.
    store.apply("lock:kept", [gone(1, null), gone(2, null)], T + 2_000);
    store.apply("lock:handed", [held(1, "next", T + 60_000), held(2, "next", T + 60_000)], T + 2_000);
    expect(store.lock("lock:kept", T + 2_000)?.state).toBe("released");
    // (Node 0 holds nothing: the hand-over is waited out, as one half applied would be.)
    store.tick(T + 2_000 + SETTLE_MS + 1);
    expect(store.get("lock:handed", T + 2_000 + SETTLE_MS + 1)?.timeline.map((e) => e.type)).toEqual(["acquired", "lost-in-restart", "released", "acquired"]);
    expect(seen.filter((e) => !e.startsWith("acquired"))).toEqual(["released lock:kept", "released lock:handed"]);
    // The list still says they went on when the loss was found.
    expect(store.losses("default", T + 2_000).map((l) => [l.resource, l.wentOn]).sort()).toEqual([
      ["lock:handed", true],
      ["lock:kept", true],
    ]);
  });

  it("leaves a lock its holder released after a failover was announced released, and relabels a late-found loss without unbalancing the counts", () => {
    const { store, seen } = storeOnOneNode();
    store.apply("lock:freed", [held(0, "f", T + 60_000)], T);
    store.apply("lock:late", [held(0, "l", T + 60_000)], T);
    // The failover is announced at T + 10; the holder's release comes with its notification; the other is read gone.
    store.apply("lock:freed", [gone(0, "del")], T + 20);
    store.apply("lock:late", [gone(0, null)], T + 20);
    // The comparison answers after the lock left the list.
    store.tick(T + 20 + LINGER_MS + 1);
    store.noteLostInFailover({ resource: "lock:freed", token: "f", expiresAt: T + 60_000 }, "not on the replica", T + 10, T + 20 + LINGER_MS + 2);
    store.noteLostInFailover({ resource: "lock:late", token: "l", expiresAt: T + 60_000 }, "not on the replica", T + 10, T + 20 + LINGER_MS + 2);
    expect(store.get("lock:freed", T + 20 + LINGER_MS + 2)?.state).toBe("released");
    expect(store.get("lock:late", T + 20 + LINGER_MS + 2)?.state).toBe("lost");
    expect(store.losses("default", T + 20 + LINGER_MS + 2).map((l) => l.resource)).toEqual(["lock:late"]);
    expect(Object.values(store.counts().byState).every((n) => n >= 0)).toBe(true);
    expect(seen.filter((e) => !e.startsWith("acquired"))).toEqual(["released lock:freed", "released lock:late", "lost lock:late"]);
  });

  it("finds locks at start-up node by node without a made-up extension or a partial step, and still sees a real extension", () => {
    const { store, seen } = storeStarting();
    // Each node's reconcile reads the key at its own moment: their TTL ends disagree by a few hundred ms.
    store.apply("lock:s", [held(0, "v", T + 60_250)], T);
    store.setNodeUp(0, true, T + 1);
    store.apply("lock:s", [held(1, "v", T + 60_000)], T + 2);
    store.tick(T + 2 + SETTLE_MS + 1);
    store.apply("lock:s", [held(2, "v", T + 60_400)], T + 40);
    store.setNodeUp(1, true, T + 41);
    store.setNodeUp(2, true, T + 42);
    store.watching = true;
    store.tick(T + 100);
    expect(store.lock("lock:s", T + 100)).toMatchObject({ state: "held", quorumHeld: 3, expiresAt: T + 60_250 });
    expect(store.get("lock:s", T + 100)?.timeline.map((e) => e.type)).toEqual(["acquired"]);
    // Held before the console started: no acquisition is counted for it.
    expect(seen).toEqual([]);
    expect(store.acquisitions.sum(T + 100, 5_000)).toBe(0);
    // The holder extends it: each node's own TTL end moves.
    store.apply("lock:s", [held(0, "v", T + 90_000), held(1, "v", T + 90_000), held(2, "v", T + 90_000)], T + 200);
    expect(store.get("lock:s", T + 200)?.timeline.map((e) => e.type)).toEqual(["acquired", "extended"]);
    expect(seen).toEqual(["extended lock:s"]);
    // A lock acquired once the console watches counts.
    store.apply("lock:n", [held(0, "n", T + 90_000), held(1, "n", T + 90_000), held(2, "n", T + 90_000)], T + 300);
    expect(seen).toEqual(["extended lock:s", "acquired lock:n"]);
    expect(store.acquisitions.sum(T + 300, 5_000)).toBe(1);
  });

  it("knows which nodes' readings it has while starting, and shares the found locks' first sightings once it watches", () => {
    const { store } = storeStarting();
    const firstSeen: string[] = [];
    store.firstSeen = (resource) => firstSeen.push(resource);
    // A read sent before another reading of the same key was applied (a notification's, or an end seen) is
    // older than what the store has: the reconcile does not apply it.
    const since = store.startApplies;
    store.apply("lock:gone", [gone(0), gone(1), gone(2)], T + 700);
    expect(store.appliedAtStartSince("lock:gone", since)).toBe(true);
    expect(store.appliedAtStartSince("lock:s", since)).toBe(false);
    // Node 0's SCAN found the key and read it on every node at once: one merge, held on all three.
    store.apply("lock:s", [held(0, "v", T + 60_000), held(1, "v", T + 60_000), held(2, "v", T + 60_000)], T + 800);
    expect(store.lock("lock:s", T + 800)).toMatchObject({ state: "held", token: "v", quorumHeld: 3 });
    expect(store.appliedAtStartSince("lock:s", since)).toBe(true);
    // The other nodes' SCANs skip it; a key read on node 1 only is still to be read on the others.
    store.apply("lock:t", [held(1, "w", T + 60_000)], T + 810);
    expect([0, 1, 2].map((node) => store.readAtStart("lock:s", node))).toEqual([true, true, true]);
    expect([0, 1, 2].map((node) => store.readAtStart("lock:t", node))).toEqual([false, true, false]);
    expect(store.readAtStart("lock:unknown", 0)).toBe(false);
    // Node 2's connection dropped: what was read there may be stale, its next SCAN reads every key again.
    store.forgetReadsAtStart(2);
    expect([0, 1, 2].map((node) => store.readAtStart("lock:s", node))).toEqual([true, true, false]);
    // Its first sighting is shared once the console watches, with the others found at start (paced), not
    // one write per lock while the nodes are being read.
    expect(firstSeen).toEqual([]);
    NODES.forEach((_, i) => store.setNodeUp(i, true, T + 900));
    store.watching = true;
    expect(store.readAtStart("lock:s", 0)).toBe(false);
    expect(store.appliedAtStartSince("lock:s", since)).toBe(false);
    expect([...store.foreignHeld()].find((f) => f.resource === "lock:s")).toEqual({ resource: "lock:s", token: "v", seenAt: T + 800, ttlMs: 60_000 - 800 });
    store.apply("lock:later", [held(0, "x", T + 61_000), held(1, "x", T + 61_000), held(2, "x", T + 61_000)], T + 1_000);
    expect(firstSeen).toEqual(["lock:later"]);
  });

  it("sends a lock found while it starts with each node as it was read, not as down", () => {
    const { store } = storeStarting();
    // The watchers are still reading their nodes (none is marked up yet): node 2 does not hold the lock.
    store.apply("lock:r", [held(0, "v", T + 60_000), held(1, "v", T + 60_000), gone(2, null)], T);
    store.tick(T + SETTLE_MS + 1);
    const nodes = [
      { id: "node-0", up: true, token: "v" },
      { id: "node-1", up: true, token: "v" },
      { id: "node-2", up: true, token: null },
    ];
    const sent = store.drain(T + SETTLE_MS + 2, 100, 100).upserts.find((l) => l.resource === "lock:r");
    expect(sent).toMatchObject({ state: "held", quorumHeld: 2, nodes });
    // Once every node is up the console watches: nothing it showed changes, so nothing is sent again.
    NODES.forEach((_, i) => store.setNodeUp(i, true, T + 500));
    store.watching = true;
    expect(store.drain(T + 600, 100, 100).upserts).toEqual([]);
    expect(store.lock("lock:r", T + 600)).toMatchObject({ quorumHeld: 2, nodes });
    // A node that goes down once the console watches is shown down on the locks it held.
    store.setNodeUp(1, false, T + 700);
    expect(store.drain(T + 800, 100, 100).upserts.find((l) => l.resource === "lock:r")?.nodes.map((n) => [n.id, n.up, n.token])).toEqual([
      ["node-0", true, "v"],
      ["node-1", false, null],
      ["node-2", true, null],
    ]);
  });

  it("lists a quorum lock on nodes 1 and 2 found at start-up after node 0 came up empty", () => {
    const { store } = storeStarting();
    store.setNodeUp(0, true, T);
    // Node 1's and node 2's watchers reconcile (read their keys) before they are marked up.
    store.apply("lock:q", [held(1, "v", T + 30_000)], T + 1);
    store.apply("lock:q", [held(2, "v", T + 30_000)], T + 2);
    // Still starting: every node read so far counts (a watcher not marked up yet is starting, not down);
    // node 0 disagrees with the others, so the view settles first.
    store.tick(T + 2 + SETTLE_MS + 1);
    expect(store.lock("lock:q", T + 2 + SETTLE_MS + 1)).toMatchObject({ state: "held", token: "v", quorumHeld: 2 });
    store.setNodeUp(1, true, T + 3);
    store.setNodeUp(2, true, T + 4);
    // (Node 0 disagrees with the others: the view settles first.)
    store.tick(T + 4 + SETTLE_MS + 1);
    const lock = store.lock("lock:q", T + 4 + SETTLE_MS + 1);
    expect(lock).toMatchObject({ state: "held", token: "v", quorumHeld: 2 });
    expect(lock?.unreadable).toBeUndefined();
  });

  it("keeps a lock whose only node went away listed as unreadable, without an end, for as long as it is away", () => {
    const { store, seen } = storeWithNodesUp();
    store.apply("lock:one", [held(0, "v", T + 60_000), gone(1, null), gone(2, null)], T);
    store.tick(T + SETTLE_MS + 1);
    store.setNodeUp(0, false, T + 100);
    for (let t = T + 100; t <= T + 20_000; t += 1_000) store.tick(t);
    expect(store.lock("lock:one", T + 20_000)).toMatchObject({ state: "partial", unreadable: true, quorumHeld: 1 });
    expect(seen).toEqual(["acquired lock:one"]);
    expect(store.drain(T + 20_000, 0, 100).removed).toEqual([]);
    // Back: its reconcile reads the key again, then it counts.
    store.apply("lock:one", [held(0, "v", T + 60_000)], T + 20_001);
    store.setNodeUp(0, true, T + 20_002);
    store.tick(T + 20_002 + SETTLE_MS + 1);
    const back = store.lock("lock:one", T + 20_002 + SETTLE_MS + 1);
    expect(back?.state).toBe("partial");
    expect(back?.unreadable).toBeUndefined();
    expect(seen).toEqual(["acquired lock:one"]);
  });

  it("ends an unreadable lock when its node, back, no longer holds it", () => {
    const { store, seen } = storeWithNodesUp();
    store.apply("lock:back", [held(0, "v", T + 5_000), gone(1, null), gone(2, null)], T);
    store.tick(T + SETTLE_MS + 1);
    store.setNodeUp(0, false, T + 100);
    store.apply("lock:back", [gone(0, null)], T + 10_000);
    expect(store.lock("lock:back", T + 10_000)?.state).toBe("expired");
    expect(seen).toEqual(["acquired lock:back", "expired lock:back"]);
  });

  it("still ends a quorum lock released while a node is down", () => {
    const { store, seen } = storeWithNodesUp();
    store.apply("lock:rq", [held(0, "v", T + 60_000), held(1, "v", T + 60_000), held(2, "v", T + 60_000)], T);
    store.setNodeUp(2, false, T + 10);
    store.apply("lock:rq", [gone(0), gone(1)], T + 20);
    expect(store.lock("lock:rq", T + 20)?.state).toBe("released");
    expect(seen).toEqual(["acquired lock:rq", "released lock:rq"]);
  });

  it("merges a partial lock past its TTL whose nodes are all down once, not on every tick until they are back", () => {
    const { store } = storeWithNodesUp();
    let merges = 0;
    store.declaredScope = () => {
      merges += 1;
      return "quorum";
    };
    const probed: string[] = [];
    store.onProbe = (resources) => probed.push(...resources);
    store.apply("lock:p", [held(0, "v", T + 500), gone(1, null), gone(2, null)], T);
    store.tick(T + SETTLE_MS + 1);
    expect(store.lock("lock:p", T + SETTLE_MS + 1)?.state).toBe("partial");
    NODES.forEach((_, i) => store.setNodeUp(i, false, T + 100));
    merges = 0;
    // Ten seconds of the console's ticks (every 10 ms), its TTL running out half a second in.
    for (let t = T + 110; t <= T + 10_100; t += 10) store.tick(t);
    expect(store.lock("lock:p", T + 10_100)).toMatchObject({ state: "partial", unreadable: true });
    expect({ merges, probed }).toEqual({ merges: 1, probed: [] });
    // Node 0 back, still holding it: merged, and read again (a read expires the key), about once a second.
    store.setNodeUp(0, true, T + 10_100);
    merges = 0;
    for (let t = T + 10_110; t <= T + 20_100; t += 10) store.tick(t);
    expect(probed.length).toBeGreaterThan(0);
    expect(merges).toBeLessThanOrEqual(12);
  });

  it("reads a SETNX-pattern lock left after the expiry time in its value less and less often, each read's answer included", () => {
    const { store } = storeWithNodesUp();
    // The expiry time is in the value (seconds), on keys without a TTL: no read removes them.
    const expiry = T + 2_000;
    const value = String(expiry / 1000);
    const readings = () => [held(0, value, expiry), held(1, value, expiry), held(2, value, expiry)];
    const probedAt: number[] = [];
    store.onProbe = () => probedAt.push(-1);
    store.apply("lock:setnx", readings(), T);
    // Thirty seconds of the console's ticks; each read asked for is answered (the same keys) on the next.
    for (let t = T + 10; t <= T + 32_000; t += 10) {
      store.tick(t);
      if (probedAt.at(-1) === -1) {
        probedAt[probedAt.length - 1] = t - T;
        store.apply("lock:setnx", readings(), t + 2);
      }
    }
    expect(store.lock("lock:setnx", T + 32_000)?.state).toBe("elapsed");
    // A second after it elapsed, then about as long again as it has been elapsed (1, 2, 4, 8 s later, give or take
    // the timer wheel's 100 ms): five reads in thirty seconds, not one every turn of the wheel.
    const gaps = probedAt.slice(1).map((at, i) => at - (probedAt[i] as number));
    expect({ first: probedAt[0], reads: probedAt.length }).toEqual({ first: 3_000, reads: 5 });
    expect(gaps.every((gap, i) => gap >= 1_000 && gap >= 2 * ((gaps[i - 1] ?? 0) - 100))).toBe(true);
  });

  it("keeps one timer per lock however often its lease is renewed", () => {
    const { store } = storeWithNodesUp();
    const leases = 200;
    for (let second = 0; second < 120; second++) {
      const now = T + second * 1_000;
      for (let i = 0; i < leases; i++) {
        const expiry = now + 600_000;
        store.apply(`lock:lease:${i}`, [held(0, `v${i}`, expiry), held(1, `v${i}`, expiry), held(2, `v${i}`, expiry)], now);
      }
      store.tick(now);
    }
    const sizes = store.sizes();
    expect(sizes.live).toBe(leases);
    expect(sizes.wheelEntries).toBe(leases);
  });

  it("does not send the removal of a lock taken again in the frame its ended row leaves the list", () => {
    const { store } = storeWithNodesUp();
    const all = (value: string) => [0, 1, 2].map((node) => held(node, value, T + 60_000));
    store.apply("lock:again", all("v"), T);
    store.apply("lock:again", [gone(0), gone(1), gone(2)], T + 10);
    store.drain(T + 10, 0, 100);
    // The ended row leaves the list, and in the same frame the lock is taken again.
    store.tick(T + 10 + LINGER_MS);
    store.apply("lock:again", all("w"), T + 10 + LINGER_MS);
    const frame = store.drain(T + 10 + LINGER_MS, 0, 100);
    expect(frame.upserts.map((l) => [l.resource, l.state, l.token])).toEqual([["lock:again", "held", "w"]]);
    expect(frame.removed).toEqual([]);
  });

  it("lets many ended locks leave the list in order", () => {
    const { store } = storeWithNodesUp();
    for (let i = 0; i < 1_000; i++) {
      store.apply(`lock:e${i}`, [0, 1, 2].map((node) => held(node, "v", T + 60_000)), T);
      store.apply(`lock:e${i}`, [gone(0), gone(1), gone(2)], T + i);
    }
    store.tick(T + 499 + LINGER_MS);
    expect(store.sizes().lingering).toBe(500);
    store.tick(T + 999 + LINGER_MS);
    expect(store.sizes()).toMatchObject({ lingering: 0, live: 0, recent: 1_000, wheelEntries: 0 });
  });

  it("keeps numbers for no more locks than it holds and keeps, and a lock made in a freed place shows its own times", () => {
    const { store } = storeWithNodesUp();
    const all = (value: string, expiry: number) => [0, 1, 2].map((node) => held(node, value, expiry));
    const ended = RECENT_CAP + 500;
    for (let i = 0; i < ended; i++) {
      store.apply(`lock:gone${i}`, all(`v${i}`, T + 60_000 + i), T);
      store.apply(`lock:gone${i}`, [gone(0), gone(1), gone(2)], T + 1);
    }
    store.apply("lock:kept", all("k", T + 90_000), T + 1);
    store.tick(T + 1 + LINGER_MS);
    // 500 ended locks are no longer kept for their pages: their places are free.
    expect(store.sizes()).toMatchObject({ live: 1, recent: RECENT_CAP, timeSlots: RECENT_CAP + 1 });

    // New locks take freed places, and each shows its own expiry and acquisition, not an ended lock's.
    const now = T + 2 + LINGER_MS;
    for (let i = 0; i < 300; i++) store.apply(`lock:new${i}`, all(`n${i}`, now + 30_000 + i), now);
    expect(store.sizes()).toMatchObject({ live: 301, recent: RECENT_CAP, timeSlots: RECENT_CAP + 301 });
    expect(store.lock("lock:new7", now)).toMatchObject({ state: "held", token: "n7", acquiredAt: now, expiresAt: now + 30_007 });
    // An ended lock taken again leaves the kept ones: one place for it, not two.
    store.apply(`lock:gone${ended - 1}`, all("again", now + 20_000), now);
    expect(store.sizes()).toMatchObject({ live: 302, recent: RECENT_CAP - 1, timeSlots: RECENT_CAP + 301 });
    expect(store.lock(`lock:gone${ended - 1}`, now)).toMatchObject({ state: "held", token: "again", expiresAt: now + 20_000 });
    // Locks no pattern covers any more are gone for good.
    store.retain((resource) => !resource.startsWith("lock:new"));
    expect(store.sizes()).toMatchObject({ live: 2, recent: RECENT_CAP - 1, timeSlots: RECENT_CAP + 1 });
    expect(store.lock("lock:kept", now)).toMatchObject({ state: "held", token: "k", expiresAt: T + 90_000 });
  });
});

describe("the lock store's scope and holder sets", () => {
  const stringReading = (format: "token" | "redis-semaphore", fingerprint: string, expiresAt: number) => ({
    format,
    redisType: format === "token" ? "string" : "zset",
    fingerprint,
    holders: fingerprint.split("\n").map((id) => ({ id })),
    expiresAt,
    keyExpiresAt: expiresAt,
    warnings: [],
    waiters: null,
  });
  const sample = (node: number, format: "token" | "redis-semaphore", value: string, expiry: number): NodeSample => ({
    node,
    reading: stringReading(format, value, expiry),
    value,
    expiry,
    cause: null,
  });
  function store() {
    const s = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>());
    NODES.forEach((_, i) => s.setNodeUp(i, true, T));
    s.watching = true;
    return s;
  }

  it("reads a lock that lives on one node as held, single-instance, and counts it as held", () => {
    const s = store();
    s.apply("lock:one", [sample(0, "token", "t", T + 10_000), gone(1, null), gone(2, null)], T);
    s.tick(T + SETTLE_MS + 1);
    expect(s.lock("lock:one", T + SETTLE_MS + 1)).toMatchObject({ state: "held", scope: "single", quorum: 1, quorumHeld: 1, format: "token" });
    expect(s.counts().held).toBe(1);
  });

  it("keeps a Redlock that loses its keys a quorum lock, so it reads partial", () => {
    const s = store();
    s.apply("lock:r", [0, 1, 2].map((n) => sample(n, "token", "t", T + 10_000)), T);
    expect(s.lock("lock:r", T)).toMatchObject({ state: "held", scope: "quorum", quorum: 2 });
    s.apply("lock:r", [gone(0), gone(1)], T + 100);
    s.tick(T + 100 + SETTLE_MS + 1);
    expect(s.lock("lock:r", T + 100 + SETTLE_MS + 1)).toMatchObject({ state: "partial", scope: "quorum" });
  });

  it("counts live locks that never expire by themselves", async () => {
    const s = store();
    s.apply("lock:forever", [{ ...sample(0, "token", "t", Infinity), reading: { ...stringReading("token", "t", Infinity), warnings: ["no-ttl"] } }, gone(1, null), gone(2, null)], T);
    s.tick(T + SETTLE_MS + 1);
    expect(s.lock("lock:forever", T + SETTLE_MS + 1)?.warnings).toEqual(["no-ttl"]);
    // What the metrics' lockscope_locks_without_ttl says.
    expect((await s.safetyFacts()).withoutTtl).toBe(1);
  });

  it("names every side of a split vote with no side ahead, each with its nodes, in node order, whichever was read last", () => {
    for (const order of [
      [0, 1],
      [1, 0],
    ]) {
      const s = store();
      s.declaredScope = () => "quorum";
      const values = ["worker-a", "worker-b"];
      for (const node of order) s.apply("lock:split", [sample(node, "token", values[node]!, T + 10_000)], T + node);
      s.apply("lock:split", [gone(2, null)], T + 2);
      s.tick(T + SETTLE_MS + 5);
      const lock = s.lock("lock:split", T + SETTLE_MS + 5);
      expect([order, lock?.state, lock?.token, lock?.leading, lock?.holders]).toEqual([
        order,
        "partial",
        null,
        undefined,
        [
          { id: "worker-a", nodes: ["node-0"] },
          { id: "worker-b", nodes: ["node-1"] },
        ],
      ]);
    }
  });

  it("names each holder of a split semaphore once, with every node holding it", () => {
    const s = store();
    s.declaredScope = () => "quorum";
    // No member holds a quorum (2 of 3): `a` and `c` hold one node each, `b` none.
    s.apply("semaphore:split", [sample(1, "redis-semaphore", "c", T + 10_000), sample(0, "redis-semaphore", "a", T + 10_000), gone(2, null)], T);
    s.tick(T + SETTLE_MS + 5);
    const lock = s.lock("semaphore:split", T + SETTLE_MS + 5);
    expect(lock?.state).toBe("partial");
    expect(lock?.holders).toEqual([
      { id: "a", nodes: ["node-0"] },
      { id: "c", nodes: ["node-1"] },
    ]);
  });

  it("lists no nodes beside the holder of a lock a value leads", () => {
    const s = store();
    s.declaredScope = () => "quorum";
    s.apply("lock:led", [sample(0, "token", "worker-a", T + 10_000), sample(1, "token", "worker-a", T + 10_000), sample(2, "token", "worker-b", T + 10_000)], T);
    s.tick(T + SETTLE_MS + 5);
    expect(s.lock("lock:led", T + SETTLE_MS + 5)?.holders).toEqual([{ id: "worker-a" }]);
  });

  it("lets go at once of locks no pattern covers any more", () => {
    const s = store();
    s.apply("jobs/a", [0, 1, 2].map((n) => sample(n, "token", "t", T + 10_000)), T);
    s.drain(T, 0, 100);
    expect(s.retain((k) => k.startsWith("lock:"))).toBe(1);
    expect(s.lock("jobs/a", T)).toBeNull();
    expect(s.drain(T + 1, 0, 100).removed).toEqual(["jobs/a"]);
    expect(s.counts().held).toBe(0);
  });

  it("makes no lock of a reading that answers after a pattern change left its key uncovered", () => {
    const s = store();
    s.covers = (k) => k.startsWith("lock:");
    // A read sent before the change: nothing would end such a lock (no pattern's notifications reach it).
    s.apply("jobs/late", [0, 1, 2].map((n) => sample(n, "token", "t", Infinity)), T);
    expect(s.lock("jobs/late", T)).toBeNull();
    expect(s.counts().held).toBe(0);
    s.apply("lock:covered", [0, 1, 2].map((n) => sample(n, "token", "t", T + 10_000)), T);
    expect(s.lock("lock:covered", T)?.state).toBe("held");
  });
});
