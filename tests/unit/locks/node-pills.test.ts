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
});
