import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { encodeLockValue } from "@lockscope/redlock";
import { decodeReading } from "@/lib/locks/formats";
import type { LockSummary } from "@/lib/locks/groups";
import type { LiveEventMap } from "@/server/live/events";
import { LockStore, type NodeSample } from "@/server/live/store";

const T = 1_800_000_000_000;
const NODES = ["node-0", "node-1", "node-2"];
const TTL = 600_000;
/** How many plain-token locks each store finds held, of which every 50th from the 7th on has no TTL. */
const PLAIN = 300;
const WITHOUT_TTL = 6;

/** Each node's reading of a string value, decoded as the watchers decode it. */
function heldAll(key: string, value: string, pttlMs = TTL, at = T, nodes: readonly number[] = [0, 1, 2]): NodeSample[] {
  return nodes.map((node) => {
    const reading = decodeReading({ key, at, raw: { type: "string", pttlMs, size: value.length, value, extras: {} } }, { now: at });
    if (reading === null) throw new Error(`Expected a reading of ${key}`);
    return { node, reading, value: reading.fingerprint, expiry: reading.expiresAt, cause: null };
  });
}
const goneAll = (cause: NodeSample["cause"] = "del"): NodeSample[] => NODES.map((_, node) => ({ node, value: null, expiry: Number.NaN, cause }));

/**
 * The same locks in two stores, one that keeps locks nothing happens to cold from its first lock on and one that
 * never does: whatever they are asked and told, they must answer alike.
 */
function twins() {
  const engineValue = encodeLockValue({ label: "worker-1", host: "h", pid: 7, fence: null, acquiredAt: T - 5_000 });
  const made = [Number.POSITIVE_INFINITY, 0].map((coldAbove) => {
    const events = new EventEmitter<LiveEventMap>();
    const seen: string[] = [];
    events.on("lock-event", (e) => seen.push(`${e.type} ${e.resource}`));
    const store = new LockStore(NODES, 2, events, coldAbove);
    store.declaredScope = (resource) => (resource.startsWith("lock:single/") ? "single" : "quorum");
    return { store, seen };
  });
  const [hot, cold] = made as [(typeof made)[0], (typeof made)[0]];
  const both = (act: (store: LockStore) => void) => {
    act(hot.store);
    act(cold.store);
  };
  // Found held while the consoles start: plain tokens (some single-node locks, some without a TTL), an engine value,
  // and a lock held on two nodes of three.
  both((store) => {
    for (let i = 0; i < PLAIN; i++) {
      const key = i % 10 === 3 ? `lock:single/${i}` : `lock:orders/${i}`;
      store.apply(key, heldAll(key, `token-${i}`, i % 50 === 7 ? -1 : TTL + i), T, true);
    }
    store.apply("lock:engine", heldAll("lock:engine", engineValue), T, true);
    store.apply("lock:two-of-three", heldAll("lock:two-of-three", "two", TTL, T, [0, 1]), T, true);
    store.apply("lock:short", heldAll("lock:short", "short", 20_000), T, true);
    NODES.forEach((_, i) => store.setNodeUp(i, true, T));
    store.watching = true;
    store.drain(T, 0, Number.MAX_SAFE_INTEGER);
  });
  const tickBoth = (from: number, to: number) => {
    // Ticked and drained as the console does, every 10 ms.
    for (let at = from; at <= to; at += 10) {
      both((store) => {
        store.tick(at);
        store.drain(at, 0, Number.MAX_SAFE_INTEGER);
      });
    }
  };
  tickBoth(T + 10, T + 1_500);
  return { hot, cold, both, tickBoth };
}

const byResource = <L extends { resource: string }>(locks: L[]) => [...locks].sort((a, b) => (a.resource < b.resource ? -1 : 1));
function summaries(store: LockStore, now: number): LockSummary[] {
  const out: LockSummary[] = [];
  store.summaries((s) => out.push({ ...s }), now);
  return byResource(out);
}

