import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as GroupsModule from "@/app/api/locks/groups/route";
import type * as LiveModule from "@/server/live";
import type { LockGroupsPage } from "@/lib/locks/groups";
import type { Lock, LockDetail } from "@/lib/locks/types";
import { holdLocks, type TestCluster } from "../support/redis";
import { openStream, type StreamReader } from "../support/stream";
import { until } from "../support/wait";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/** Held on all three nodes before the console starts: enough that the start-up reads are still going when a node freezes. */
const ON_ALL = 20_000;

describe("start-up when a node freezes while the locks are being read", () => {
  let cluster: TestCluster;
  let groups: typeof GroupsModule;
  let live: typeof LiveModule;
  let stream: StreamReader | null = null;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    for (const node of [0, 1, 2]) await holdLocks(cluster.client(node), "lock:all", ON_ALL);
    groups = await import("@/app/api/locks/groups/route");
    live = await import("@/server/live");
  }, 120_000);

  afterAll(async () => {
    stream?.close();
    cluster.resume(2);
    await tearDownConsole(cluster);
  });

  const detail = async (resource: string) => {
    const one = await import("@/app/api/locks/[resource]/route");
    return (await call(one.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } })).body as LockDetail;
  };
  const allGroup = async () =>
    ((await call(groups.GET, "GET", "/api/locks/groups", { token: VIEWER_TOKEN })).body as LockGroupsPage).groups.find((g) => g.group === "lock:all");

  it("lists every lock from the two answering nodes, then on all three once the frozen node answers again", async () => {
    live.startLive();
    // Watched from the start: everything the console says about the locks on the way.
    const { GET } = await import("@/app/api/locks/stream/route");
    stream = await openStream(GET);
    const reader = stream;
    // Frozen mid-way: the console has begun reading the locks, and has not read them all.
    await until(
      "the console reading the nodes' locks",
      () => live.getWatcherStatus().some((w) => (w.reading?.keysRead ?? 0) > 0),
      30_000,
      5,
    );
    cluster.pause(2);
    try {
      // The other nodes' reads do not wait on node 2: every lock is listed, held by the two that answer.
      const group = await until(
        "every lock listed while node 2 is frozen",
        async () => {
          const row = await allGroup();
          return row?.held === ON_ALL ? row : null;
        },
        60_000,
        100,
      );
      expect(group).toMatchObject({ locks: ON_ALL, held: ON_ALL });
      expect(live.getWatcherStatus().find((w) => w.nodeId === "node-2")).toMatchObject({ answering: false, up: false });
      const seen = await until(
        "the stream's snapshot",
        () => {
          const locks = reader.locks();
          return locks.size >= ON_ALL ? locks : null;
        },
        60_000,
        100,
      );
      const notHeld = [...seen.values()].filter((l): l is Lock => l !== null && l.resource.startsWith("lock:all/") && (l.state !== "held" || l.quorumHeld < 2));
      expect(notHeld.map((l) => `${l.resource} ${l.state} ${l.quorumHeld}`).slice(0, 5)).toEqual([]);
    } finally {
      cluster.resume(2);
    }
    // Node 2 answers again: its watcher comes up, and every lock is held on all three nodes.
    await until("node 2's watcher up again", () => live.getWatcherStatus().every((w) => w.up && w.answering && w.reading === undefined), 60_000, 100);
    // What the stream last said of each lock shows every node up and holding it: none keeps the view it had
    // while node 2 was frozen or while the console was starting.
    await until(
      "every lock held on all three nodes, each node shown up with the lock's token",
      () => {
        const locks = [...reader.locks().values()].filter((l): l is Lock => l !== null && l.resource.startsWith("lock:all/"));
        return locks.length === ON_ALL && locks.every((l) => l.state === "held" && l.quorumHeld === 3 && l.nodes.every((n) => n.up && n.token === l.token));
      },
      90_000,
      250,
    );
    for (const j of [0, ON_ALL / 2, ON_ALL - 1]) {
      const lock = await detail(`lock:all/${j}`);
      expect(lock.nodes.map((n) => [n.id, n.up, n.token])).toEqual(["node-0", "node-1", "node-2"].map((id) => [id, true, `token-${j}`]));
    }
    expect(await allGroup()).toMatchObject({ locks: ON_ALL, held: ON_ALL, partial: 0 });
  }, 240_000);
});
