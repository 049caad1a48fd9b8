import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LiveModule from "@/server/live";
import { holderText } from "@/lib/locks/holder-text";
import type { Lock } from "@/lib/locks/types";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import { until } from "../support/wait";

/**
 * Two clients race for a free lock on three Redis nodes and each takes one node: no value has a quorum, and neither
 * is ahead of the other. Which node holds which value says nothing of who holds the lock: the row names no holder,
 * the same whichever way round the nodes went.
 */
describe("a split vote with no side ahead", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let live: typeof LiveModule;
  const shown = (resource: string) => live.getLockStore().get(resource, Date.now());

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: "lock:*" } });
    clients = cluster.clients();
    live = await import("@/server/live");
    live.startLive();
    expect(await live.waitUntilReconciled(30_000)).toBe(true);
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("shows the lock partial with no holder, whichever node holds which value", async () => {
    const seen = [];
    for (const [name, first, second] of [
      ["lock:split/1", "worker-a", "worker-b"],
      ["lock:split/2", "worker-b", "worker-a"],
    ] as const) {
      await Promise.all([clients[0]!.set(name, first, "PX", 60_000), clients[1]!.set(name, second, "PX", 60_000)]);
      const lock = await until(`${name} read on both nodes`, () => {
        const l = shown(name);
        return l?.state === "partial" && l.nodes[0]?.token === first && l.nodes[1]?.token === second && l.timeline.length > 0 ? l : null;
      });
      seen.push({ holder: holderText(lock), leading: lock.leading, quorumHeld: lock.quorumHeld, timeline: lock.timeline.map((t) => `${t.type} ${t.detail ?? ""}`) });
    }
    expect(seen[0]).toEqual({ holder: "split vote: no value leads", leading: undefined, quorumHeld: 1, timeline: ["acquired split vote: 2 values on 1 of 3 nodes each, none on a quorum"] });
    expect(seen[1]).toEqual(seen[0]);
  });

  it("names every side's holder with the node holding it, in node order, whichever node holds which, in the API", async () => {
    const locks = await import("@/app/api/locks/route");
    const detail = await import("@/app/api/locks/[resource]/route");
    for (const [name, on0, on1] of [
      ["lock:split/6", "worker-a", "worker-b"],
      ["lock:split/7", "worker-b", "worker-a"],
    ] as const) {
      await Promise.all([clients[0]!.set(name, on0, "PX", 60_000), clients[1]!.set(name, on1, "PX", 60_000)]);
      await until(`${name} read on both nodes`, () => {
        const l = shown(name);
        return l?.state === "partial" && l.leading === undefined && l.nodes[0]?.token === on0 && l.nodes[1]?.token === on1;
      });
      // (A search of its own: a list asked for a moment ago is reused, without a lock taken since.)
      const listed = await call(locks.GET, "GET", `/api/locks?q=${encodeURIComponent(name)}`, { token: VIEWER_TOKEN });
      expect(listed.status).toBe(200);
      const page = await call(detail.GET, "GET", `/api/locks/${encodeURIComponent(name)}`, { token: VIEWER_TOKEN, params: { resource: name } });
      expect(page.status).toBe(200);
      const bothSides = [
        { id: on0, nodes: ["node-0"] },
        { id: on1, nodes: ["node-1"] },
      ];
      expect([name, (listed.body as { locks: Lock[] }).locks.find((l) => l.resource === name)?.holders, (page.body as Lock).holders]).toEqual([name, bothSides, bothSides]);
    }
  });

  it("goes on as the same lock when one side takes the third node: one acquisition, the winner named", async () => {
    const name = "lock:split/5";
    await Promise.all([clients[0]!.set(name, "worker-a", "PX", 60_000), clients[1]!.set(name, "worker-b", "PX", 60_000)]);
    const split = await until(`${name} split`, () => {
      const l = shown(name);
      return l?.state === "partial" && l.nodes[0]?.token === "worker-a" && l.nodes[1]?.token === "worker-b" && l.timeline.length > 0 ? l : null;
    });
    await clients[2]!.set(name, "worker-a", "PX", 60_000);
    const won = await until(`${name} held by worker-a`, () => {
      const l = shown(name);
      return l?.state === "held" && l.token === "worker-a" ? l : null;
    });
    expect(won.timeline.map((t) => `${t.type} ${t.detail ?? ""}`)).toEqual([
      "acquired split vote: 2 values on 1 of 3 nodes each, none on a quorum",
      "quorum a quorum holds one side's value: by a foreign client, on 2 of 3 nodes",
    ]);
    expect(won.acquiredAt).toBe(split.acquiredAt);
  });

  it("keeps the value a lock was held with as its holder when its quorum splits, whichever node keeps it", async () => {
    for (const [name, keeps, takes] of [
      ["lock:split/3", 0, 1],
      ["lock:split/4", 1, 0],
    ] as const) {
      await Promise.all([clients[keeps]!.set(name, "worker-a", "PX", 60_000), clients[2]!.set(name, "worker-a", "PX", 60_000)]);
      await until(`${name} held`, () => shown(name)?.state === "held");
      // Node 2's copy goes; another worker holds the third node: one node each.
      await clients[takes]!.set(name, "worker-b", "PX", 60_000);
      await clients[2]!.del(name);
      const lock = await until(`${name} partial`, () => {
        const l = shown(name);
        return l?.state === "partial" && l.nodes[2]?.token === null && l.nodes[takes]?.token === "worker-b" ? l : null;
      });
      expect([name, holderText(lock), lock.leading]).toEqual([name, "raw worker-a", "worker-a"]);
    }
  });
});
