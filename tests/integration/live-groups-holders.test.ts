import type Redis from "ioredis";
import { Semaphore } from "redis-semaphore";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as LocksModule from "@/app/api/locks/route";
import type { LocksPage } from "@/lib/locks/groups";
import { holderText } from "@/lib/locks/holder-text";
import { call, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { RedissonWriter } from "../support/redisson";
import { until } from "../support/wait";

/**
 * A group's table searches and sorts the holder as its Holder column shows it, whichever library holds the lock:
 * a Redisson lock's `<client id>:<thread id>` field is shown `<client id> thread <thread id>`, a semaphore's
 * sorted-set members as its holders (`2 holders: …`), neither as the value stored.
 */
describe("a group's locks searched and sorted by the holder shown", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let locks: typeof LocksModule;
  const semaphores: Semaphore[] = [];
  // Chosen so that the shown holders sort otherwise than the stored values: the Redisson client's id starts
  // with an `f` (shown `f… thread 7`, stored `f…:7`, which the other values' `raw …` would pass).
  const redissonClient = "f0e1d2c3-b4a5-4968-8776-655443322110";

  const page = async (query: string): Promise<LocksPage> => {
    const res = await call(locks.GET, "GET", `/api/locks?${query}`, { token: VIEWER_TOKEN });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as LocksPage;
  };

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    clients = cluster.clients();
    locks = await import("@/app/api/locks/route");
    await startLiveReconciled();
    const { encodeLockValue } = await import("@lockscope/redlock");

    // lock:jvm: a Redisson lock, a plain token and an engine lock.
    expect(await new RedissonWriter(clients[0]!, redissonClient).lock("lock:jvm/a", 7, 600_000)).toBeNull();
    await Promise.all(clients.map((c) => c.set("lock:jvm/b", "aaa-token", "PX", 600_000)));
    const engine = encodeLockValue({ label: "zeta-worker", host: "web-1", pid: 1, fence: null, acquiredAt: Date.now() });
    await Promise.all(clients.map((c) => c.set("lock:jvm/c", engine, "PX", 600_000)));

    // semaphore:jobs: one semaphore with two holders, another with one, taken by redis-semaphore itself.
    const take = async (key: string, identifier: string) => {
      const s = new Semaphore(clients[1]!, key, 3, { identifier, lockTimeout: 600_000, acquireTimeout: 1_000, refreshInterval: 0 });
      await s.acquire();
      semaphores.push(s);
    };
    await take("jobs/x", "b-holder");
    await take("jobs/x", "c-holder");
    await take("jobs/y", "a-holder");

    await until("every lock listed", async () => (await page("group=lock:jvm")).total === 3 && (await page("group=semaphore:jobs")).total === 2, 15_000, 50);
  });

  afterAll(async () => {
    await Promise.all(semaphores.map((s) => s.release()));
    await tearDownConsole(cluster);
  });

  it("finds a Redisson lock by its holder as shown (client id and thread), and still by the field stored", async () => {
    const shown = (await page("group=lock:jvm&q=a")).locks.find((l) => l.resource === "lock:jvm/a");
    expect(shown && holderText(shown)).toBe(`${redissonClient} thread 7`);
    expect((await page(`group=lock:jvm&q=${encodeURIComponent(`${redissonClient.slice(-8)} thread 7`)}`)).locks.map((l) => l.resource)).toEqual(["lock:jvm/a"]);
    expect((await page("group=lock:jvm&q=THREAD%207")).locks.map((l) => l.resource)).toEqual(["lock:jvm/a"]);
    expect((await page(`group=lock:jvm&q=${encodeURIComponent(`${redissonClient}:7`)}`)).locks.map((l) => l.resource)).toEqual(["lock:jvm/a"]);
  });

  it("finds a semaphore by its holders as shown", async () => {
    const x = (await page("group=semaphore:jobs&q=jobs%2Fx")).locks[0];
    expect(x && holderText(x)).toMatch(/^2 holders: (b-holder, c-holder|c-holder, b-holder)$/);
    expect((await page("group=semaphore:jobs&q=2%20holders")).locks.map((l) => l.resource)).toEqual(["semaphore:jobs/x"]);
    expect((await page("group=semaphore:jobs&q=c-holder")).locks.map((l) => l.resource)).toEqual(["semaphore:jobs/x"]);
  });

  it("sorts by the holder as shown, both ways", async () => {
    for (const group of ["lock:jvm", "semaphore:jobs"]) {
      const asc = (await page(`group=${group}&sort=holder&order=asc`)).locks.map(holderText);
      expect(asc, group).toEqual([...asc].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      const desc = (await page(`group=${group}&sort=holder&order=desc`)).locks.map(holderText);
      expect(desc, group).toEqual([...asc].reverse());
    }
    expect((await page("group=lock:jvm&sort=holder&order=asc")).locks.map((l) => l.resource)).toEqual(["lock:jvm/a", "lock:jvm/b", "lock:jvm/c"]);
    expect((await page("group=semaphore:jobs&sort=holder&order=asc")).locks.map((l) => l.resource)).toEqual(["semaphore:jobs/x", "semaphore:jobs/y"]);
  });
});