describe("the lock store's cold locks", () => {
  it("keeps cold the found locks that are only a plain value held, and answers for them as for locks kept whole", async () => {
    const { hot, cold } = twins();
    const now = T + 2_000;
    // Every plain token with a TTL, single-node or quorum, held on three nodes or two: not the engine value (its
    // reading is decoded, not the value alone), nor the lock whose TTL runs out in 20 s, nor those without a TTL
    // (read again every so often).
    const COLD = PLAIN + 1 - WITHOUT_TTL;
    expect(cold.store.sizes()).toMatchObject({ live: PLAIN + 3, cold: COLD });
    expect(hot.store.sizes()).toMatchObject({ live: PLAIN + 3, cold: 0 });
    expect(byResource(cold.store.list(now))).toEqual(byResource(hot.store.list(now)));
    expect(summaries(cold.store, now)).toEqual(summaries(hot.store, now));
    expect(cold.store.counts()).toEqual(hot.store.counts());
    expect(cold.store.resources().sort()).toEqual(hot.store.resources().sort());
    expect((await cold.store.knownOn(2)).sort()).toEqual((await hot.store.knownOn(2)).sort());
    // In slices of 25 with the event loop free between them, and only those asked for.
    const single = (resource: string) => resource.startsWith("lock:single/");
    expect((await cold.store.knownOn(2, single, 25)).sort()).toEqual((await hot.store.knownOn(2)).filter(single).sort());
    expect((await cold.store.knownOn(2, single, 25)).length).toBe(PLAIN / 10);
    expect(new Map([...cold.store.heldOn(1)].sort())).toEqual(new Map([...hot.store.heldOn(1)].sort()));
    expect(await cold.store.safetyFacts()).toEqual(await hot.store.safetyFacts());
    expect(byResource([...cold.store.foreignHeld()])).toEqual(byResource([...hot.store.foreignHeld()]));
    for (const resource of ["lock:orders/0", "lock:single/13", "lock:orders/7", "lock:two-of-three", "lock:engine", "lock:none"]) {
      expect(cold.store.lock(resource, now)).toEqual(hot.store.lock(resource, now));
      expect(cold.store.holdsValue(resource, "token-0")).toBe(hot.store.holdsValue(resource, "token-0"));
    }
    // Read, not warmed.
    expect(cold.store.sizes().cold).toBe(COLD);
    // A lock's page makes up its timeline: warmed, with the same timeline.
    expect(cold.store.get("lock:orders/1", now)).toEqual(hot.store.get("lock:orders/1", now));
    expect(cold.store.sizes().cold).toBe(COLD - 1);
  });

  it("ends, extends and hands over a cold lock as a whole one, with the same events and timeline", () => {
    const { hot, cold, both } = twins();
    both((store) => {
      store.apply("lock:orders/1", goneAll("del"), T + 2_000);
      store.apply("lock:orders/2", heldAll("lock:orders/2", "token-2", TTL * 2, T + 2_000), T + 2_000);
      store.apply("lock:orders/4", heldAll("lock:orders/4", "next-holder", TTL, T + 2_000), T + 2_000);
      store.apply("lock:orders/5", [{ node: 0, value: null, expiry: Number.NaN, cause: "del" }], T + 2_000);
    });
    expect(cold.seen).toEqual(hot.seen);
    expect(cold.seen).toEqual(expect.arrayContaining(["released lock:orders/1", "acquired lock:orders/4"]));
    for (const resource of ["lock:orders/1", "lock:orders/2", "lock:orders/4", "lock:orders/5"]) {
      expect(cold.store.get(resource, T + 2_100)).toEqual(hot.store.get(resource, T + 2_100));
    }
    expect(cold.store.drain(T + 2_100, 0, 1_000)).toEqual(hot.store.drain(T + 2_100, 0, 1_000));
  });

  it("wakes a cold lock in time for its TTL to run out as a whole one's does, with no notification", () => {
    const { hot, cold, tickBoth } = twins();
    // lock:orders/0's TTL ends at T + TTL: it must show elapsed then in both, though nothing told either store.
    tickBoth(T + TTL - 6_000, T + TTL + 1_500);
    const now = T + TTL + 1_500;
    expect(hot.store.lock("lock:orders/0", now)?.state).toBe("elapsed");
    expect(byResource(cold.store.list(now))).toEqual(byResource(hot.store.list(now)));
    expect(cold.seen).toEqual(hot.seen);
  });

  it("follows a node going down and the patterns narrowing for its cold locks as for whole ones", () => {
    const { hot, cold, both } = twins();
    const now = T + 3_000;
    both((store) => store.setNodeUp(1, false, now));
    expect(byResource(cold.store.list(now))).toEqual(byResource(hot.store.list(now)));
    both((store) => store.markGap(1, 2_000, now));
    expect(cold.store.get("lock:orders/8", now)).toEqual(hot.store.get("lock:orders/8", now));
    both((store) => store.setNodeUp(1, true, now));
    const dropped = [hot, cold].map(({ store }) => store.retain((resource) => !resource.startsWith("lock:single/")));
    expect(dropped[1]).toBe(dropped[0]);
    expect(dropped[0]).toBe(PLAIN / 10);
    expect(byResource(cold.store.list(now))).toEqual(byResource(hot.store.list(now)));
    expect(cold.store.counts()).toEqual(hot.store.counts());
  });

  it("visits every lock once in a pass that yields between slices, while cold locks are warmed and changed behind and ahead of it", async () => {
    const { cold } = twins();
    const visits = new Map<string, number>();
    let slices = 0;
    const pass = cold.store.summariesInSlices((s) => {
      visits.set(s.resource, (visits.get(s.resource) ?? 0) + 1);
    }, 25);
    // Between slices: a lock the pass may have visited and one it has not yet, each extended (so warmed).
    const touch = () => {
      slices += 1;
      const at = T + 3_000 + slices;
      for (const i of [slices, PLAIN - slices]) {
        const key = i % 10 === 3 ? `lock:single/${i}` : `lock:orders/${i}`;
        cold.store.apply(key, heldAll(key, `token-${i}`, TTL * 2, at), at);
      }
      if (slices < 20) setImmediate(touch);
    };
    setImmediate(touch);
    await pass;
    expect(slices).toBeGreaterThan(5);
    expect(visits.size).toBe(PLAIN + 3);
    expect([...visits.values()].every((n) => n === 1)).toBe(true);
  });

  it("keeps the locks it finds cold as it merges them while the console starts, and sends them to a stream open meanwhile", () => {
    const made = [Number.POSITIVE_INFINITY, 0].map((coldAbove) => {
      const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>(), coldAbove);
      const before = store.startApplies;
      for (let i = 0; i < 100; i++) store.apply(`lock:orders/${i}`, heldAll(`lock:orders/${i}`, `token-${i}`), T, true);
      // A stream opened while the console starts: every lock found so far is sent, whole or cold.
      const sent = store.drain(T, 0, Number.MAX_SAFE_INTEGER).upserts;
      return { store, before, sent };
    });
    const [hot, cold] = made as [(typeof made)[0], (typeof made)[0]];
    expect(hot.store.sizes()).toMatchObject({ live: 100, cold: 0 });
    expect(cold.store.sizes()).toMatchObject({ live: 100, cold: 100 });
    expect(cold.sent).toHaveLength(100);
    expect(byResource(cold.sent)).toEqual(byResource(hot.sent));
    // A read sent before a lock's readings were applied is older than what the store has, cold or whole: not applied.
    for (const { store, before } of [hot, cold]) {
      expect(store.appliedAtStartSince("lock:orders/5", before)).toBe(true);
      expect(store.appliedAtStartSince("lock:orders/5", store.startApplies)).toBe(false);
      expect(store.applyUnlessStale("lock:orders/5", goneAll(), before, T + 1)).toBe(false);
      expect(store.lock("lock:orders/5", T + 1)?.state).toBe("held");
    }
    expect(cold.store.sizes().cold).toBe(99);
  });

  it("meets every lock once in a pass that yields between slices while the console starts and finds more", async () => {
    // The first 50 locks found stay whole (below `coldAbove`), the rest are kept cold as they are found.
    const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>(), 50);
    const FOUND = 200;
    const found = (key: string) => store.apply(key, heldAll(key, `token-${key}`), T, true);
    for (let i = 0; i < FOUND; i++) found(`lock:orders/${i}`);
    expect(store.sizes()).toMatchObject({ live: FOUND, cold: FOUND - 49 });
    let rounds = 0;
    // As the pass meets locks, other nodes' reads come in: more locks found, locks made whole and read again, and, once
    // the pass is among the whole ones, those read again (each could now be kept cold).
    const pass = store.knownOn(
      0,
      (resource) => {
        if (resource === "lock:orders/100" || resource === "lock:orders/0") {
          rounds += 1;
          for (let j = 0; j < 10; j++) found(`lock:more/${rounds}-${j}`);
        }
        if (resource === "lock:orders/100") {
          // Reads older than what the store has (not applied, each lock made whole again), behind the pass and ahead
          // of it; then the one behind read again.
          for (const key of ["lock:orders/50", "lock:orders/150"]) expect(store.applyUnlessStale(key, heldAll(key, `token-${key}`), 0, T)).toBe(false);
          found("lock:orders/50");
        }
        if (resource === "lock:orders/0") for (let i = 1; i < 49; i++) found(`lock:orders/${i}`);
        return true;
      },
      10,
    );
    const known = await pass;
    expect(rounds).toBe(2);
    expect(known.length - new Set(known).size).toBe(0);
    for (let i = 0; i < FOUND; i++) expect(known).toContain(`lock:orders/${i}`);
  });

  it("keeps whole the locks taken while it watches, and tells a cold lock's extension as a whole one's", () => {
    const { hot, cold, both, tickBoth } = twins();
    const COLD = cold.store.sizes().cold;
    both((store) => {
      store.apply("lock:taken", heldAll("lock:taken", "t", 3_600_000, T + 2_000), T + 2_000);
      store.apply("lock:orders/9", heldAll("lock:orders/9", "token-9", TTL * 2, T + 2_000), T + 2_000);
    });
    expect(cold.store.sizes().cold).toBe(COLD - 1);
    expect(cold.store.drain(T + 2_000, 0, 1_000)).toEqual(hot.store.drain(T + 2_000, 0, 1_000));
    tickBoth(T + 2_010, T + 3_000);
    expect(cold.store.sizes().cold).toBeLessThanOrEqual(COLD);
    for (const resource of ["lock:taken", "lock:orders/9"]) expect(cold.store.get(resource, T + 3_000)).toEqual(hot.store.get(resource, T + 3_000));
    expect(cold.seen).toEqual(hot.seen);
  });
});

