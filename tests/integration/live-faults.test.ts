import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import Redis from "ioredis";
import pino from "pino";
import type * as HealthModule from "@/app/api/health/route";
import type * as StreamModule from "@/app/api/locks/stream/route";
import type { LiveStats, WatcherStatus } from "@/lib/locks/types";
import type { LockEventType } from "@/server/live";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { openStream, type StreamReader } from "../support/stream";
import { until } from "../support/wait";

interface NodeHealth {
  id: string;
  up: boolean;
  answering?: boolean;
  notifications: string;
  restartRisk: boolean;
  watcher: { up: boolean; reconnects: number };
}

/**
 * The live view under node faults: watchers that come up in any order, a node the console cannot reach
 * for a while, a frozen node, a restart without data, notifications switched off at runtime. Node 2 is
 * reached as a user that may not CONFIG SET (as on managed services that allow CONFIG GET only).
 */
describe("live view under node faults", () => {
  let cluster: TestCluster;
  /** Admin clients (their own ACL user, so switching the default user off does not cut them). */
  let admin: Redis[];
  let stream: typeof StreamModule;
  let health: typeof HealthModule;
  const lockEvents: Array<{ type: LockEventType; resource: string }> = [];
  const open: StreamReader[] = [];

  const nodeHealth = async (id: string) => ((await call(health.GET, "GET", "/api/health", { token: null })).body as { status: string; nodes: NodeHealth[] }).nodes.find((n) => n.id === id)!;
  const watch = async () => {
    const s = await openStream(stream.GET);
    open.push(s);
    await s.until("snapshot", () => s.events.some((e) => e.event === "snapshot"));
    return s;
  };

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    const defaults = cluster.clients();
    for (const c of defaults) await c.acl("SETUSER", "admin", "on", ">admin-pass", "~*", "&*", "+@all");
    await defaults[2]!.acl("SETUSER", "lockscope", "on", ">watch-pass", "~*", "&*", "+@all", "-config|set");
    // Node 2's watcher cannot turn notifications on: they are on from the start.
    await defaults[2]!.config("SET", "notify-keyspace-events", "Kg$xe");
    admin = cluster.nodes.map((_, i) => cluster.client(i, { username: "admin", password: "admin-pass" }));
    const urls = cluster.urls.map((url, i) => (i === 2 ? url.replace("redis://", "redis://lockscope:watch-pass@") : url));
    process.env.REDIS_URLS = urls.join(",");

    // A quorum lock on nodes 1 and 2 only, and those two frozen while the console starts: node 0's watcher
    // comes up (empty) first.
    await Promise.all([1, 2].map((i) => admin[i]!.set("lock:startup", "startup-token", "PX", 120_000)));
    cluster.pause(1);
    cluster.pause(2);
    stream = await import("@/app/api/locks/stream/route");
    health = await import("@/app/api/health/route");
    const live = await import("@/server/live");
    live.getLiveEvents().on("lock-event", (e) => lockEvents.push(e));
    live.startLive();
    await until("node 0's watcher up while the others are frozen", () => live.getWatcherStatus()[0]?.up);
    cluster.resume(1);
    cluster.resume(2);
    expect(await live.waitUntilReconciled(15_000)).toBe(true);
  });

  afterAll(async () => {
    for (const s of open) s.close();
    for (const i of [1, 2]) cluster.resume(i);
    await tearDownConsole(cluster);
  });

  it("lists a quorum lock on nodes 1 and 2 whose watchers came up after node 0's", async () => {
    const s = await watch();
    const shown = await s.until("startup lock held on 2 of 3", () => {
      const l = s.lock("lock:startup");
      return l?.state === "held" && l.quorumHeld === 2 ? l : null;
    });
    expect(shown.token).toBe("startup-token");
    expect(shown.nodes.map((n) => n.token)).toEqual([null, "startup-token", "startup-token"]);
    // Held before the console started: found held, not acquired (no lock event, whenever its nodes were read).
    expect(lockEvents.filter((e) => e.resource === "lock:startup").map((e) => e.type)).toEqual([]);
  });

  it("keeps a lock on one node unknown, not released, while its watcher is cut off, and lists it after it returns", async () => {
    const s = await watch();
    await admin[0]!.set("lock:lonely", "lonely-token", "PX", 25_000);
    // On one node only: a single-instance lock, held there.
    await s.until("lonely lock held", () => s.lock("lock:lonely")?.state === "held");
    const reconnectsBefore = (await nodeHealth("node-0")).watcher.reconnects;
    // Cut the console off node 0: its user is switched off and its connections killed (the data stays).
    await admin[0]!.acl("SETUSER", "default", "off");
    try {
      await admin[0]!.client("KILL", "USER", "default");
      const unknown = await s.until("lonely lock unreadable", () => {
        const l = s.lock("lock:lonely");
        return l?.unreadable ? l : null;
      });
      expect(unknown.state).toBe("held");
      expect(unknown.endedAt).toBeUndefined();
      // Longer than an ended lock lingers in the list: it must still be listed, and never have ended.
      const cutAt = Date.now();
      await until("more than 5 s cut off", () => Date.now() - cutAt > 5_500, 10_000, 250);
      expect(s.lock("lock:lonely")).toMatchObject({ state: "held", unreadable: true });
      expect(lockEvents.filter((e) => e.resource === "lock:lonely").map((e) => e.type)).toEqual(["acquired"]);
    } finally {
      await admin[0]!.acl("SETUSER", "default", "on");
    }
    await until("node 0's watcher back", async () => {
      const h = await nodeHealth("node-0");
      return h.watcher.up && h.watcher.reconnects > reconnectsBefore;
    });
    const back = await s.until("lonely lock readable again", () => {
      const l = s.lock("lock:lonely");
      return l && !l.unreadable ? l : null;
    });
    expect(back).toMatchObject({ state: "held", scope: "single", quorumHeld: 1 });
    expect(back.nodes.map((n) => n.token)).toEqual(["lonely-token", null, null]);
    expect(lockEvents.filter((e) => e.resource === "lock:lonely").map((e) => e.type)).toEqual(["acquired"]);
  });

  it("turns keyspace notifications back on when they are switched off at runtime, and reconciles what it missed", async () => {
    const s = await watch();
    await until("node 0 watched with notifications on", async () => {
      const h = await nodeHealth("node-0");
      return h.watcher.up && h.notifications !== "unavailable";
    });
    await admin[0]!.config("SET", "notify-keyspace-events", "");
    // Announced to nobody: this change is only found by the reconcile after the flags are back.
    await Promise.all(admin.map((c) => c.set("lock:unannounced", "quiet", "PX", 20_000)));
    await until("flags back on node 0", async () => {
      const flags = ((await admin[0]!.config("GET", "notify-keyspace-events")) as string[])[1] ?? "";
      return flags.includes("K") && flags.includes("$");
    });
    await s.until("unannounced lock held", () => s.lock("lock:unannounced")?.quorumHeld === 3);
    expect((await nodeHealth("node-0")).notifications).toBe("enabled-by-console");
  });

  it("shows a frozen (SIGSTOP) node as not answering everywhere, and keeps reading the others", async () => {
    const s = await watch();
    cluster.pause(2);
    try {
      await until("health says node 2 does not answer", async () => {
        const h = await nodeHealth("node-2");
        return h.answering === false && !h.up && !h.watcher.up;
      });
      const stats = await s.until("stats count node 2 out", () => {
        const latest = s.latest<LiveStats>("stats");
        return latest && latest.nodesNotAnswering === 1 ? latest : null;
      });
      expect(stats).toMatchObject({ nodesUp: 2, nodesTotal: 3, degraded: true });
      const nodes = await s.until("node event says node 2 does not answer", () => {
        const latest = s.latest<{ nodes: WatcherStatus[] }>("node");
        return latest?.nodes.find((n) => n.nodeId === "node-2" && !n.answering) ? latest.nodes : null;
      });
      expect(nodes.map((n) => [n.nodeId, n.up])).toEqual([
        ["node-0", true],
        ["node-1", true],
        ["node-2", false],
      ]);
      // Changes on the other nodes still arrive, each read on its own batch without waiting for node 2.
      await Promise.all([0, 1].map((i) => admin[i]!.set("lock:while-frozen", "thawed", "PX", 20_000)));
      await s.until("lock on the answering nodes held", () => {
        const l = s.lock("lock:while-frozen");
        return l?.state === "held" && l.quorumHeld === 2;
      });
    } finally {
      cluster.resume(2);
    }
    await until("node 2 answers again", async () => (await nodeHealth("node-2")).answering === true);
  });

  it("degrades visibly when notifications are switched off where the console may not switch them on", async () => {
    const s = await watch();
    await admin[2]!.config("SET", "notify-keyspace-events", "");
    await until("node 2's notifications unavailable", async () => (await nodeHealth("node-2")).notifications === "unavailable");
    const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { status: string };
    expect(body.status).toBe("degraded");
    await s.until("stats say degraded", () => {
      const latest = s.latest<LiveStats>("stats");
      return latest?.nodesWithoutNotifications === 1 && latest.degraded;
    });
  });

  it("logs an intended stop of a watcher at info, not warn", async () => {
    const { NodeWatcher } = await import("@/server/live/watcher");
    const { LockStore } = await import("@/server/live/store");
    const { getLiveEvents } = await import("@/server/live");
    const lines: Array<{ level: number; msg: string }> = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString("utf8").split("\n")) if (line) lines.push(JSON.parse(line) as { level: number; msg: string });
        done();
      },
    });
    const log = pino({ level: "info" }, sink);
    const store = new LockStore(["node-0"], 1, getLiveEvents());
    const watcher = new NodeWatcher(
      { id: "node-0", index: 0, url: cluster.urls[0]!, maskedUrl: cluster.urls[0]!, deployment: "default", connect: (options) => new Redis(cluster.urls[0]!, options), client: admin[0]! },
      // (Timeouts a busy machine does not reach: the test is about how a stop is logged, not about slow nodes.)
      { store, patterns: () => ["lock:*"], isLockKey: (k) => k.startsWith("lock:"), events: getLiveEvents(), log, timeoutMs: 5_000, deadlineMs: 5_000 },
    );
    await until("the extra watcher up", () => watcher.up);
    await watcher.stop();
    await until("the stop logged", () => lines.some((l) => l.msg === "lock watcher stopped"));
    expect(lines.filter((l) => l.level >= 40).map((l) => l.msg)).toEqual([]);
  });
  it("flags a restart without data at once on reconnect, with a TTL well under 30 s", async () => {
    await Promise.all(admin.map((c) => c.set("lock:short", "short-ttl", "PX", 20_000)));
    // Every lock node 0 ever held had a TTL of 25 s or less.
    const ttl = await until("the TTL seen on node 0", async () => {
      const h = (await nodeHealth("node-0")) as NodeHealth & { longestTtlMs: number };
      return h.longestTtlMs > 0 ? h.longestTtlMs : null;
    });
    expect(ttl).toBeLessThanOrEqual(25_000);
    const before = (await nodeHealth("node-0")).watcher.reconnects;
    await cluster.restart(0);
    const back = await until("node 0's watcher reconnected", async () => {
      const h = await nodeHealth("node-0");
      return h.watcher.reconnects > before && h.watcher.up ? h : null;
    });
    expect(back.restartRisk).toBe(true);
    expect((await nodeHealth("node-1")).restartRisk).toBe(false);
  });

});
