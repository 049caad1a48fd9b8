import { describe, expect, it } from "vitest";
import { nodePills } from "@/lib/locks/node-pills";
import type { WatcherStatus } from "@/lib/locks/types";

const node = (over: Partial<WatcherStatus> = {}): WatcherStatus => ({
  nodeId: "node-0",
  up: true,
  answering: true,
  counted: true,
  notifications: "enabled-by-console",
  lastEventAt: null,
  reconnects: 0,
  gaps: 0,
  latencyMs: 1,
  ...over,
});

describe("the header's node pills", () => {
  it("says ok for a node that watches every lock", () => {
    const pills = nodePills([node()]);
    expect(pills.status).toBe("ok");
    expect(pills.nodes[0]?.partial).toBe(false);
  });

  it("says degraded, in the pill and its title, for a node that refuses the console a lock pattern", () => {
    const pills = nodePills([node({ refusedPatterns: [{ glob: "orders:*", rule: "~orders:*" }] })]);
    expect(pills.status).toBe("degraded");
    expect(pills.summary).toBe("1/1 up · quorum ok · degraded");
    expect(pills.nodes[0]?.partial).toBe(true);
    expect(pills.nodes[0]?.title).toContain("refuses the console the lock patterns orders:*");
  });

  it("says degraded, in the pill and its title, for a cluster with slots no primary serves (as /api/health does)", () => {
    const pills = nodePills([node({ unservedSlots: 5461 })]);
    expect(pills.status).toBe("degraded");
    expect(pills.summary).toBe("1/1 up · quorum ok · degraded");
    expect(pills.nodes[0]?.partial).toBe(true);
    expect(pills.nodes[0]?.title).toContain("5461 slots served by no primary");
  });

  it("where the console watches several deployments, says a quorum lost on one of them, as /api/health does", () => {
    // orders: a Redlock set of three, two of them down; cache and failover: one instance each, up.
    const statuses = [
      node({ nodeId: "node-0", deployment: "orders" }),
      node({ nodeId: "node-1", deployment: "orders", up: false }),
      node({ nodeId: "node-2", deployment: "orders", up: false }),
      node({ nodeId: "node-0", deployment: "cache" }),
      node({ nodeId: "node-0", deployment: "failover" }),
    ];
    const pills = nodePills(statuses, 3);
    // 3 of 5 nodes up is a majority of the five, but no deployment's quorum is made of the others' nodes.
    expect(pills.summary).toBe("3/5 up · quorum lost on orders · degraded");
    expect(pills.status).toBe("degraded");
    // Each pill is one deployment's node: told apart by name, not only by its node id (which repeats).
    expect(pills.nodes.map((n) => n.name)).toEqual(["orders node-0", "orders node-1", "orders node-2", "cache node-0", "failover node-0"]);

    // Every deployment with its quorum: ok; every one without: down.
    expect(nodePills(statuses.map((s) => ({ ...s, up: true }))).summary).toBe("5/5 up · quorum ok · ok");
    const down = nodePills(statuses.map((s) => ({ ...s, up: false })));
    expect([down.summary, down.status]).toEqual(["0/5 up · quorum lost on orders, cache, failover · down", "down"]);
    // One deployment: as before.
    expect(nodePills([node(), node({ nodeId: "node-1", up: false }), node({ nodeId: "node-2", up: false })]).summary).toBe("1/3 up · quorum lost · down");
  });

  it("says degraded, in the pill and its title, for a node that is a read-only replica now (as /api/health does)", () => {
    const pills = nodePills([node({ readOnly: { primary: "10.0.0.2:6379" } })]);
    expect(pills.status).toBe("degraded");
    // It answers (its locks are shown) but takes no lock: no quorum.
    expect(pills.summary).toBe("1/1 up, 1 read-only · quorum lost · degraded");
    expect(pills.nodes[0]?.partial).toBe(true);
    expect(pills.nodes[0]?.title).toContain("a read-only replica of 10.0.0.2:6379");
    expect(nodePills([node({ readOnly: { primary: null } })]).nodes[0]?.title).toContain("a read-only replica");
  });

  it("counts a Redlock set's read-only replicas for no quorum: two of three demoted is a quorum lost, though all three answer", () => {
    const replica = { readOnly: { primary: "10.0.0.9:6379" } };
    const two = nodePills([node(), node({ nodeId: "node-1", ...replica }), node({ nodeId: "node-2", ...replica })]);
    expect([two.summary, two.status]).toEqual(["3/3 up, 2 read-only · quorum lost · degraded", "degraded"]);
    const one = nodePills([node(), node({ nodeId: "node-1", ...replica }), node({ nodeId: "node-2" })]);
    expect([one.summary, one.status]).toEqual(["3/3 up, 1 read-only · quorum ok · degraded", "degraded"]);
    // A replica that takes writes takes locks: it counts.
    const writable = nodePills([node(), node({ nodeId: "node-1", readOnly: { primary: null, writable: true } }), node({ nodeId: "node-2", ...replica })]);
    expect(writable.summary).toBe("3/3 up, 1 read-only · quorum ok · degraded");
    // Several deployments: the quorum is lost where the read-only replicas are.
    const several = nodePills([
      node({ deployment: "orders" }),
      node({ nodeId: "node-1", deployment: "orders", ...replica }),
      node({ nodeId: "node-2", deployment: "orders", ...replica }),
      node({ deployment: "cache" }),
    ]);
    expect([several.summary, several.status]).toEqual(["4/4 up, 2 read-only · quorum lost on orders · degraded", "degraded"]);
  });

  it("tells a screen reader what the pill shows: a node up but a read-only replica now, or otherwise degraded, is not read as just up", () => {
    const label = (over: Partial<WatcherStatus>) => nodePills([node(over)]).nodes[0]?.label;
    expect(label({})).toBe("node-0 up");
    expect(label({ readOnly: { primary: "10.0.0.2:6379" } })).toBe("node-0 up, degraded: a read-only replica of 10.0.0.2:6379 now: no lock can be taken or released there");
    expect(label({ readOnly: { primary: null } })).toBe("node-0 up, degraded: a read-only replica now: no lock can be taken or released there");
    // A replica that takes writes (`replica-read-only no`) is not called read-only: what is written there stays there.
    expect(label({ readOnly: { primary: "10.0.0.2:6379", writable: true } })).toBe(
      "node-0 up, degraded: a writable replica of 10.0.0.2:6379 now: a lock written there stays there, never seen by its primary or the primary's clients, and the console releases nothing there",
    );
    expect(label({ refusedPatterns: [{ glob: "orders:*", rule: "~orders:*" }] })).toBe("node-0 up, degraded: refuses the console the lock patterns orders:*");
    expect(label({ unservedSlots: 5461 })).toBe("node-0 up, degraded: 5461 slots served by no primary (their locks unreadable)");
    expect(label({ notifications: "unavailable" })).toBe("node-0 up, degraded: notifications unavailable (periodic SCAN)");
    expect(label({ up: false, answering: false })).toBe("node-0 not answering");
    expect(label({ up: false, answering: true })).toBe("node-0 down");
  });
});
