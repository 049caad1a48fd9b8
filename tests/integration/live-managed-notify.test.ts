import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as LocksModule from "@/app/api/locks/route";
import type * as HealthModule from "@/app/api/health/route";
import type { Lock } from "@/lib/locks/types";
import { RedisNode } from "@/lib/redis-node";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";
import { call, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/**
 * Managed Redis (ElastiCache, Memorystore, Azure Cache) refuses CONFIG, and sets `notify-keyspace-events` in
 * the service's own settings (a parameter group). The console cannot read the flags: it probes them with keys
 * of its own and, where their events come, watches by notifications instead of rescanning every 2 s.
 */
describe("live view on managed Redis whose notifications are set by the service", () => {
  let cluster: TestCluster;
  let locks: typeof LocksModule;
  let health: typeof HealthModule;

  beforeAll(async () => {
    // CONFIG renamed away, the flags given at start, as a parameter group gives them.
    cluster = await setUpConsole({ nodes: 3, extraArgs: ["--rename-command", "CONFIG", "", "--notify-keyspace-events", "KEA"] });
    locks = await import("@/app/api/locks/route");
    health = await import("@/app/api/health/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("finds the notifications on by its probe, is not degraded, and sees locks come and go by them, leaving no probe key", async () => {
    const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { status: string; nodes: Array<{ notifications: string; degraded?: boolean }> };
    expect(body.nodes.map((n) => n.notifications)).toEqual(["on", "on", "on"]);
    expect(body.status).toBe("ok");
    const clients = cluster.clients();
    await Promise.all(clients.map((c) => c.set("lock:managed", "managed-token", "PX", 60_000)));
    const listed = async () => ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Lock[] }).locks.find((l) => l.resource === "lock:managed");
    expect(await until("lock shown", async () => (await listed())?.state === "held" && (await listed()))).toMatchObject({ token: "managed-token", quorumHeld: 3 });
    await Promise.all(clients.map((c) => c.del("lock:managed")));
    await until("its release shown", async () => (await listed())?.state === "released");
    // The watchers' keyspace counts are lock keys' only; the probe's keys are gone.
    for (const c of clients) expect(await c.keys("lockscope:probe:*")).toEqual([]);
  });

  it("with flags missing (expirations only, as often set for caches), stays degraded and says which", async () => {
    const node = await RedisNode.start({ dir: mkdtempSync(path.join(os.tmpdir(), "lockscope-managed-")), extraArgs: ["--rename-command", "CONFIG", "", "--notify-keyspace-events", "Kx"] });
    const { NodeWatcher } = await import("@/server/live/watcher");
    const { LockStore } = await import("@/server/live/store");
    const { getLiveEvents } = await import("@/server/live");
    const Redis = (await import("ioredis")).default;
    const pino = (await import("pino")).default;
    const lines: string[] = [];
    const log = pino({ level: "warn" }, new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) }));
    const store = new LockStore(["node-0"], 1, getLiveEvents());
    const admin = new Redis(node.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    const watcher = new NodeWatcher(
      { id: "node-0", index: 0, url: node.url, maskedUrl: node.url, deployment: "partial", connect: (options) => new Redis(node.port, "127.0.0.1", options), client: admin },
      { store, patterns: () => ["lock:*"], isLockKey: (k) => k.startsWith("lock:"), events: getLiveEvents(), log, timeoutMs: 500, deadlineMs: 500 },
    );
    try {
      await until("the watcher up", () => watcher.up);
      expect(watcher.notifications).toBe("unavailable");
      const said = lines.map((l) => JSON.parse(l) as { msg: string; err?: string }).find((l) => l.msg.includes("notifications unavailable"));
      expect(said?.err).toMatch(/no events for the flags g\$zh of notify-keyspace-events/);
      expect(await admin.keys("lockscope:probe:*")).toEqual([]);
    } finally {
      await watcher.stop();
      admin.disconnect();
      await node.stop();
    }
  });

  it("takes a node off notifications only after two probes in a row missed them (checks made at once share one), and back on once they come", async () => {
    // CONFIG renamed to a name only this test knows: the console cannot use it, the test switches the flags.
    const secret = "config-0c3f9a1e";
    const node = await RedisNode.start({ dir: mkdtempSync(path.join(os.tmpdir(), "lockscope-managed-")), extraArgs: ["--rename-command", "CONFIG", secret, "--notify-keyspace-events", "KEA"] });
    const { NodeWatcher } = await import("@/server/live/watcher");
    const { LockStore } = await import("@/server/live/store");
    const { getLiveEvents } = await import("@/server/live");
    const Redis = (await import("ioredis")).default;
    const pino = (await import("pino")).default;
    const store = new LockStore(["node-0"], 1, getLiveEvents());
    const admin = new Redis(node.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    const watcher = new NodeWatcher(
      { id: "node-0", index: 0, url: node.url, maskedUrl: node.url, deployment: "flaky", connect: (options) => new Redis(node.port, "127.0.0.1", options), client: admin },
      { store, patterns: () => ["lock:*"], isLockKey: (k) => k.startsWith("lock:"), events: getLiveEvents(), log: pino({ level: "silent" }), timeoutMs: 500, deadlineMs: 500 },
    );
    try {
      await until("the watcher up", () => watcher.up);
      expect(watcher.notifications).toBe("on");
      // Two checks at once (a bring-up and the periodic check) share one probe: both on while the flags are on.
      await Promise.all([watcher.recheckNotifications(), watcher.recheckNotifications()]);
      expect(watcher.notifications).toBe("on");
      await admin.call(secret, "SET", "notify-keyspace-events", "");
      // One probe missed them, however many checks asked at once: a late burst of events looks the same, and
      // costs no reconcile.
      await Promise.all([watcher.recheckNotifications(), watcher.recheckNotifications()]);
      expect(watcher.notifications).toBe("on");
      await watcher.recheckNotifications();
      expect(watcher.notifications).toBe("unavailable");
      await admin.call(secret, "SET", "notify-keyspace-events", "KEA");
      await Promise.all([watcher.recheckNotifications(), watcher.recheckNotifications()]);
      expect(watcher.notifications).toBe("on");
      expect(await admin.keys("lockscope:probe:*")).toEqual([]);
    } finally {
      await watcher.stop();
      admin.disconnect();
      await node.stop();
    }
  });

  it("leaves no probe key behind when a probe is cut short (ZADD refused by an ACL written before the probe needed it)", async () => {
    const node = await RedisNode.start({
      dir: mkdtempSync(path.join(os.tmpdir(), "lockscope-managed-")),
      extraArgs: ["--rename-command", "CONFIG", "", "--notify-keyspace-events", "KEA", "--user", "older", "on", ">older-password-0123", "~*", "&*", "+@all", "-zadd"],
    });
    const { NodeWatcher } = await import("@/server/live/watcher");
    const { LockStore } = await import("@/server/live/store");
    const { getLiveEvents } = await import("@/server/live");
    const Redis = (await import("ioredis")).default;
    const pino = (await import("pino")).default;
    const store = new LockStore(["node-0"], 1, getLiveEvents());
    const admin = new Redis(node.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    const watcher = new NodeWatcher(
      {
        id: "node-0",
        index: 0,
        url: node.url,
        maskedUrl: node.url,
        deployment: "older",
        connect: (options) => new Redis(node.port, "127.0.0.1", { ...options, username: "older", password: "older-password-0123" }),
        client: admin,
      },
      { store, patterns: () => ["lock:*"], isLockKey: (k) => k.startsWith("lock:"), events: getLiveEvents(), log: pino({ level: "silent" }), timeoutMs: 500, deadlineMs: 500 },
    );
    try {
      await until("the watcher up", () => watcher.up);
      expect(watcher.notifications).toBe("unavailable");
      expect(await admin.keys("lockscope:probe:*")).toEqual([]);
    } finally {
      await watcher.stop();
      admin.disconnect();
      await node.stop();
    }
  });
});
