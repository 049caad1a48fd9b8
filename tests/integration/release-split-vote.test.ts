import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import { call, lockDetail, OPERATOR_TOKEN, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A force release that takes one value off the nodes while the lock goes on under another (a split vote: two
 * clients each on one node of three). Nothing ends, so there is no end to label; the lock's timeline still says
 * what the operator did.
 */
describe("force release of one side of a split vote", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let release: typeof ReleaseModule;


  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    clients = cluster.clients();
    release = await import("@/app/api/locks/[resource]/release/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("says on the timeline that the operator released one value and the lock goes on with the other", async () => {
    const resource = "lock:split-vote";
    await clients[0]!.set(resource, "client-a", "PX", 60_000);
    await clients[1]!.set(resource, "client-b", "PX", 60_000);
    const before = await until("the split vote listed", async () => {
      const d = await lockDetail(resource);
      return d?.state === "partial" ? d : null;
    });
    const released = before.holders[0]!.id;
    const other = released === "client-a" ? "client-b" : "client-a";

    const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
      token: OPERATOR_TOKEN,
      params: { resource },
      body: { reason: "one side of a split vote", token: released },
      headers: { "x-lockscope-actor": "olivia" },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);

    const after = await until("the release on the timeline", async () => {
      const d = await lockDetail(resource);
      return d?.timeline.some((e) => e.type === "force-released") ? d : null;
    });
    expect(after).toMatchObject({ state: "partial", holders: [{ id: other }] });
    expect(after.timeline.filter((e) => e.type === "force-released")).toEqual([
      expect.objectContaining({ detail: "by olivia: “one side of a split vote”; the lock goes on with another value on 1 of 3 nodes" }),
    ]);
  });
  it("a minority value released by a script does not make the quorum holder's own release read as the operator's", async () => {
    const resource = "lock:split-minority";
    await clients[0]!.set(resource, "quorum-holder", "PX", 60_000);
    await clients[1]!.set(resource, "quorum-holder", "PX", 60_000);
    await clients[2]!.set(resource, "stray-value", "PX", 60_000);
    await until("the lock held by its quorum", async () => {
      const d = await lockDetail(resource);
      return d?.state === "held" && d.token === "quorum-holder" ? d : null;
    });

    const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
      token: OPERATOR_TOKEN,
      params: { resource },
      body: { reason: "stray value on node-2", token: "stray-value" },
      headers: { "x-lockscope-actor": "olivia" },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await Promise.all(clients.map((c) => c.get(resource)))).toEqual(["quorum-holder", "quorum-holder", null]);
    // The lock's timeline says what the operator did, though the lock goes on under its quorum's value.
    const after = await until("the release on the timeline", async () => {
      const d = await lockDetail(resource);
      return d?.timeline.some((e) => e.type === "force-released") ? d : null;
    });
    expect(after).toMatchObject({ state: "held", token: "quorum-holder" });
    expect(after.timeline.filter((e) => e.type === "force-released")).toEqual([
      expect.objectContaining({ detail: "by olivia: “stray value on node-2”; the lock goes on with another value on 2 of 3 nodes" }),
    ]);

    // The quorum's holder finishes and releases its lock itself: nobody force-released that value.
    await clients[0]!.del(resource);
    await clients[1]!.del(resource);
    const ended = await until("the lock ended", async () => {
      const d = await lockDetail(resource);
      return d !== null && d.state !== "held" && d.state !== "partial" && d.state !== "elapsed" ? d : null;
    });
    expect(ended.state).toBe("released");
  });
});
