import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestCluster } from "../support/redis";
import { call, lockDetail, listedLocks, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

/**
 * Nodes that refuse scripts and transactions too (EVAL, EVALSHA, MULTI and EXEC renamed away or not granted to the
 * console's Redis user, as on some managed services): the console reads its locks with plain pipelined reads. It
 * used to fall back to MULTI alone, so its watchers never came up, and a held lock's page said that no node held it.
 */
describe("the live view on nodes that refuse scripts and MULTI", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await setUpConsole({
      nodes: 1,
      extraArgs: ["--rename-command", "EVAL", "", "--rename-command", "EVALSHA", "", "--rename-command", "MULTI", "", "--rename-command", "EXEC", ""],
    });
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("lists a held lock and shows its holder, rather than saying no node holds it", async () => {
    await cluster.client(0).set("lock:no-transactions", "holder-tx-1", "PX", 600_000);
    await startLiveReconciled();
    const detail = await until("the lock's page shows it", async () => await lockDetail("lock:no-transactions"));
    expect(detail).toMatchObject({ resource: "lock:no-transactions", holders: [{ id: "holder-tx-1" }] });
    expect((await listedLocks()).map((l) => l.resource)).toContain("lock:no-transactions");
    const health = await call((await import("@/app/api/health/route")).GET, "GET", "/api/health");
    expect((health.body as { nodes: Array<{ watcher: { up: boolean } }> }).nodes.map((n) => n.watcher.up)).toEqual([true]);
  });
});
