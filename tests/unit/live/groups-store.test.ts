import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { decodeLockValue, encodeLockValue } from "@lockscope/redlock";
import { hashOf } from "@/lib/locks/key-bits";
import type { LiveEventMap } from "@/server/live/events";
import { LockGroups } from "@/server/live/groups";
import { LINGER_MS, LockStore, type NodeSample } from "@/server/live/store";

const T = 1_800_000_000_000;
const NODES = ["node-0", "node-1", "node-2"];
/** A string value's reading as the formats decode it: this engine's value, else a plain token. */
const readingOf = (value: string, expiry: number): NodeSample["reading"] => ({
  format: decodeLockValue(value) ? "lockscope" : "token",
  redisType: "string",
  fingerprint: value,
  holders: [{ id: value }],
  expiresAt: expiry,
  keyExpiresAt: expiry,
  warnings: [],
  waiters: null,
});
const heldAll = (value: string, expiry = T + 600_000): NodeSample[] => NODES.map((_, node) => ({ node, reading: readingOf(value, expiry), value, expiry, cause: null }));
const goneAll = (): NodeSample[] => NODES.map((_, node) => ({ node, value: null, expiry: Number.NaN, cause: "del" }));

function setUp() {
  const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>());
  store.declaredScope = () => "quorum";
  NODES.forEach((_, i) => store.setNodeUp(i, true, T));
  store.watching = true;
  const groups = new LockGroups(store, /^lock:([^/]+)/, (listener) => (store.onListed = listener));
  return { store, groups };
}

describe("the grouped view over the lock store", () => {
  it("counts and lists a lock once when it ends and is taken again while a pass over the locks runs", async () => {
    const { store, groups } = setUp();
    // 2,100 locks of one shard of the store's map: a pass's first slice (2,000) stops in the middle of it, after the first lock.
    const shard = hashOf("lock:orders/0") & 63;
    const keys: string[] = [];
    for (let i = 0; keys.length < 2_100; i++) if ((hashOf(`lock:orders/${i}`) & 63) === shard) keys.push(`lock:orders/${i}`);
    for (const key of keys) store.apply(key, heldAll(`v-${key}`), T);
    const first = keys[0] as string;
    /** Between two slices of a pass: the first lock (visited already) ends, leaves the list, and is taken again. */
    const againBehindThePass = (at: number) => {
      store.apply(first, goneAll(), at);
      store.tick(at + LINGER_MS + 10);
      expect(store.lock(first, at + LINGER_MS + 10)).toBeNull();
      store.apply(first, heldAll("v2"), at + LINGER_MS + 20);
    };
    const now = T + 60_000;

    const rows = groups.groups({ sort: "group", order: "asc", offset: 0, limit: 10 }, now);
    againBehindThePass(T + 100);
    expect(await rows).toMatchObject({ locks: 2_100, groups: [{ group: "orders", locks: 2_100, held: 2_100 }] });

    const byTtl = groups.page({ group: "orders", sort: "ttl", order: "asc", offset: 0, limit: 1_000 }, now);
    againBehindThePass(T + 10_000);
    expect((await byTtl).total).toBe(2_100);

    // The group's order by name is kept from then on: a lock counted twice there would stay twice.
    const byName = { group: "orders", sort: "resource" as const, order: "asc" as const, offset: 0, limit: 1_000 };
    const kept = groups.page(byName, now);
    againBehindThePass(T + 20_000);
    await kept;
    const later = now + 120_000;
    const listed: string[] = [];
    for (let offset = 0; offset < 3_000; offset += 1_000) listed.push(...(await groups.page({ ...byName, offset }, later)).locks.map((l) => l.resource));
    expect(listed).toHaveLength(2_100);
    expect(listed.filter((r) => r === first)).toHaveLength(1);
  });

  it("searches the holder as the table shows it, not the value's encoding", async () => {
    const { store, groups } = setUp();
    const value = (label: string, host: string) => encodeLockValue({ label, host, pid: 42, fence: null, acquiredAt: T });
    store.apply("lock:jobs/a", heldAll(value("checkout worker", "café-1")), T);
    store.apply("lock:jobs/b", heldAll(value("billing/nightly", "web-2")), T);
    store.apply("lock:jobs/c", heldAll("a-foreign-token-lk1"), T);
    const found = async (q: string) => (await groups.page({ q, sort: "resource", order: "asc", offset: 0, limit: 100 }, T + 1_000)).locks.map((l) => l.resource);
    expect(await found("checkout worker")).toEqual(["lock:jobs/a"]);
    expect(await found("CAFÉ")).toEqual(["lock:jobs/a"]);
    expect(await found("billing/nightly (web-2 pid 42)")).toEqual(["lock:jobs/b"]);
    // What only the encoding holds (the value's prefix, a percent escape) finds nothing; a foreign value is searched as held.
    expect(await found("%20")).toEqual([]);
    expect(await found("lk1")).toEqual(["lock:jobs/c"]);
    expect(await found("jobs/b")).toEqual(["lock:jobs/b"]);
  });
});

