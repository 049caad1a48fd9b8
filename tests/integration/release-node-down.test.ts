import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HealthModule from "@/app/api/health/route";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import { call, lockDetail, OPERATOR_TOKEN, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A force release while one of three nodes is down: the two that answer delete the lock, the third cannot be
 * asked. The lock's timeline tells what the operator did (force-released, with their words), once, and never
 * an acquisition that nobody made, however the deletes' notifications and the down node's timeout interleave.
 */
describe("force release with a node down", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let release: typeof ReleaseModule;
  let health: typeof HealthModule;


  beforeAll(async () => {
    // A node timeout of 1.5 s: a frozen node holds a release up for several seconds (its timeout, then a read again).
    cluster = await setUpConsole({ nodes: 3, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "1500" } });
    clients = cluster.clients();
    release = await import("@/app/api/locks/[resource]/release/route");
    health = await import("@/app/api/health/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("ends the lock as force-released by the operator, and the down node's last value acquires nothing", async () => {
    const resources = ["lock:down/1", "lock:down/2", "lock:down/3", "lock:down/4"];
    for (const resource of resources) await Promise.all(clients.map((c) => c.set(resource, `token-of-${resource}`, "PX", 600_000)));
    for (const resource of resources) await until(`${resource} held on 3 nodes`, async () => (await lockDetail(resource))?.quorumHeld === 3);
    await cluster.kill(2);
    await until("node-2 down in the health", async () => {
      const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ id: string; up: boolean }> };
      return body.nodes.find((n) => n.id === "node-2")?.up === false;
    });

    for (const resource of resources) {
      const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
        token: OPERATOR_TOKEN,
        params: { resource },
        body: { reason: "holder crashed", token: `token-of-${resource}` },
        headers: { "x-lockscope-actor": "olivia" },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect((res.body as { nodes: Array<{ result: string }> }).nodes.map((n) => n.result)).toEqual(["deleted", "deleted", "error"]);
    }
    // Long enough for any late reading of the down node's last value to have been taken for a new holder.
    await new Promise((r) => setTimeout(r, 3_000));
    for (const resource of resources) {
      const shown = await lockDetail(resource);
      const story = shown?.timeline.map((t) => `${t.type}${t.detail ? ` ${t.detail}` : ""}`);
      expect([resource, shown?.state], JSON.stringify(story)).toEqual([resource, "force-released"]);
      expect(shown?.timeline.filter((t) => t.type === "acquired"), JSON.stringify(story)).toHaveLength(1);
      expect(shown?.timeline.at(-1), JSON.stringify(story)).toMatchObject({ type: "force-released", detail: "by olivia: “holder crashed”" });
    }
  });

  it("tells the force release on the timeline when a frozen node holds the release up for seconds", async () => {
    await cluster.restart(2);
    const resource = "lock:frozen/1";
    await Promise.all(clients.map((c) => c.set(resource, "frozen-token", "PX", 600_000)));
    await until(`${resource} held on 3 nodes`, async () => (await lockDetail(resource))?.quorumHeld === 3);
    // Frozen, not gone: the release waits out its timeout there, then reads it again, before it answers.
    cluster.pause(1);
    try {
      const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
        token: OPERATOR_TOKEN,
        params: { resource },
        body: { reason: "stuck", token: "frozen-token" },
        headers: { "x-lockscope-actor": "olivia" },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const shown = await until("the lock ended", async () => {
        const lock = await lockDetail(resource);
        return lock && !["held", "partial"].includes(lock.state) ? lock : null;
      });
      const story = shown.timeline.map((t) => `${t.type}${t.detail ? ` ${t.detail}` : ""}`);
      expect(story.at(-1), JSON.stringify(story)).toBe("force-released by olivia: “stuck”");
      expect(shown.state).toBe("force-released");
    } finally {
      cluster.resume(1);
    }
  });

  it("refuses with 503, touching nothing, a lock that only a node not answering holds", async () => {
    const resource = "lock:only-on-frozen";
    await clients[1]!.set(resource, "frozen-only", "PX", 600_000);
    await until(`${resource} held on node-1`, async () => (await lockDetail(resource))?.quorumHeld === 1);
    cluster.pause(1);
    try {
      const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
        token: OPERATOR_TOKEN,
        params: { resource },
        body: { reason: "stuck" },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      const message = (res.body as { error: { message: string } }).error.message;
      expect(message).toContain("node-1 did not answer, so it may still hold it: nothing was touched");
      expect(message).not.toContain("released or expired");
    } finally {
      cluster.resume(1);
    }
    expect(await clients[1]!.get(resource)).toBe("frozen-only");
  });
});
