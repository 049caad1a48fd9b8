import { QueryClient } from "@tanstack/react-query";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { LIVE_LOCKS_KEY, liveFeed, lockDetailKey, type LiveLocks } from "@/components/locks/live-feed";
import type { Lock, LockDetail } from "@/lib/locks/types";

const T = 1_800_000_000_000;

/** The browser's EventSource as far as the tab's feed uses it: the test plays the console's side of the stream. */
class TestEventSource extends EventTarget {
  static readonly CONNECTING = 0;
  static readonly OPEN = 1;
  static readonly CLOSED = 2;
  static opened: TestEventSource[] = [];
  readyState = TestEventSource.OPEN;
  constructor(readonly url: string) {
    super();
    TestEventSource.opened.push(this);
  }
  close() {
    this.readyState = TestEventSource.CLOSED;
  }
  send(type: string, data: unknown, lastEventId = "") {
    this.dispatchEvent(new MessageEvent(type, { data: JSON.stringify(data), lastEventId }));
  }
}

/** A lock held on one node, its TTL there as read at `readAt` (the console's clock) ending at `endsAt`. */
function held(readAt: number, endsAt: number): Lock {
  return {
    resource: "lock:orders/7",
    deployment: "default",
    state: "held",
    format: "token",
    redisType: "string",
    scope: "single",
    holders: [{ id: "tok" }],
    warnings: [],
    token: "tok",
    holder: null,
    fence: null,
    nodes: [{ id: "node-0", up: true, token: "tok", pttlMs: endsAt - readAt }],
    quorumHeld: 1,
    quorum: 1,
    expiresAt: endsAt,
    ttlMs: 30_000,
    contention: { attemptsPerMin: null, waiters: null, source: null },
  };
}

/** The page's "TTL on node", in ms, as the lock page counts it at `now` (the browser's clock) from its data. */
function nodeTtlShown(client: QueryClient, now: number): number {
  const detail = client.getQueryData<LockDetail & { serverTime: number }>(lockDetailKey("lock:orders/7"));
  const offsetMs = client.getQueryData<LiveLocks>(LIVE_LOCKS_KEY)?.offsetMs ?? 0;
  const pttlMs = detail?.nodes[0]?.pttlMs ?? Number.NaN;
  return Math.max(0, pttlMs - (now + offsetMs - (detail?.serverTime ?? Number.NaN)));
}

describe("the tab's live feed on a lock's page", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "Date"] });
    vi.setSystemTime(T);
    TestEventSource.opened = [];
    vi.stubGlobal("EventSource", TestEventSource);
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
  });

  it("counts each node's TTL from when the stream told it, not from when the page was last read", async () => {
    const client = new QueryClient();
    // The page read the lock at T: 30 s left on its node.
    const read: LockDetail & { serverTime: number } = { ...held(T, T + 30_000), timeline: [], contentionHistory: { bucketMs: 10_000, endsAt: T, attempts: [] }, serverTime: T };
    client.setQueryData(lockDetailKey("lock:orders/7"), read);
    const release = liveFeed(client).acquire({ locks: "all" });
    const source = TestEventSource.opened[0]!;
    source.send("open", {});
    source.send("snapshot", { serverTime: T, part: 0, parts: 1, nodes: [], locks: [held(T, T + 30_000)] }, "e:1");
    expect(nodeTtlShown(client, T)).toBe(30_000);

    // 5 s later the holder extends it to 30 s again: the stream tells the new TTL, as read then.
    await vi.advanceTimersByTimeAsync(5_000);
    source.send("node", { serverTime: T + 5_000, nodes: [] });
    source.send("lock", held(T + 5_000, T + 35_000), "e:2");
    await vi.advanceTimersByTimeAsync(100);
    // 100 ms after the extension the node has 29.9 s left (not 24.9 s, as it read until the page's next read).
    expect(nodeTtlShown(client, T + 5_100)).toBe(29_900);
    release();
    await vi.advanceTimersByTimeAsync(10_000);
  });
});