describe("paging past lock keys longer than a URL", () => {
  // Keys of 20,000 characters, two beginning alike far past where a `next` could cut them, among short ones.
  const long = `lock:long/b-${"é".repeat(20_000)}`;
  const keys = ["lock:long/a", long, `${long}y`, `${long}z`, "lock:long/c"];

  it("gives a `next` on every page that `after` takes back, so the table reaches the end, by any sort and order", async () => {
    const { after } = await import("@/server/live/paging-query");
    const { store, groups } = setUp();
    // TTLs rise with the name: by TTL the order is the keys' own.
    keys.forEach((key, i) => store.apply(key, heldAll(`v-${i}`, T + 600_000 + i * 1_000), T));
    const now = T + 1_000;
    for (const [query, order] of [
      [{ group: "long", sort: "resource", order: "asc" }, keys],
      [{ group: "long", sort: "resource", order: "desc" }, [...keys].reverse()],
      [{ group: "long", sort: "ttl", order: "asc" }, keys],
      [{ q: "lock:long/", sort: "resource", order: "desc" }, [...keys].reverse()],
    ] as const) {
      const shown: string[] = [];
      let page = await groups.page({ ...query, offset: 0, limit: 1 }, now);
      shown.push(...page.locks.map((l) => l.resource));
      while (page.next !== null && shown.length <= keys.length) {
        // As the table sends it back: in the URL, through the route's own check.
        const given = after.safeParse(page.next);
        expect([query, page.next.length <= 16_000, given.success]).toEqual([query, true, true]);
        page = await groups.page({ ...query, offset: 0, limit: 1, after: given.data! }, now);
        shown.push(...page.locks.map((l) => l.resource));
      }
      expect([query, shown.map((k) => k.slice(-2))]).toEqual([query, order.map((k) => k.slice(-2))]);
    }
  });

  it("goes on from the keys beginning as a long key did where that key left the list meanwhile, passing none over", async () => {
    const { after } = await import("@/server/live/paging-query");
    const { store, groups } = setUp();
    keys.forEach((key, i) => store.apply(key, heldAll(`v-${i}`), T));
    const now = T + 1_000;
    const first = await groups.page({ group: "long", sort: "resource", order: "asc", offset: 0, limit: 2 }, now);
    expect(first.locks.map((l) => l.resource)).toEqual(keys.slice(0, 2));
    store.apply(long, goneAll(), now);
    store.tick(now + LINGER_MS + 10);
    const rest = await groups.page({ group: "long", sort: "resource", order: "asc", offset: 0, limit: 10, after: after.parse(first.next) }, now + LINGER_MS + 10);
    expect(rest.locks.map((l) => l.resource.slice(-2))).toEqual(keys.slice(2).map((k) => k.slice(-2)));
  });
});
