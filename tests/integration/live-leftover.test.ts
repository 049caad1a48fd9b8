import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockDetail, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A Redlock released while one of its nodes does not answer: its holder's delete reaches two nodes of three,
 * the third keeps the key until its TTL. When that node answers again, what it keeps is what is left of the
 * lock that was released, not a lock someone acquired.
 */
describe("a node that missed a release answers again", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
    await startLiveReconciled();
  });
  afterAll(async () => {
    if (cluster?.paused(1)) cluster.resume(1);
    await tearDownConsole(cluster);
  });

  it("keeps the lock released, with the node's leftover copy shown on it, and acquires nothing", async () => {
    const [n0, n1, n2] = cluster.clients();
    await Promise.all([n0!, n1!, n2!].map((c) => c.set("lock:leftover/1", "holder-leftover", "PX", 120_000)));
    await until("held on three nodes", async () => (await lockDetail("lock:leftover/1"))?.quorumHeld === 3);
    cluster.pause(1);
    await until("node-1 shown not answering", async () => (await lockDetail("lock:leftover/1"))?.nodes[1]?.up === false);
    await n0!.del("lock:leftover/1");
    await n2!.del("lock:leftover/1");
    await until("released", async () => (await lockDetail("lock:leftover/1"))?.state === "released");

    cluster.resume(1);
    const back = await until("node-1 read again, with the key it kept", async () => {
      const d = await lockDetail("lock:leftover/1");
      return d?.nodes[1]?.up === true && d.nodes[1].token === "holder-leftover" ? d : null;
    });
    const story = JSON.stringify(back.timeline.map((t) => `${t.type} ${t.detail ?? ""}`));
    expect(back.state, story).toBe("released");
    expect(back.timeline.map((t) => t.type), story).toEqual(["acquired", "released"]);
    expect(await n1!.get("lock:leftover/1")).toBe("holder-leftover");
  });
});
