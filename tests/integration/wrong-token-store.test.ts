import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as LocksModule from "@/app/api/locks/route";
import type { TestCluster } from "../support/redis";
import { call, OPERATOR_TOKEN, setUpConsole, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

/**
 * Wrong tokens are counted on lock node 0, so every console shares the count. Anyone who reaches the console can
 * send them, without any credential: past the limit, a guess is answered 429 and must cost the lock node nothing
 * more, or a guesser fills the node that holds the locks with a key per guess.
 */
describe("wrong tokens past the limit", () => {
  let cluster: TestCluster;
  let locks: typeof LocksModule;
  let node0: Redis;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    node0 = cluster.client(0);
    locks = await import("@/app/api/locks/route");
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  const countedKeys = async (ip: string) => (await node0.keys(`lockscope:wrong-token:*${ip}*`)).length;
  const guess = (ip: string, i: number) => call(locks.GET, "GET", "/api/locks", { token: `guess-${i}-0123456789abcdef`, headers: { "x-lockscope-client-ip": ip } });

  it("are refused without writing anything more on lock node 0, and the right token still works", async () => {
    const ip = "10.7.7.7";
    // The count is on the node once it answers (until then each console counts in its own memory).
    await until("wrong tokens are counted on node 0", async () => {
      await guess(ip, 0);
      return (await countedKeys(ip)) > 0;
    }, 10_000, 100);
    for (let i = 1; i < 5; i++) expect((await guess(ip, i)).status).toBe(401);
    const atLimit = await countedKeys(ip);
    expect(atLimit).toBeGreaterThan(0);

    for (let i = 5; i < 40; i++) expect((await guess(ip, i)).status).toBe(429);
    expect(await countedKeys(ip)).toBe(atLimit);

    const right = await call(locks.GET, "GET", "/api/locks", { token: OPERATOR_TOKEN, headers: { "x-lockscope-client-ip": ip } });
    expect(right.status).toBe(200);
  });
});
