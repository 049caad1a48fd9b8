import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { lockSafetyCounts } from "@/lib/safety-signals";
import { isLabResource } from "@/lib/lab/keys";
import type { LockSummary } from "@/lib/locks/groups";
import type { LiveEventMap } from "@/server/live/events";
import { LockStore, SETTLE_MS, type NodeSample } from "@/server/live/store";

const T = 1_800_000_000_000;
const NODES = ["node-0", "node-1", "node-2"];

/** A seeded generator: a failing sequence can be replayed. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function watchingStore(): LockStore {
  const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>());
  NODES.forEach((_, i) => store.setNodeUp(i, true, T));
  store.watching = true;
  return store;
}

/** What a scrape used to compute with a pass over every lock: the reference the ledger must agree with. */
function byPass(store: LockStore, now: number) {
  const locks: Array<Pick<LockSummary, "resource" | "state" | "expiresAt" | "acquiredAt"> & { unreadable: boolean }> = [];
  store.summaries((s) => locks.push({ resource: s.resource, state: s.state, expiresAt: s.expiresAt, acquiredAt: s.acquiredAt, unreadable: store.lock(s.resource, now)?.unreadable === true }), now);
  let oldestHeldAt: number | null = null;
  for (const l of locks) {
    if (l.state === "elapsed" && l.unreadable) continue;
    if ((l.state === "held" || l.state === "elapsed") && l.acquiredAt !== null && (oldestHeldAt === null || l.acquiredAt < oldestHeldAt)) oldestHeldAt = l.acquiredAt;
  }
  return { ...lockSafetyCounts(locks, isLabResource), oldestHeldAt };
}

const sample = (node: number, value: string | null, expiry: number, cause: NodeSample["cause"] = null): NodeSample => ({ node, value, expiry: value === null ? Number.NaN : expiry, cause });

describe("the safety ledger (what /metrics exports of the locks, kept as they change)", () => {
  it("agrees with a pass over every lock after each of thousands of random changes", async () => {
    for (const seed of [1, 2, 3]) {
      const next = random(seed);
      const store = watchingStore();
      const keys = Array.from({ length: 40 }, (_, i) => (i % 8 === 0 ? `lock:lab:rmx000000${String(i).padStart(4, "0")}:stock` : `lock:k${i}`));
      let now = T;
      let token = 0;
      for (let step = 0; step < 1_500; step++) {
        now += Math.floor(next() * 400);
        const key = keys[Math.floor(next() * keys.length)] as string;
        const roll = next();
        if (roll < 0.45) {
          // Acquired on some nodes: a TTL of 0.1 to 3 s, or none.
          const value = `v${token++}`;
          const expiry = next() < 0.15 ? Infinity : now + 100 + Math.floor(next() * 3_000);
          const nodes = NODES.map((_, i) => i).filter(() => next() < 0.7);
          store.apply(key, NODES.map((_, i) => (nodes.includes(i) ? sample(i, value, expiry) : sample(i, null, 0))), now);
        } else if (roll < 0.7) {
          store.apply(key, NODES.map((_, i) => sample(i, null, 0, next() < 0.5 ? "del" : "expired")), now);
        } else if (roll < 0.75) {
          store.noteForceRelease(key, {}, now);
        } else if (roll < 0.78) {
          const dropped = keys[Math.floor(next() * keys.length)] as string;
          store.retain((k) => k !== dropped);
        } else if (roll < 0.81) {
          // A node goes down or comes back: the locks only it holds read unreadable meanwhile.
          store.setNodeUp(Math.floor(next() * NODES.length), next() < 0.5, now);
        } else if (roll < 0.83) {
          const lock = store.lock(key, now);
          if (lock?.token) store.adoptFirstSeen(key, lock.token, now - Math.floor(next() * 100_000));
        } else {
          now += SETTLE_MS + Math.floor(next() * 2_000);
          store.tick(now);
        }
        const { oldestHeldAt, ...counts } = await store.safetyFacts();
        expect({ ...counts, oldestHeldAt }, `seed ${seed}, step ${step}`).toEqual(byPass(store, now));
      }
    }
  });

  it("finds the next oldest lock once the oldest is released", async () => {
    const store = watchingStore();
    const all = (value: string, expiry: number) => NODES.map((_, i) => sample(i, value, expiry));
    store.apply("lock:old", all("a", T + 60_000), T);
    store.apply("lock:mid", all("b", T + 60_000), T + 1_000);
    store.apply("lock:lab:rmx00000000abc:stock", all("c", T + 60_000), T - 5_000);
    expect(await store.safetyFacts()).toMatchObject({ oldestAcquiredAt: T, oldestHeldAt: T - 5_000 });
    store.apply("lock:old", NODES.map((_, i) => sample(i, null, 0, "del")), T + 2_000);
    expect(await store.safetyFacts()).toMatchObject({ oldestAcquiredAt: T + 1_000, oldestHeldAt: T - 5_000 });
    store.apply("lock:lab:rmx00000000abc:stock", NODES.map((_, i) => sample(i, null, 0, "del")), T + 3_000);
    expect(await store.safetyFacts()).toMatchObject({ oldestAcquiredAt: T + 1_000, oldestHeldAt: T + 1_000 });
  });

  it("keeps the counts exact while a pass finds the oldest, with locks changing between its slices", async () => {
    const store = watchingStore();
    for (let i = 0; i < 30_000; i++) store.apply(`lock:k${i}`, NODES.map((_, n) => sample(n, `v${i}`, T + 600_000)), T + i);
    // The oldest leaves: the next read passes over the 30,000 locks in slices of 5,000.
    store.apply("lock:k0", NODES.map((_, i) => sample(i, null, 0, "del")), T + 40_000);
    const read = store.safetyFacts();
    // Meanwhile (between slices): the 200 next oldest leave too, whichever the first slice found (a slice is a
    // sixth of the locks: its oldest is among them), and a lock without a TTL comes.
    await new Promise<void>((resolve) => setImmediate(resolve));
    for (let i = 1; i <= 200; i++) store.apply(`lock:k${i}`, NODES.map((_, n) => sample(n, null, 0, "del")), T + 40_001);
    store.apply("lock:forever", NODES.map((_, i) => sample(i, "f", Infinity)), T + 40_002);
    const facts = await read;
    expect(facts.oldestAcquiredAt).toBe(T + 201);
    expect(await store.safetyFacts()).toEqual({ ...byPass(store, T + 40_002) });
    expect(facts.withoutTtl).toBe(1);
  });

  it("stays exact when the oldest keeps leaving while it is looked for", async () => {
    const store = watchingStore();
    for (let i = 0; i < 30_000; i++) store.apply(`lock:k${i}`, NODES.map((_, n) => sample(n, `v${i}`, T + 600_000)), T + i);
    store.apply("lock:k0", NODES.map((_, i) => sample(i, null, 0, "del")), T + 40_000);
    let done = false;
    const read = store.safetyFacts().then((facts) => {
      done = true;
      return facts;
    });
    // Between every two slices of every pass, the 150 oldest left go: whatever a pass found leaves before it ends.
    let next = 1;
    while (!done) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (done) break;
      for (const end = next + 150; next < end; next++) store.apply(`lock:k${next}`, NODES.map((_, i) => sample(i, null, 0, "del")), T + 40_000);
    }
    expect(next).toBeGreaterThan(1_000);
    const facts = await read;
    expect(facts.oldestAcquiredAt).toBe(T + next);
    expect(facts).toEqual(byPass(store, T + 40_000));
  });
});
