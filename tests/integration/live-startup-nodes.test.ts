import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as GroupsModule from "@/app/api/locks/groups/route";
import type { LockGroupsPage } from "@/lib/locks/groups";
import type { Lock } from "@/lib/locks/types";
import { holdLocks, type TestCluster } from "../support/redis";
import { openStream, type StreamReader } from "../support/stream";
import { until } from "../support/wait";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/** Held on all three nodes before the console starts: enough that each node's SCAN takes a while. */
const ON_ALL = 20_000;
/** Held on nodes 1 and 2 only (a quorum), and on node 2 only. */
const ON_TWO = 300;
const ON_ONE = 300;

describe("start-up with many locks held on three nodes", () => {
  let cluster: TestCluster;
  let groups: typeof GroupsModule;
  let stream: StreamReader | null = null;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    const load = (node: number, prefix: string, count: number) => holdLocks(cluster.client(node), `lock:${prefix}`, count, (j) => `token-${prefix}-${j}`);
    for (const node of [0, 1, 2]) await load(node, "all", ON_ALL);
    for (const node of [1, 2]) await load(node, "two", ON_TWO);
    await load(2, "one", ON_ONE);
    groups = await import("@/app/api/locks/groups/route");
  }, 120_000);

  afterAll(async () => {
    stream?.close();
    await tearDownConsole(cluster);
  });

  const groupRows = async () => ((await call(groups.GET, "GET", "/api/locks/groups", { token: VIEWER_TOKEN })).body as LockGroupsPage).groups;

  it("lists every lock with the nodes that hold it, never showing a lock on all three as partial on the way", async () => {
    // Opened while the nodes are being read: everything the console says about the locks meanwhile.
    const { GET } = await import("@/app/api/locks/stream/route");
    stream = await openStream(GET);
    const reader = stream;
    const rows = await until(
      "every lock listed",
      async () => {
        const all = await groupRows();
        const count = (name: string) => all.find((g) => g.group === name);
        return count("lock:all")?.held === ON_ALL && count("lock:two")?.held === ON_TWO && count("lock:one")?.locks === ON_ONE ? all : null;
      },
      90_000,
      100,
    );
    expect(rows.find((g) => g.group === "lock:all")).toMatchObject({ locks: ON_ALL, held: ON_ALL, partial: 0 });
    expect(rows.find((g) => g.group === "lock:two")).toMatchObject({ locks: ON_TWO, held: ON_TWO, partial: 0 });

    // Every state of a lock:all key the stream sent, from its snapshot on: held by all three nodes.
    await until("the stream caught up", () => reader.lock(`lock:all/${ON_ALL - 1}`) !== undefined && reader.lock("lock:all/0") !== undefined, 30_000);
    const sent: Lock[] = [];
    for (const e of reader.events) {
      if (e.event === "snapshot") sent.push(...(JSON.parse(e.data) as { locks: Lock[] }).locks);
      else if (e.event === "lock") sent.push(JSON.parse(e.data) as Lock);
    }
    const onAll = sent.filter((l) => l.resource.startsWith("lock:all/"));
    expect(onAll.length).toBeGreaterThanOrEqual(ON_ALL);
    expect(onAll.filter((l) => l.state !== "held" || l.quorumHeld !== 3).map((l) => `${l.resource} ${l.state} ${l.quorumHeld}`).slice(0, 5)).toEqual([]);
    const onTwo = sent.filter((l) => l.resource.startsWith("lock:two/"));
    expect(onTwo.filter((l) => l.state !== "held" || l.quorumHeld !== 2).map((l) => `${l.resource} ${l.state} ${l.quorumHeld}`).slice(0, 5)).toEqual([]);
  }, 150_000);
});
