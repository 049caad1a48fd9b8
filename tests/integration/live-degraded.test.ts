import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type Redis from "ioredis";
import type * as LocksModule from "@/app/api/locks/route";
import type * as HealthModule from "@/app/api/health/route";
import type { Lock } from "@/lib/locks/types";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";
import { call, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";


describe("live view on nodes that refuse CONFIG (managed Redis)", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let locks: typeof LocksModule;
  let health: typeof HealthModule;

  beforeAll(async () => {
    // Notifications off (the default) and CONFIG renamed away, as on ElastiCache or Upstash.
    cluster = await setUpConsole({ nodes: 3, extraArgs: ["--rename-command", "CONFIG", ""] });
    clients = cluster.clients();
    locks = await import("@/app/api/locks/route");
    health = await import("@/app/api/health/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("reports notifications unavailable and the console degraded", async () => {
    const res = await call(health.GET, "GET", "/api/health", { token: null });
    const body = res.body as { status: string; nodes: Array<{ notifications: string; up: boolean }> };
    expect(body.status).toBe("degraded");
    expect(body.nodes.map((n) => n.notifications)).toEqual(["unavailable", "unavailable", "unavailable"]);
    expect(body.nodes.every((n) => n.up)).toBe(true);
    await expect(clients[0]!.call("CONFIG", "GET", "notify-keyspace-events")).rejects.toThrow(/unknown command/i);
  });

  it("still shows locks, and their end, by periodic SCAN", async () => {
    await Promise.all(clients.map((c) => c.set("lock:scanned", "scan-token", "PX", 60_000)));
    const shown = await until("lock found by SCAN", async () => {
      const body = (await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Lock[]; nodes: Array<{ notifications: string }> };
      return body.locks.find((l) => l.resource === "lock:scanned" && l.state === "held");
    });
    expect(shown).toMatchObject({ token: "scan-token", quorumHeld: 3 });
    await Promise.all(clients.map((c) => c.del("lock:scanned")));
    await until("lock's release found by SCAN", async () => {
      const body = (await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Lock[] };
      const l = body.locks.find((x) => x.resource === "lock:scanned");
      return !l || l.state === "released";
    });
  });
});
