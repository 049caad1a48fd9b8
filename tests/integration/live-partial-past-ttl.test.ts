import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LiveModule from "@/server/live";
import type { TestCluster } from "../support/redis";
import { setUpConsole, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

/**
 * Two clients race for a lock and take one node each, with a short TTL; Redis has not reclaimed their keys when the
 * TTL runs out (its active expiry is off here, as it lags behind on a busy node). The lock, partial, is read again a
 * moment later, which expires the keys: it ends `expired`, where it used to stay partial until Redis got to them.
 */
describe("a partial lock whose keys outlive their TTL", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let live: typeof LiveModule;
  const shown = (resource: string) => live.getLockStore().get(resource, Date.now());

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: "lock:*" }, extraArgs: ["--enable-debug-command", "local"] });
    clients = cluster.clients();
    for (const c of clients) await c.call("DEBUG", "SET-ACTIVE-EXPIRE", "0");
    live = await import("@/server/live");
    live.startLive();
    expect(await live.waitUntilReconciled(30_000)).toBe(true);
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("ends as expired once read again after its TTL, its keys gone", async () => {
    const name = "lock:past-ttl/split";
    await Promise.all([clients[0]!.set(name, "worker-a", "PX", 1_000), clients[1]!.set(name, "worker-b", "PX", 1_000)]);
    await until(`${name} partial`, () => shown(name)?.state === "partial");
    const ended = await until(`${name} ended`, () => {
      const l = shown(name);
      return l !== null && l.state !== "partial" ? l : null;
    }, 15_000);
    expect(ended.state).toBe("expired");
    expect(await Promise.all(clients.map((c) => c.exists(name)))).toEqual([0, 0, 0]);
  });
});
