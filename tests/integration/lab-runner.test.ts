import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ping } from "@/lib/redis-node";
import { newRunId } from "@/lib/lab/keys";
import { LabRun, type NodeProcessControl } from "@/lib/lab/runner";
import type { RunSettings } from "@/lib/lab/settings";
import { startCluster, type TestCluster } from "../support/redis";

/**
 * The lab's runner on its own, on nodes this test owns: faults on the node processes (as on the console's
 * embedded nodes), faults on the workers' connections only, and the time limit.
 */
describe("lab runner", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(3);
  });
  afterAll(async () => {
    await cluster.close();
  });

  const processControl = (): NodeProcessControl => ({
    kill: (i) => cluster.kill(i),
    restart: (i) => cluster.restart(i),
    pause: (i) => cluster.pause(i),
    resume: (i) => cluster.resume(i),
  });

  async function leftovers(id: string): Promise<string[]> {
    const found: string[] = [];
    for (let i = 0; i < 3; i++) {
      const [, keys] = await cluster.client(i).scan("0", "MATCH", `*${id}*`, "COUNT", 10_000);
      found.push(...keys);
    }
    return found;
  }

  function lab(settings: RunSettings, extra: Partial<ConstructorParameters<typeof LabRun>[0]> = {}) {
    const id = newRunId();
    return { id, run: new LabRun({ id, settings, nodeUrls: cluster.urls, ...extra }) };
  }

  it("kills a node's process mid-run and restarts it after the TTL; Redlock still sells exactly the stock", async () => {
    const { id, run } = lab(
      { strategy: "redlock", stock: 300, workers: 40, ttlMs: 300, workMs: 1, fault: { node: 1, kind: "kill", atMs: 200, forMs: 600 } },
      { processControl: processControl() },
    );
    expect(run.faultMode).toBe("process");
    const outcome = await run.run();
    expect(outcome.result).toMatchObject({ sold: 300, remaining: 0, lostUpdates: 0 });
    expect(outcome.fault).toMatchObject({ node: 1, kind: "kill", mode: "process" });
    expect(outcome.fault!.description).toMatch(/SIGKILL/);
    expect(outcome.fault!.endedAtMs).not.toBeNull();
    expect(await ping(cluster.nodes[1]!.port)).toBe(true);
    expect(await leftovers(id)).toEqual([]);
  });

  it("stops a node's process (SIGSTOP) mid-run and continues it; Redlock still sells exactly the stock", async () => {
    const { run } = lab(
      { strategy: "redlock-fenced", stock: 200, workers: 20, ttlMs: 500, workMs: 1, fault: { node: 2, kind: "pause", atMs: 100, forMs: 700 } },
      { processControl: processControl() },
    );
    const outcome = await run.run();
    expect(outcome.result).toMatchObject({ sold: 200, remaining: 0, lostUpdates: 0 });
    expect(outcome.fault!.description).toMatch(/SIGSTOP/);
    expect(cluster.nodes[2]!.isPaused).toBe(false);
    expect(await ping(cluster.nodes[2]!.port)).toBe(true);
  });

  it("on nodes it does not own, stalls only its workers' commands to the node, and says so", async () => {
    const { run } = lab({ strategy: "redlock", stock: 150, workers: 20, ttlMs: 500, workMs: 1, fault: { node: 1, kind: "pause", atMs: 50 } });
    expect(run.faultMode).toBe("connections");
    const outcome = await run.run();
    expect(outcome.result).toMatchObject({ sold: 150, remaining: 0, lostUpdates: 0 });
    expect(outcome.fault).toMatchObject({ mode: "connections", kind: "pause" });
    expect(outcome.fault!.description).toMatch(/Stalls the lab workers' own commands to node 1/);
    expect(cluster.nodes[1]!.isPaused).toBe(false);
  });

  it("stops at its time limit, reports what it sold, and cleans up", async () => {
    const { id, run } = lab({ strategy: "naive", stock: 100_000, workers: 10, ttlMs: 1000, workMs: 20 }, { maxRunMs: 800 });
    const outcome = await run.run();
    expect(outcome.stopReason).toBe("time-limit");
    expect(outcome.result.sold).toBeGreaterThan(0);
    expect(outcome.result.lostUpdates).toBe(0);
    expect(outcome.result.remaining).toBe(100_000 - outcome.result.sold);
    expect(await leftovers(id)).toEqual([]);
  });

  it("stops promptly when cancelled, even with a node stalled, and brings the node back", async () => {
    const controller = new AbortController();
    const { id, run } = lab(
      { strategy: "redlock", stock: 100_000, workers: 50, ttlMs: 2000, workMs: 5, fault: { node: 2, kind: "pause", atMs: 0 } },
      { processControl: processControl(), signal: controller.signal },
    );
    const done = run.run();
    while (run.progress().sold < 20) await new Promise((r) => setTimeout(r, 20));
    controller.abort("cancelled");
    const outcome = await done;
    expect(outcome.stopReason).toBe("cancelled");
    expect(outcome.result.lostUpdates).toBe(0);
    expect(cluster.nodes[2]!.isPaused).toBe(false);
    expect(await leftovers(id)).toEqual([]);
  });
});
