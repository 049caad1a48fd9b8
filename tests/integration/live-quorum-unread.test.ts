import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listedLocks, lockDetail, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { openStream } from "../support/stream";
import { until } from "../support/wait";

/**
 * A Redlock on three nodes; two of them freeze (a long GC-like pause), and meanwhile the third loses its copy (deleted
 * there alone, evicted, expired early on a fast clock). The two that do not answer are a quorum by themselves: what
 * they hold cannot be told, so the lock is not over. When they answer with the value, a quorum holds it, and nobody
 * can take it until its TTL: the console shows it held, never released and then gone.
 */
describe("a lock whose quorum cannot be read while another node loses its copy", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: "lock:*", LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
    await startLiveReconciled();
  });
  afterAll(async () => {
    for (const i of [0, 2]) if (cluster?.paused(i)) cluster.resume(i);
    await tearDownConsole(cluster);
  });

  it("keeps it unreadable, not released, and held once the quorum answers with it", async () => {
    const stream = await openStream((await import("@/app/api/locks/stream/route")).GET);
    const [n0, n1, n2] = cluster.clients();
    await Promise.all([n0!, n1!, n2!].map((c) => c.set("lock:quorum-unread/1", "holder-q", "PX", 120_000)));
    await until("held on three nodes", async () => (await lockDetail("lock:quorum-unread/1"))?.quorumHeld === 3);
    cluster.pause(0);
    cluster.pause(2);
    await until("nodes 0 and 2 shown not answering", async () => {
      const nodes = (await lockDetail("lock:quorum-unread/1"))?.nodes;
      return nodes?.[0]?.up === false && nodes[2]?.up === false;
    });
    await n1!.del("lock:quorum-unread/1");
    await until("node 1's copy read gone", async () => (await lockDetail("lock:quorum-unread/1"))?.nodes[1]?.token === null);
    const during = await lockDetail("lock:quorum-unread/1");
    expect(during).toMatchObject({ state: "held", unreadable: true });

    cluster.resume(0);
    cluster.resume(2);
    await until("nodes 0 and 2 read again", async () => {
      const nodes = (await lockDetail("lock:quorum-unread/1"))?.nodes;
      return nodes?.[0]?.up === true && nodes[2]?.up === true && nodes[0]?.token === "holder-q" ? true : null;
    });
    const after = await lockDetail("lock:quorum-unread/1");
    expect(after).toMatchObject({ state: "held", token: "holder-q", quorumHeld: 2 });
    expect(after?.unreadable).toBeUndefined();
    expect(after?.timeline.map((e) => e.type)).not.toContain("released");
    expect((await listedLocks()).find((l) => l.resource === "lock:quorum-unread/1")?.state).toBe("held");
    // The stream tells the same: held by the quorum, never an end.
    await stream.until("the stream shows it held by the quorum", () => {
      const lock = stream.lock("lock:quorum-unread/1");
      return lock?.state === "held" && lock.quorumHeld === 2 && lock.unreadable === undefined;
    });
    expect(stream.events.filter((e) => e.event === "lock" && e.data.includes('"lock:quorum-unread/1"')).map((e) => (JSON.parse(e.data) as { state: string }).state)).not.toContain("released");
    stream.close();
  });
});
