import { describe, expect, it } from "vitest";
import type { Lock, WatcherStatus } from "@/lib/locks/types";
import { nodeCounting, nodesNow } from "@/components/locks/node-counting";

const status = (nodeId: string, counted: boolean, deployment?: string): WatcherStatus => ({
  nodeId,
  up: counted,
  answering: true,
  counted,
  notifications: "on",
  lastEventAt: null,
  reconnects: 0,
  gaps: 0,
  ...(deployment ? { deployment } : {}),
});

function lock(deployment: string, nodes: Lock["nodes"]): Lock {
  return {
    resource: "lock:a",
    deployment,
    state: "held",
    format: "token",
    redisType: "string",
    scope: "quorum",
    holders: [],
    warnings: [],
    token: "v",
    holder: null,
    fence: null,
    nodes,
    quorumHeld: 2,
    quorum: 2,
    expiresAt: null,
    ttlMs: null,
    contention: { attemptsPerMin: null, waiters: null, source: null },
  };
}

const NODES: Lock["nodes"] = [
  { id: "node-0", up: true, token: "v", pttlMs: 1_000 },
  { id: "node-1", up: true, token: "v", pttlMs: 1_000 },
  { id: "node-2", up: false, token: null, pttlMs: null },
];

describe("a lock's nodes as they stand now", () => {
  it("shows a node that does not count down, and one that counts again up holding nothing, on a console of one deployment", () => {
    const shown = nodesNow(lock("default", NODES), nodeCounting([status("node-0", true), status("node-1", false), status("node-2", true)]));
    expect(shown.map((n) => [n.id, n.up, n.token])).toEqual([
      ["node-0", true, "v"],
      ["node-1", false, null],
      ["node-2", true, null],
    ]);
  });

  it("matches a node by its deployment where several are watched, and changes nothing without a status", () => {
    const counting = nodeCounting([status("node-1", false, "orders"), status("node-1", true, "cache")]);
    expect(nodesNow(lock("orders", NODES), counting)[1]).toMatchObject({ up: false, token: null });
    expect(nodesNow(lock("cache", NODES), counting)[1]).toMatchObject({ up: true, token: "v" });
    const unchanged = lock("default", NODES);
    expect(nodesNow(unchanged, nodeCounting([]))).toBe(unchanged.nodes);
    // A status without the field (an older console) says nothing either way.
    const old = { ...status("node-0", false) } as Partial<WatcherStatus>;
    delete old.counted;
    expect(nodesNow(unchanged, nodeCounting([old as WatcherStatus]))).toBe(unchanged.nodes);
  });
});
