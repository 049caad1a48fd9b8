import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LiveModule from "@/server/live";
import type * as HealthRoute from "@/app/api/health/route";
import { holderText } from "@/lib/locks/holder-text";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

/**
 * A lock held on fewer nodes than a quorum, with different values on two nodes, whose node 1 restarts without its
 * key: node 0's value is all that is left of it, and the row names that value as the holder, not the one node 1 held
 * before the restart (nobody holds that one any more).
 */
describe("a partial lock whose node restarts empty", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let live: typeof LiveModule;
  let health: typeof HealthRoute;
  const shown = (resource: string) => live.getLockStore().get(resource, Date.now());
  const node1Watcher = async () => {
    const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ id: string; watcher: { reconnects: number; up: boolean } }> };
    return body.nodes.find((n) => n.id === "node-1")!.watcher;
  };

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: "lock:*" } });
    clients = cluster.clients();
    live = await import("@/server/live");
    health = await import("@/app/api/health/route");
    live.startLive();
    expect(await live.waitUntilReconciled(30_000)).toBe(true);
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("names the value node 0 still holds as the holder", async () => {
    // Two clients race for a free lock and take one node each (a split vote).
    const split = "lock:restart-holder/split";
    await Promise.all([clients[0]!.set(split, "only-on-node-0", "PX", 600_000), clients[1]!.set(split, "only-on-node-1", "PX", 600_000)]);
    // A lock on node 1, then another client's value on node 0: node 1's value goes on being shown.
    const shownFirst = "lock:restart-holder/shown-first";
    await clients[1]!.set(shownFirst, "only-on-node-1", "PX", 600_000);
    await until(`${shownFirst} held on node 1`, () => shown(shownFirst)?.state === "held");
    await clients[0]!.set(shownFirst, "only-on-node-0", "PX", 600_000);
    for (const name of [split, shownFirst]) {
      await until(`${name} partial on nodes 0 and 1`, () => {
        const l = shown(name);
        return l?.state === "partial" && l.nodes[0]?.token === "only-on-node-0" && l.nodes[1]?.token === "only-on-node-1";
      });
    }
    expect(holderText(shown(shownFirst)!)).toBe("raw only-on-node-1");

    const before = (await node1Watcher()).reconnects;
    await cluster.restart(1);
    await until("node 1's watcher reconnected", async () => {
      const w = await node1Watcher();
      return w.reconnects > before && w.up;
    });
    for (const name of [split, shownFirst]) {
      const lock = await until(`${name} read on node 1 since its restart`, () => {
        const l = shown(name);
        // (Its new view counts once the nodes' disagreement is waited out: then node 0's value leads.)
        return l?.nodes[1]?.up === true && l.nodes[1].token === null && l.leading === "only-on-node-0" ? l : null;
      });
      expect([name, lock.state, lock.nodes[0]?.token, holderText(lock)]).toEqual([name, "partial", "only-on-node-0", "raw only-on-node-0"]);
    }
  });
});
