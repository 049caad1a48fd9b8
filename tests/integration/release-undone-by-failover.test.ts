import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LockDetail } from "@/lib/locks/types";
import { call, listedLosses, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { promotedPrimary, setUpConsoleOverSentinels, type SentinelSet } from "../support/sentinel";
import { until } from "../support/wait";

/**
 * A force release on a Sentinel primary whose replicas had not copied the delete when it failed: the promoted
 * replica serves the lock again, to the holder it was released from. The operator was told it was released.
 */
describe("a force release undone by a failover", () => {
  let cluster: TestCluster;
  let set: SentinelSet;

  beforeAll(async () => {
    ({ cluster, set } = await setUpConsoleOverSentinels("lockscope-release-undone-"));
  }, 90_000);
  afterAll(async () => {
    for (const r of set?.replicas ?? []) if (r.isPaused) r.resume();
    await tearDownConsole(cluster);
    await set?.close();
  });

  it("says on the lock's page that the failover undid the release, and counts it", async () => {
    const locks = await import("@/app/api/locks/route");
    const one = await import("@/app/api/locks/[resource]/route");
    const ready = await import("@/app/api/ready/route");
    const release = await import("@/app/api/locks/[resource]/release/route");
    const metrics = await import("@/app/metrics/route");
    const detail = async (resource: string) =>
      (await call(one.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } })).body as LockDetail;
    const listed = async () => ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Array<{ resource: string; state: string }> }).locks;
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200);

    const primary = new Redis(set.primary.port, "127.0.0.1", { maxRetriesPerRequest: 0, retryStrategy: () => null });
    primary.on("error", () => undefined);
    await primary.set("lock:undone", "holder-a", "PX", 120_000);
    expect(await primary.wait(2, 5_000)).toBe(2);
    await until("the lock listed", async () => (await listed()).some((l) => l.resource === "lock:undone" && l.state === "held"));

    // Frozen and cut off: both replicas have the lock, and neither can copy the delete.
    for (const r of set.replicas) r.pause();
    await primary.client("KILL", "TYPE", "replica");
    const res = await call(release.POST, "POST", "/api/locks/lock%3Aundone/release", { body: { reason: "stuck job", token: "holder-a" }, params: { resource: "lock:undone" } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const released = res.body as { outcome: string; replication?: { replicas: Array<{ hasRelease: boolean }> } };
    expect(released.outcome).toBe("released");
    expect(released.replication?.replicas.every((r) => !r.hasRelease)).toBe(true);
    await until("the lock shown force-released", async () => (await detail("lock:undone")).state === "force-released");

    primary.disconnect();
    await set.primary.kill();
    for (const r of set.replicas) r.resume();
    const promoted = await promotedPrimary(set);
    try {
      expect(await promoted.client.get("lock:undone")).toBe("holder-a");
    } finally {
      promoted.client.disconnect();
    }

    // Held again, and the page says why: the failover undid the release, not a holder taking the lock again.
    const page = await until(
      "the release shown undone",
      async () => {
        const d = await detail("lock:undone");
        return d.state === "held" && d.timeline.some((t) => t.type === "release-undone") ? d : null;
      },
      60_000,
    ).catch(async (error: unknown) => {
      const d = await detail("lock:undone");
      throw new Error(`${String(error)}; the lock's page now: ${d.state}, ${JSON.stringify(d.timeline.map((t) => [t.type, t.detail]))}`);
    });
    const undone = page.timeline.find((t) => t.type === "release-undone");
    expect(undone?.detail).toMatch(/force release .*undone by the failover .*had not copied it/);
    // Not a lock the nodes lost for its holder: the holder has it again.
    expect((await listedLosses()).filter((l) => l.resource === "lock:undone")).toEqual([]);
    const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
    expect(text).toMatch(/^lockscope_force_releases_undone_total\{deployment="default"\} 1$/m);
  }, 150_000);
});
