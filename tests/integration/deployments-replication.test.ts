import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisNode } from "@/lib/redis-node";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

type Replication = { role: string; readAt: number; replicas: Array<{ address: string; state: string; lagBytes: number }> };
type HealthNode = { id: string; up: boolean; replication?: Replication };

/** One standalone primary with a replica: the health's replication is the primary's, and only while it can be read. */
describe("a standalone primary's replication in the health", () => {
  let cluster: TestCluster;
  let replica: RedisNode;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    replica = await RedisNode.start({ dir: mkdtempSync(path.join(os.tmpdir(), "lockscope-replica-")), extraArgs: ["--replicaof", "127.0.0.1", String(cluster.ports[0])] });
  }, 60_000);
  afterAll(async () => {
    await tearDownConsole(cluster);
    await replica?.stop();
  });

  it("lists the replica with the time of the reading, and drops the reading once the primary cannot be read, rather than keep showing it as current", async () => {
    const ready = await import("@/app/api/ready/route");
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200);
    const health = await import("@/app/api/health/route");
    const node = async () => ((await call(health.GET, "GET", "/api/health", { token: VIEWER_TOKEN })).body as { nodes: HealthNode[] }).nodes[0]!;
    const listed = await until("the replica online in the primary's replication", async () => {
      const n = await node();
      return n.replication?.replicas.some((r) => r.state === "online") ? n : null;
    });
    expect(listed.replication).toMatchObject({ role: "master", replicas: [{ address: `127.0.0.1:${replica.port}`, state: "online" }] });
    expect(Date.now() - listed.replication!.readAt).toBeLessThan(5_000);

    await cluster.kill(0);
    let lastReadAt = listed.replication!.readAt;
    const after = await until("the primary's replication gone from the health", async () => {
      const n = await node();
      if (n.replication) lastReadAt = n.replication.readAt;
      return n.replication === undefined ? { n, at: Date.now() } : null;
    }, 20_000);
    expect(after.n.up).toBe(false);
    // Three polls missed, not the first: the last reading was shown until it was more than 6 s old.
    expect(after.at - lastReadAt).toBeGreaterThan(6_000);
  }, 60_000);
});
