import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LocksModule from "@/app/api/locks/route";
import type { LocksPage } from "@/lib/locks/groups";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";
import { call, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/** Longer than any URL a browser and the console's server pass: the key a page may end on must not end the table. */
const LONG = `lock:longkey/b-${"x".repeat(20_000)}`;
/** A key that begins as the long one does, and goes on past where a `next` could cut it. */
const LONG_TWIN = `lock:longkey/b-${"x".repeat(20_000)}y`;
const KEYS = ["lock:longkey/a-1", "lock:longkey/a-2", LONG, LONG_TWIN, "lock:longkey/c-1", "lock:longkey/c-2"];

/**
 * A viewer scrolling a group whose rows include a key tens of thousands of characters long: each page's `next`
 * is taken back as `after`, whatever the key the page ended on, and the table reaches the end.
 */
describe("paging past a very long lock key", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let locks: typeof LocksModule;

  const get = (query: string) => call(locks.GET, "GET", `/api/locks?${query}`, { token: VIEWER_TOKEN });
  const page = async (query: string): Promise<LocksPage> => {
    const res = await get(query);
    expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(200);
    return res.body as LocksPage;
  };

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    clients = cluster.clients();
    locks = await import("@/app/api/locks/route");
    await startLiveReconciled();
    // TTLs rise with the name: by TTL the order is the keys' own.
    for (const [i, key] of KEYS.entries()) await Promise.all(clients.map((c) => c.set(key, `token-${i}`, "PX", 600_000 + i * 10_000)));
    await until("every lock listed", async () => (await page("group=lock:longkey&limit=1")).total === KEYS.length, 15_000, 50);
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  /** The resources of every page, read one row at a time from each page's `next`, as the table scrolls. */
  async function scroll(query: string): Promise<string[]> {
    const shown: string[] = [];
    let body = await page(`${query}&limit=1`);
    shown.push(...body.locks.map((l) => l.resource));
    while (body.next !== null && shown.length <= KEYS.length) {
      // What the table sends: the whole `next` in the URL (the server refuses a request line past about 16 KiB).
      expect(body.next.length).toBeLessThanOrEqual(16_000);
      body = await page(`${query}&limit=1&after=${encodeURIComponent(body.next)}`);
      shown.push(...body.locks.map((l) => l.resource));
    }
    return shown;
  }

  it("by resource, either way: every lock once, in order", async () => {
    expect(await scroll("group=lock:longkey&sort=resource&order=asc")).toEqual(KEYS);
    expect(await scroll("group=lock:longkey&sort=resource&order=desc")).toEqual([...KEYS].reverse());
  });

  it("by TTL, and a search (the list sorted for the query): every lock once, in order", async () => {
    expect(await scroll("group=lock:longkey&sort=ttl&order=asc")).toEqual(KEYS);
    expect(await scroll("q=lock:longkey&sort=resource&order=desc")).toEqual([...KEYS].reverse());
  });

  it("refuses what is not a `next` with a 400 that says what to give", async () => {
    for (const after of ["not-a-cursor!", Buffer.from('[null,"x",null,"resource","short"]').toString("base64url"), "A".repeat(16_001)]) {
      const res = await get(`group=lock:longkey&limit=1&after=${encodeURIComponent(after)}`);
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body)).toContain("`next` of a page");
    }
  });
});