describe("the lock store's changes of many locks at once", () => {
  /** Locks found held on every node, kept cold, in a store that merges a change of many at once and one that goes on in slices. */
  const MANY = 25_000;
  function twinsOfMany() {
    const [atOnce, sliced] = [Number.POSITIVE_INFINITY, 0].map((sweepAtOnce) => {
      const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>(), 0, sweepAtOnce);
      for (let i = 0; i < MANY; i++) store.apply(`lock:orders/${i}`, heldAll(`lock:orders/${i}`, `token-${i}`), T, true);
      NODES.forEach((_, i) => store.setNodeUp(i, true, T));
      store.watching = true;
      // Ticked and drained as the console does, every 10 ms (a lock waiting to be sent stays whole).
      for (let at = T + 10; store.sizes().cold < MANY && at < T + 10_000; at += 10) {
        store.tick(at);
        store.drain(at, 0, Number.MAX_SAFE_INTEGER);
      }
      expect(store.sizes().cold).toBe(MANY);
      return store;
    }) as [LockStore, LockStore];
    return { atOnce, sliced };
  }

  it("answers at once when two of three nodes go down with many locks held, and merges the rest over its ticks as if at once", () => {
    const { atOnce, sliced } = twinsOfMany();
    const now = T + 20_000;
    for (const store of [atOnce, sliced]) {
      store.setNodeUp(1, false, now);
      store.setNodeUp(2, false, now);
    }
    expect(atOnce.counts().byState.partial).toBe(MANY);
    // The rest of the merge is left to the ticks; every lock shows the nodes as they are now meanwhile.
    expect(sliced.counts().byState.partial).toBeLessThan(MANY);
    const shown = sliced.lock(`lock:orders/${MANY - 1}`, now);
    expect(shown?.nodes.map((n) => n.up)).toEqual([true, false, false]);
    // Meanwhile one lock not merged yet is released, and a watcher's gap is marked.
    for (const store of [atOnce, sliced]) {
      store.apply(`lock:orders/${MANY - 2}`, goneAll(), now + 5);
      store.markGap(0, 1_500, now + 5);
    }
    // Until every lock is merged, and the gap marked on every lock held (after the merge, in the order they came).
    const sampled = [`lock:orders/0`, `lock:orders/${MANY / 2}`, `lock:orders/${MANY - 1}`];
    const done = (t: number) =>
      sliced.counts().byState.partial + sliced.counts().byState.released === MANY && sampled.every((r) => sliced.get(r, t)?.timeline.some((e) => e.type === "gap"));
    let at = now + 10;
    for (; !done(at) && at < now + 60_000; at += 10) sliced.tick(at);
    atOnce.tick(at);
    expect(sliced.counts()).toEqual(atOnce.counts());
    expect(sliced.counts().byState).toMatchObject({ partial: MANY - 1, released: 1 });
    for (const resource of [...sampled, `lock:orders/${MANY - 2}`]) {
      const [a, s] = [atOnce.get(resource, at), sliced.get(resource, at)];
      expect(s?.state).toBe(a?.state);
      expect(s?.quorumHeld).toBe(a?.quorumHeld);
      expect(s?.timeline.map((e) => `${e.type} ${e.node ?? ""}`)).toEqual(a?.timeline.map((e) => `${e.type} ${e.node ?? ""}`));
    }
    expect(sliced.get("lock:orders/0", at)?.timeline.some((e) => e.type === "gap" && e.node === "node-0")).toBe(true);
  });

  it("comes out of a node that goes down and up again while the merge is still going with every lock held on all three", () => {
    const { atOnce, sliced } = twinsOfMany();
    const now = T + 20_000;
    for (const store of [atOnce, sliced]) {
      store.setNodeUp(1, false, now);
      store.setNodeUp(2, false, now);
      store.setNodeUp(2, true, now + 1);
      store.setNodeUp(1, true, now + 2);
    }
    let at = now + 10;
    for (let i = 0; i < 6_000 && (sliced.counts().held < MANY || sliced.lock("lock:orders/0", at)?.quorumHeld !== 3); i++, at += 10) sliced.tick(at);
    atOnce.tick(at);
    expect(sliced.counts()).toEqual(atOnce.counts());
    expect(sliced.counts().held).toBe(MANY);
    for (const i of [0, MANY / 2, MANY - 1]) expect(sliced.lock(`lock:orders/${i}`, at)?.quorumHeld).toBe(3);
  });
});
