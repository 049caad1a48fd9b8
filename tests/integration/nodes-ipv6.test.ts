import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HealthModule from "@/app/api/health/route";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import { call, lockDetail, OPERATOR_TOKEN, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * Lock nodes addressed by IPv6 literals (`redis://[::1]:port`), as on an IPv6-only network: the console watches
 * them, shows their locks and releases one, and names them in its health by the address it was given.
 */
describe("lock nodes on IPv6 addresses", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let release: typeof ReleaseModule;
  let health: typeof HealthModule;

  beforeAll(async () => {
    // The nodes listen on ::1 as well (the test's own clients keep 127.0.0.1); the console is given only ::1.
    cluster = await setUpConsole({ nodes: 3, extraArgs: ["--bind", "127.0.0.1", "::1"] });
    process.env.REDIS_URLS = cluster.ports.map((port) => `redis://[::1]:${port}`).join(",");
    clients = cluster.clients();
    release = await import("@/app/api/locks/[resource]/release/route");
    health = await import("@/app/api/health/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("connects to every node over IPv6 and names each by its bracketed address", async () => {
    // What each node sees: the console's connections come from ::1.
    for (const client of clients) {
      const list = await client.client("LIST");
      expect(list).toMatch(/addr=\[?::1\]?:\d+/);
    }
    const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ id: string; url: string; up: boolean }> };
    expect(body.nodes.map((n) => [n.id, n.url, n.up])).toEqual(cluster.ports.map((port, i) => [`node-${i}`, `redis://[::1]:${port}`, true]));
  });

  it("shows a lock taken on the nodes and releases it on all three", async () => {
    const resource = "lock:ipv6/orders-1";
    await Promise.all(clients.map((c) => c.set(resource, "token-v6", "PX", 600_000)));
    await until(`${resource} held on 3 nodes`, async () => (await lockDetail(resource))?.quorumHeld === 3);

    const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
      token: OPERATOR_TOKEN,
      params: { resource },
      body: { reason: "holder crashed", token: "token-v6" },
      headers: { "x-lockscope-actor": "olivia" },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((res.body as { nodes: Array<{ nodeId: string; result: string }> }).nodes.map((n) => n.result)).toEqual(["deleted", "deleted", "deleted"]);
    expect(await Promise.all(clients.map((c) => c.exists(resource)))).toEqual([0, 0, 0]);
    await until(`${resource} shown as force-released`, async () => (await lockDetail(resource))?.state === "force-released");
  });
});
