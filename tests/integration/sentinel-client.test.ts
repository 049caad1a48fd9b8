import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Deployment } from "@/lib/deployment-config";
import { RedisNode } from "@/lib/redis-node";
import { promotedPrimary, startSentinelSet, type SentinelSet } from "../support/sentinel";
import { until } from "../support/wait";

/**
 * The console's connection to a Sentinel-managed primary (the one its lock pages, force releases and watchers
 * use), through the product's own Sentinel driver and connection options, across a failover.
 */
describe("a connection to a Sentinel-managed primary", () => {
  let primary: RedisNode;
  let set: SentinelSet;
  let client: Redis | null = null;

  beforeAll(async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-sentinel-client-"));
    primary = await RedisNode.start({ dir });
    set = await startSentinelSet(primary, dir);
  }, 90_000);
  afterAll(async () => {
    client?.disconnect();
    for (let i = 0; i < set.sentinelPorts.length; i++) set.resumeSentinel(i);
    await set?.close();
    await primary?.stop();
  });

  it("says the sentinels answered but monitor no master of the name given, rather than that they are unreachable", async () => {
    const { sentinelDriver } = await import("@/server/deployments/sentinel");
    const { nodeClientOptions } = await import("@/server/nodes");
    const deployment: Deployment = {
      name: "default",
      kind: "sentinel",
      sentinels: set.sentinelPorts.map((port) => ({ host: "127.0.0.1", port })),
      master: "lokcs",
      tls: null,
      auth: { username: null, passwordFile: null },
      sentinelAuth: { username: null, passwordFile: null },
    };
    const connection = sentinelDriver.endpoints(deployment)[0]!.connect(nodeClientOptions(500)) as Redis;
    const errors: string[] = [];
    connection.on("error", (error: Error) => errors.push(error.message));
    try {
      // (What the console logs as the node's "lock node unreachable" reason.)
      const message = await until("an error", () => errors[0] ?? null);
      expect(message).not.toMatch(/unreachable/);
      expect(message).toContain(`"lokcs"`);
      expect(message).toContain(set.sentinelPorts.map((p) => `127.0.0.1:${p}`).join(", "));
      expect(message).toContain("SENTINEL MASTERS");
    } finally {
      connection.disconnect();
    }
  });

  it("stays connected through a failover of another master the same sentinels monitor", async () => {
    const { sentinelDriver } = await import("@/server/deployments/sentinel");
    const { nodeClientOptions } = await import("@/server/nodes");
    // A second master with a replica, monitored by the same three sentinels (one sentinel group, several masters).
    const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-sentinel-other-"));
    const other = await RedisNode.start({ dir });
    const otherReplica = await RedisNode.start({ dir, extraArgs: ["--replicaof", "127.0.0.1", String(other.port)] });
    const sentinels = set.sentinelPorts.map((p) => new Redis(p, "127.0.0.1", { maxRetriesPerRequest: 1 }));
    const probes = set.sentinelPorts.map((p) => new Redis(p, "127.0.0.1", { maxRetriesPerRequest: 1 }));
    const deployment: Deployment = {
      name: "default",
      kind: "sentinel",
      sentinels: set.sentinelPorts.map((port) => ({ host: "127.0.0.1", port })),
      master: set.master,
      tls: null,
      auth: { username: null, passwordFile: null },
      sentinelAuth: { username: null, passwordFile: null },
    };
    const connection = sentinelDriver.endpoints(deployment)[0]!.connect(nodeClientOptions(500)) as Redis;
    connection.on("error", () => undefined);
    let closes = 0;
    try {
      for (const s of sentinels) {
        await s.call("SENTINEL", "MONITOR", "other", "127.0.0.1", other.port, 2);
        await s.call("SENTINEL", "SET", "other", "down-after-milliseconds", 1_000);
      }
      await until("every sentinel knows the other master's replica", async () => {
        for (const s of sentinels) if (((await s.call("SENTINEL", "REPLICAS", "other")) as unknown[]).length !== 1) return false;
        return true;
      }, 30_000);
      await until("connected to this deployment's primary", () => connection.status === "ready");
      connection.on("close", () => (closes += 1));
      // Every sentinel's announcement of the other master's switch, as the connection's own subscriptions hear it.
      const heard = new Set<number>();
      probes.forEach((probe, i) =>
        probe.on("message", (channel: string, message: string) => {
          if (channel === "+switch-master" && message.startsWith("other ")) heard.add(i);
        }),
      );
      await Promise.all(probes.map((probe) => probe.subscribe("+switch-master")));
      // (Refused with NOGOODSLAVE until the sentinel has seen the replica's link up.)
      await until("the other master's failover started", async () => (await sentinels[0]!.call("SENTINEL", "FAILOVER", "other").catch(() => null)) === "OK", 30_000);
      await until("every sentinel announced the other master's switch", () => heard.size === probes.length, 30_000);
      expect(await connection.ping()).toBe("PONG");
      expect(closes).toBe(0);
      expect(connection.status).toBe("ready");
    } finally {
      connection.disconnect();
      for (const s of sentinels) await s.call("SENTINEL", "REMOVE", "other").catch(() => undefined);
      for (const c of [...sentinels, ...probes]) c.disconnect();
      await otherReplica.stop();
      await other.stop();
    }
  }, 90_000);

  it("follows a failover announced while it is asking a slow sentinel for the primary, instead of giving up for good", async () => {
    const { sentinelDriver } = await import("@/server/deployments/sentinel");
    const { nodeClientOptions } = await import("@/server/nodes");
    const deployment: Deployment = {
      name: "default",
      kind: "sentinel",
      sentinels: set.sentinelPorts.map((port) => ({ host: "127.0.0.1", port })),
      master: set.master,
      tls: null,
      auth: { username: null, passwordFile: null },
      sentinelAuth: { username: null, passwordFile: null },
    };
    const connection = sentinelDriver.endpoints(deployment)[0]!.connect(nodeClientOptions(500)) as Redis;
    client = connection;
    connection.on("error", () => undefined);
    await until("connected to the primary", () => connection.status === "ready");
    // A copy of it (the engine's notification subscriber is one) goes through the same failover.
    const copy = connection.duplicate();
    copy.on("error", () => undefined);
    await until("the copy connected", () => copy.status === "ready");
    const portOf = async (c: Redis) => Number(/\r\ntcp_port:(\d+)\r\n/.exec(await c.info("server"))?.[1]);
    const port = () => portOf(connection);
    expect(await port()).toBe(primary.port);
    // It listens for `+switch-master` on every sentinel.
    const probes = set.sentinelPorts.map((p) => new Redis(p, "127.0.0.1", { maxRetriesPerRequest: 1 }));
    try {
      await until("subscribed to +switch-master on every sentinel", async () => {
        // (A sentinel has no PUBSUB command: its client list counts each connection's subscriptions.)
        for (const probe of probes) if (!/ sub=1 [^\n]* cmd=subscribe/.test(String(await probe.call("CLIENT", "LIST")))) return false;
        return true;
      });
    } finally {
      for (const probe of probes) probe.disconnect();
    }

    // The sentinel it asked first stops answering (a slow or stuck sentinel), then the primary dies: the
    // connection asks that sentinel for the primary and waits, while the other two fail over and announce it.
    set.pauseSentinel(0);
    await primary.kill();
    await until("the other sentinels announced a new primary", async () => {
      const sentinel = new Redis(set.sentinelPorts[1]!, "127.0.0.1", { maxRetriesPerRequest: 1 });
      try {
        const [, p] = (await sentinel.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", set.master)) as [string, string];
        return Number(p) !== primary.port;
      } finally {
        sentinel.disconnect();
      }
    }, 30_000);
    // (A moment for the announcement to reach the connection before the first sentinel answers again.)
    await new Promise((r) => setTimeout(r, 1_000));
    set.resumeSentinel(0);

    const { client: promotedClient, port: promoted } = await promotedPrimary(set);
    promotedClient.disconnect();
    await until("connected to the promoted primary", async () => connection.status === "ready" && (await port().catch(() => 0)) === promoted, 30_000).catch((error: unknown) => {
      throw new Error(`${String(error)}; the connection's status: ${connection.status}`);
    });
    expect(await connection.set("lock:after-failover", "holder", "PX", 10_000)).toBe("OK");
    await until("the copy connected to the promoted primary", async () => copy.status === "ready" && (await portOf(copy).catch(() => 0)) === promoted, 30_000).catch((error: unknown) => {
      throw new Error(`${String(error)}; the copy's status: ${copy.status}`);
    });
    copy.disconnect();
  }, 120_000);

  it("moves to the new primary of a failover made by hand, where the old primary stays up and its connection open", async () => {
    const connection = client!;
    const portOf = async (c: Redis) => Number(/\r\ntcp_port:(\d+)\r\n/.exec(await c.info("server"))?.[1]);
    const from = await portOf(connection);
    const to = set.replicas.find((r) => r.port !== from)!.port;
    const sentinel = new Redis(set.sentinelPorts[1]!, "127.0.0.1", { maxRetriesPerRequest: 1 });
    try {
      // (Refused with NOGOODSLAVE until the sentinel has seen the other replica's link up.)
      await until("the failover started", async () => (await sentinel.call("SENTINEL", "FAILOVER", set.master).catch(() => null)) === "OK", 30_000);
    } finally {
      sentinel.disconnect();
    }
    await until("on the new primary", async () => connection.status === "ready" && (await portOf(connection).catch(() => 0)) === to, 30_000);
    expect(await connection.set("lock:after-manual-failover", "holder", "PX", 10_000)).toBe("OK");
  }, 60_000);
});
