import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newRunId } from "@/lib/lab/keys";
import { LabRun } from "@/lib/lab/runner";
import type { RunSettings } from "@/lib/lab/settings";
import { startCluster, type TestCluster } from "../support/redis";

/**
 * Lab runs on nodes that refuse Lua scripts (EVAL and EVALSHA renamed away, as some managed services do, or not
 * granted by the ACL): a strategy that needs them fails at once, saying which nodes refuse which commands,
 * instead of its workers retrying until the time limit; the strategies that need none still run.
 */
describe("lab runs on nodes that refuse scripts", () => {
  let renamed: TestCluster;
  let acl: TestCluster;
  beforeAll(async () => {
    renamed = await startCluster(3, ["--rename-command", "EVAL", "", "--rename-command", "EVALSHA", ""]);
    acl = await startCluster(3);
    // Node 0 and node 1 refuse scripts to the user in the lab's URLs; node 2 runs them.
    for (const i of [0, 1]) await acl.client(i).call("ACL", "SETUSER", "default", "-eval", "-evalsha");
  });
  afterAll(async () => {
    await renamed?.close();
    await acl?.close();
  });

  const run = (cluster: TestCluster, settings: RunSettings) =>
    new LabRun({ id: newRunId(), settings, nodeUrls: cluster.urls, maxRunMs: 5_000 }).run();

  it("fails an atomic run at once on renamed commands, naming node 0 and both commands, without the arguments Redis echoes", async () => {
    const outcome = await run(renamed, { strategy: "atomic", stock: 20, workers: 2, ttlMs: 1000, workMs: 0 });
    expect(outcome.stopReason).toBe("error");
    expect(outcome.error).toMatch(/^The atomic strategy runs Lua scripts, and node 0 refuses them \(EVAL and EVALSHA: ERR unknown command/);
    expect(outcome.error).toMatch(/Allow scripts on the lock nodes/);
    expect(outcome.error).not.toMatch(/with args beginning with: '/);
    // Failed before its sale began: its stock of 20 was never written, so there are no figures to show.
    expect(outcome.result).toBeNull();
  });

  it("fails a Redlock run when too few nodes run scripts for a quorum, naming them and the commands the ACL refuses", async () => {
    const outcome = await run(acl, { strategy: "redlock", stock: 20, workers: 2, ttlMs: 1000, workMs: 0 });
    expect(outcome.stopReason).toBe("error");
    expect(outcome.error).toMatch(/^The redlock strategy runs Lua scripts, and node 0 and node 1 refuse them \(EVAL and EVALSHA: NOPERM/);
    expect(outcome.error).toMatch(/a quorum of 2 of the 3 nodes/);
  });

  it("runs Redlock with one node of three refusing scripts (a quorum runs them), and notes that node", async () => {
    const one = await startCluster(3);
    try {
      await one.client(2).call("ACL", "SETUSER", "default", "-eval", "-evalsha");
      const outcome = await run(one, { strategy: "redlock", stock: 5, workers: 2, ttlMs: 1000, workMs: 0 });
      expect(outcome.stopReason).toBe("sold-out");
      expect(outcome.result).toMatchObject({ sold: 5, remaining: 0, lostUpdates: 0 });
      expect(outcome.notes).toContainEqual(expect.stringMatching(/^Node 2 refuses Lua scripts \(EVAL and EVALSHA: NOPERM .*\): Redlock counted it as down for every lock\.$/));
    } finally {
      await one.close();
    }
  });

  it("still runs the naive strategy, which needs no script", async () => {
    const outcome = await run(renamed, { strategy: "naive", stock: 5, workers: 2, ttlMs: 1000, workMs: 0 });
    expect(outcome.stopReason).toBe("sold-out");
    expect(outcome.result).toMatchObject({ sold: 5, remaining: 0, lostUpdates: 0 });
  });
});
