import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LocksModule from "@/app/api/locks/route";
import type { LocksPage } from "@/lib/locks/groups";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";
import { call, lockDetail, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/** Locks held from before the scroll to after it: each must be seen once, in order. */
const STAYING = 24;
const PAGE = 8;
const pad = (i: number) => String(i).padStart(2, "0");

/**
 * A viewer scrolling one group's table page by page while locks come and go ahead of where they are: the pages
 * follow one another as the table reads them (each from where the last one ended, `next`), so no lock is shown
 * twice and none that stayed held is skipped.
 */
describe("paging a group's locks while they churn", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let locks: typeof LocksModule;

  const page = async (query: string): Promise<LocksPage & { next?: string | null }> => {
    const res = await call(locks.GET, "GET", `/api/locks?${query}`, { token: VIEWER_TOKEN });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as LocksPage & { next?: string | null };
  };
  const setAll = (resource: string, ttlMs: number) => Promise.all(clients.map((c) => c.set(resource, `token-${resource}`, "PX", ttlMs)));
  const delAll = (resource: string) => Promise.all(clients.map((c) => c.del(resource)));

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    clients = cluster.clients();
    locks = await import("@/app/api/locks/route");
    await startLiveReconciled();
    // TTLs rise with the name: by resource and by TTL the order is the same.
    for (let i = 0; i < STAYING; i++) await setAll(`lock:churn/s-${pad(i)}`, 600_000 + i * 1_000);
    await until("every staying lock listed", async () => (await page("group=lock:churn&limit=1")).total === STAYING, 15_000, 50);
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  /**
   * Reads the group as the table scrolls it, page after page, and returns the resources shown. Before the second
   * page three locks are taken ahead of the viewer's place (they sort before every staying lock); before the third
   * they are let go and leave the list.
   */
  async function scroll(query: string, tag: string): Promise<string[]> {
    const shown: string[] = [];
    let body = await page(`${query}&offset=0&limit=${PAGE}`);
    shown.push(...body.locks.map((l) => l.resource));
    for (let step = 1; shown.length < STAYING + 6 && body.locks.length > 0; step++) {
      if (step === 1) {
        for (let n = 0; n < 3; n++) await setAll(`lock:churn/a-${tag}-${n}`, 300_000);
        for (let n = 0; n < 3; n++) await until("the new lock listed", async () => (await lockDetail(`lock:churn/a-${tag}-${n}`))?.state === "held");
        await until("the list counts them", async () => (await page(`${query}&offset=0&limit=1`)).total === STAYING + 3, 15_000, 100);
      } else if (step === 2) {
        for (let n = 0; n < 3; n++) await delAll(`lock:churn/a-${tag}-${n}`);
        await until("the list no longer counts them", async () => (await page(`${query}&offset=0&limit=1`)).total === STAYING, 20_000, 100);
      }
      // As the table goes on: from where the page before ended (by offset before the console gave `next`).
      const from = body.next !== undefined ? (body.next === null ? null : `after=${encodeURIComponent(body.next)}`) : `offset=${body.offset + PAGE}`;
      if (from === null) break;
      body = await page(`${query}&${from}&limit=${PAGE}`);
      shown.push(...body.locks.map((l) => l.resource));
    }
    return shown;
  }

  const staying = Array.from({ length: STAYING }, (_, i) => `lock:churn/s-${pad(i)}`);

  it("by resource (the group's order kept as locks come and go): each lock once, none that stayed skipped", async () => {
    const shown = await scroll("group=lock:churn&sort=resource&order=asc", "by-name");
    expect(shown.filter((r, i) => shown.indexOf(r) !== i), "shown twice").toEqual([]);
    expect(shown.filter((r) => r.startsWith("lock:churn/s-"))).toEqual(staying);
  });

  it("by TTL (a sorted list reused a moment): each lock once, none that stayed skipped", async () => {
    const shown = await scroll("group=lock:churn&sort=ttl&order=asc", "by-ttl");
    expect(shown.filter((r, i) => shown.indexOf(r) !== i), "shown twice").toEqual([]);
    expect(shown.filter((r) => r.startsWith("lock:churn/s-"))).toEqual(staying);
  });

  it("refuses an `after` that is not a page's `next`, one of another sort, or one given with an offset, with 400 and a message", async () => {
    const byTtl = await page(`group=lock:churn&sort=ttl&limit=${PAGE}`);
    expect(byTtl.next).toEqual(expect.any(String));
    const next = encodeURIComponent(byTtl.next as string);
    // Cursors of another sort carrying the same kind of figure (a number, or none: by resource) are refused alike.
    const byName = await page(`group=lock:churn&sort=resource&limit=${PAGE}`);
    expect(byName.next).toEqual(expect.any(String));
    const nameNext = encodeURIComponent(byName.next as string);
    // One that says its sort but carries another kind of figure (not as the console makes them).
    const forged = Buffer.from(JSON.stringify(["soon", "lock:churn/s-01", null, "ttl"]), "utf8").toString("base64url");
    for (const query of ["after=not%20a%20cursor", "after=bm9wZQ", `sort=ttl&after=${forged}`, `sort=holder&after=${next}`, `sort=heldFor&after=${next}`, `sort=state&after=${nameNext}`, `sort=ttl&offset=8&after=${next}`]) {
      const res = await call(locks.GET, "GET", `/api/locks?group=lock:churn&${query}`, { token: VIEWER_TOKEN });
      expect(res.status, query).toBe(400);
      const error = (res.body as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("bad_request");
      expect(error.message, query).toContain("after");
      // A `next` of another sort says which sort it is good for.
      if (query.startsWith("sort=heldFor")) expect(error.message).toContain("sort=ttl");
    }
    // The last page says the list ends there.
    const last = await page(`group=lock:churn&sort=resource&order=desc&offset=0&limit=${STAYING}`);
    expect(last.next).toBeNull();
  });
});
