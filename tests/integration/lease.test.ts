import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";

const RESOURCE = "lockscope:lease:stall-test";

/**
 * The console's leases (the lab's one run at a time, the metrics reporter, a lock pattern change) are held with
 * its own Redlock engine and extended while held. With one node of three down, a stall of another for about a
 * second (a fork for a snapshot, a long command, a busy machine) just when an extension falls due must not lose
 * one: the lab run holding it stopped as failed ("the lab lease was lost") though both nodes answered again a
 * moment later.
 */
describe("a console lease, one node down and another stalled for a moment", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
  });
  afterAll(async () => {
    cluster.resume(0);
    await tearDownConsole(cluster);
  });

  it("is still held, on the nodes that answer, after the stall", async () => {
    const { takeLease } = await import("@/server/cluster/lease");
    const takenAt = Date.now();
    const lease = await takeLease(RESOURCE, 10_000, "lease stall test");
    try {
      await cluster.kill(1);
      // Node 0 stalls for 1.2 s around the end of the lease's first 10 s.
      await sleep(Math.max(0, takenAt + 9_200 - Date.now()));
      cluster.pause(0);
      await sleep(1_200);
      cluster.resume(0);
      await sleep(1_500);
      expect(lease.signal.aborted, String(lease.signal.reason)).toBe(false);
      const ttls = await Promise.all([0, 2].map((i) => cluster.client(i).pttl(RESOURCE)));
      expect(ttls.every((ms) => ms > 0), `TTLs on nodes 0 and 2: ${ttls.join(", ")}`).toBe(true);
    } finally {
      await lease.release();
    }
  }, 60_000);
});
