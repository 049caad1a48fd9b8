import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Redlock, ResourceHeldError } from "@lockscope/redlock";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunRecord } from "@/lib/lab/types";
import { startCluster, type TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, useDeployments, VIEWER_TOKEN } from "../support/console";
import { until } from "../support/wait";

/**
 * The lab on a console whose first deployment is not the one the lab runs on: a standalone reached with a
 * password file (the lab's workers cannot dial it by URL), then the three-node "orders" Redlock set, where the lab
 * runs. Its one-run-at-a-time lease must be held on the lab's own nodes, which every console running the lab over
 * them shares, whatever deployments each also watches.
 */
describe("the lab's lease, beside a deployment the lab does not run on", () => {
  let orders: TestCluster;
  let secure: TestCluster;

  beforeAll(async () => {
    orders = await setUpConsole({ nodes: 3 });
    secure = await startCluster(1);
    await secure.client(0).config("SET", "requirepass", "lab-lease-secret");
    const passwordFile = path.join(mkdtempSync(path.join(os.tmpdir(), "lockscope-lab-lease-")), "password");
    writeFileSync(passwordFile, "lab-lease-secret\n", { mode: 0o600 });
    useDeployments([
      { name: "secure", kind: "standalone", url: secure.urls[0], passwordFile },
      { name: "orders", kind: "redlock", urls: orders.urls },
    ]);
  });
  afterAll(async () => {
    await tearDownConsole(orders);
    await secure?.close();
  });

  it("holds the run's lease on the lab's nodes: a console over them that watches only orders is refused, and the other deployment's node down does not stop a run", async () => {
    const runs = await import("@/app/api/demo/runs/route");
    const run = await import("@/app/api/demo/runs/[id]/route");
    const listed = await call(runs.GET, "GET", "/api/demo/runs", { token: VIEWER_TOKEN });
    expect((listed.body as { lab: unknown }).lab).toMatchObject({ deployment: "orders", nodes: 3 });

    // The other deployment's only node is down: the lab's own nodes all answer, so the run starts.
    await secure.kill(0);
    const res = await call(runs.POST, "POST", "/api/demo/runs", { body: { strategy: "redlock", stock: 100_000, workers: 5, ttlMs: 1000, workMs: 5 } });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    const id = (res.body as { id: string }).id;
    try {
      await until("the run sells", async () => {
        const record = (await call(run.GET, "GET", `/api/demo/runs/${id}`, { params: { id }, token: VIEWER_TOKEN })).body as RunRecord;
        return record.progress.sold > 0;
      });
      // Another console over the same lab nodes, watching orders alone, takes the lab's lease on them before a run
      // (with its engine, as this one does): it is held, so that console answers 409 rather than run alongside.
      const other = new Redlock(orders.clients(), { retryCount: 0, telemetry: false });
      try {
        await expect(other.acquire(["lockscope:lease:lab-run"], 10_000)).rejects.toBeInstanceOf(ResourceHeldError);
      } finally {
        await other.quit();
      }
    } finally {
      const cancelled = await call(run.DELETE, "DELETE", `/api/demo/runs/${id}`, { params: { id } });
      expect(cancelled.status).toBe(200);
    }
  });
});
