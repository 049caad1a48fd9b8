import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type * as RunsModule from "@/app/api/demo/runs/route";
import type * as RunModule from "@/app/api/demo/runs/[id]/route";
import type { RunRecord, RunSettings } from "@/lib/lab/types";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, VIEWER_TOKEN, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

type RunsRoute = typeof RunsModule;
type RunRoute = typeof RunModule;

/** The contention lab through its real routes, on three real redis-server nodes the test owns. */
describe("contention lab", () => {
  let cluster: TestCluster;
  let runs: RunsRoute;
  let run: RunRoute;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    runs = await import("@/app/api/demo/runs/route");
    run = await import("@/app/api/demo/runs/[id]/route");
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  async function start(settings: RunSettings): Promise<string> {
    const res = await call(runs.POST, "POST", "/api/demo/runs", { body: settings });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    return (res.body as { id: string }).id;
  }

  async function get(id: string): Promise<RunRecord> {
    const res = await call(run.GET, "GET", `/api/demo/runs/${id}`, { params: { id } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as RunRecord;
  }

  async function waitUntil(id: string, done: (r: RunRecord) => boolean, what: string): Promise<RunRecord> {
    return until(
      `run ${id}: ${what}`,
      async () => {
        const record = await get(id);
        return done(record) ? record : null;
      },
      120_000,
      100,
    );
  }

  const finish = (id: string) => waitUntil(id, (r) => r.status !== "running", "it ends");

  // A test that failed mid-run leaves its run going: cancelled here, or every later test would get 409.
  afterEach(async () => {
    const listed = await call(runs.GET, "GET", "/api/demo/runs", { token: VIEWER_TOKEN });
    if (listed.status !== 200) return;
    for (const left of (listed.body as { runs: RunRecord[] }).runs.filter((r) => r.status === "running")) {
      await call(run.DELETE, "DELETE", `/api/demo/runs/${left.id}`, { params: { id: left.id } });
      await finish(left.id);
    }
  }, 150_000);

  /** Every key on every node whose name mentions the run. */
  async function keysOf(id: string): Promise<string[]> {
    const found: string[] = [];
    for (let i = 0; i < 3; i++) {
      const client = cluster.client(i);
      let cursor = "0";
      do {
        const [next, keys] = await client.scan(cursor, "MATCH", `*${id}*`, "COUNT", 1000);
        cursor = next;
        found.push(...keys.filter((k) => !k.startsWith("lockscope:lab:run:")).map((k) => `node ${i}: ${k}`));
      } while (cursor !== "0");
    }
    return found;
  }

  it("without a lock, buyers racing on the stock sell units twice", async () => {
    const id = await start({ strategy: "none", stock: 100, workers: 25, ttlMs: 1000, workMs: 5 });
    const record = await finish(id);
    expect(record.status).toBe("done");
    expect(record.stopReason).toBe("sold-out");
    const result = record.result!;
    expect(result.remaining).toBe(0);
    expect(result.lostUpdates).toBeGreaterThan(0);
    expect(result.lostUpdates).toBe(result.sold - 100);
    // The stock is never written below 0 (each buyer checks it first): the overselling is in the sales.
    expect(result.oversold).toBe(result.sold - 100);
    expect(result.stockNeverNegative).toBe(true);
    expect(await keysOf(id)).toEqual([]);
  });

  it("the naive SETNX lock sells units twice when holders pause past its TTL", async () => {
    const id = await start({ strategy: "naive", stock: 20, workers: 8, ttlMs: 100, workMs: 2, pause: { probability: 1, ms: 250 } });
    const record = await finish(id);
    expect(record.status).toBe("done");
    expect(record.result!.lostUpdates).toBeGreaterThan(0);
    expect(record.result!.locksLost).toBeGreaterThan(0);
    expect(record.notes).toEqual([]);
  });

  it("never tells the operator no lock expires on a run whose locks expired under their holders", async () => {
    // 49 ms of pause under a 50 ms lock: shorter than the TTL, but taking the lock, reading and writing the stock
    // and the timer's own lateness use up the 1 ms left, so the locks expire before their holders release them
    // (most of them: on a quick, idle machine an order now and then fits its 1 ms, so the run sells 60).
    const id = await start({ strategy: "naive", stock: 60, workers: 1, ttlMs: 50, workMs: 0, pause: { probability: 1, ms: 49 } });
    const record = await finish(id);
    expect(record.status).toBe("done");
    expect(record.result!.locksLost).toBeGreaterThan(0);
    expect(record.notes.join(" ")).not.toMatch(/no lock expires/);
    expect(record.notes.join(" ")).toMatch(/1 ms to spare/);
  });

  it("the naive lock is exact when nobody outlasts the TTL", async () => {
    const id = await start({ strategy: "naive", stock: 60, workers: 20, ttlMs: 10_000, workMs: 1 });
    const record = await finish(id);
    expect(record.result).toMatchObject({ sold: 60, remaining: 0, lostUpdates: 0, locksLost: 0 });
    expect(record.result!.retries, JSON.stringify(record)).toBeGreaterThan(0);
    expect(record.result!.waitP99Ms).toBeGreaterThanOrEqual(record.result!.waitP50Ms!);
  });

  it("exports its engine's per-node error series at 0 before a node fails, so the first error is seen", async () => {
    const id = await start({ strategy: "redlock", stock: 10, workers: 2, ttlMs: 1000, workMs: 1 });
    expect((await finish(id)).status).toBe("done");
    const metrics = await import("@/app/metrics/route");
    const res = await call(metrics.GET, "GET", "/metrics", { token: null });
    expect(res.status).toBe(200);
    for (const node of ["node-0", "node-1", "node-2"]) expect(res.body as string).toContain(`lockscope_redlock_node_errors_total{node="${node}",operation="acquire"} 0\n`);
  });

  it("Redlock with 100 workers sells exactly the stock while one of three nodes is killed and restarted mid-run", async () => {
    // Unfenced, it is exact only while no holder outlasts its TTL (what is left of it once a slow acquisition is
    // done): long enough that a busy machine's stalls do not.
    const id = await start({ strategy: "redlock", stock: 300, workers: 100, ttlMs: 3_000, workMs: 1 });
    await waitUntil(id, (r) => r.progress.sold >= 30 || r.status !== "running", "30 units are sold");
    await cluster.kill(1);
    // Whatever lock node 1 held had its quorum with node 0 or node 2: read what they hold now.
    const heldAtKill = await Promise.all([0, 2].map((i) => cluster.client(i).get(`lock:lab:${id}:stock`)));
    await waitUntil(id, (r) => r.progress.sold >= 150 || r.status !== "running", "150 units are sold with node 1 dead");
    // Back, empty, only once every lock it may have held is gone (released or expired), as the Redis
    // documentation asks: restarted sooner, it could grant a lock that is still held.
    await until("the locks held when node 1 died are gone", async () => {
      const now = await Promise.all([0, 2].map((i) => cluster.client(i).get(`lock:lab:${id}:stock`)));
      return now.every((value, k) => value === null || value !== heldAtKill[k]);
    }, 30_000);
    await cluster.restart(1);
    const record = await finish(id);
    expect(record.status).toBe("done");
    expect(record.result).toMatchObject({ sold: 300, remaining: 0, lostUpdates: 0 });
    expect(await keysOf(id)).toEqual([]);
    // A hundred workers queueing for one lock sell slowly on a busy machine (76 s seen, pinned to one busy core).
  }, 240_000);

  it("Redlock keeps selling exactly when the lab cuts its workers' connections to a node it does not own", async () => {
    const id = await start({ strategy: "redlock", stock: 200, workers: 30, ttlMs: 5_000, workMs: 2, fault: { node: 2, kind: "kill", atMs: 100, forMs: 800 } });
    const record = await finish(id);
    expect(record.result).toMatchObject({ sold: 200, remaining: 0, lostUpdates: 0 });
    expect(record.fault).toMatchObject({ node: 2, kind: "kill", mode: "connections" });
    expect(record.fault!.description).toMatch(/connections/);
    expect(record.fault!.startedAtMs).not.toBeNull();
    expect(await cluster.client(2).ping()).toBe("PONG");
  }, 120_000);

  it("fenced Redlock with pauses past the TTL refuses the stale writes and sells no unit twice", async () => {
    const id = await start({ strategy: "redlock-fenced", stock: 40, workers: 10, ttlMs: 100, workMs: 2, pause: { probability: 0.3, ms: 250 } });
    const record = await finish(id);
    expect(record.status).toBe("done");
    expect(record.result).toMatchObject({ sold: 40, remaining: 0, lostUpdates: 0, stockNeverNegative: true });
    expect(record.result!.staleWritesRejected).toBeGreaterThan(0);
    expect(await keysOf(id)).toEqual([]);
  });

  it("unfenced Redlock with the same pauses sells units twice", async () => {
    const id = await start({ strategy: "redlock", stock: 20, workers: 8, ttlMs: 100, workMs: 2, pause: { probability: 1, ms: 250 } });
    const record = await finish(id);
    expect(record.result!.lostUpdates).toBeGreaterThan(0);
  });

  it("the atomic decrement sells exactly the stock with no lock", async () => {
    const id = await start({ strategy: "atomic", stock: 500, workers: 50, ttlMs: 1000, workMs: 1 });
    const record = await finish(id);
    expect(record.result).toMatchObject({ sold: 500, remaining: 0, lostUpdates: 0, retries: 0, waitP99Ms: 0 });
  });

  it("lets another console start a run the moment it reads the last one done (the lab lease is let go first)", async () => {
    const { Lab } = await import("@/server/lab/lab");
    const { getNodes } = await import("@/server/nodes");
    const { ApiError } = await import("@/server/errors");
    const { getShutdownHooks, onShutdown } = await import("@/server/shutdown");
    // A second console over the same nodes: it starts its run as soon as node 0 has the first run's final record.
    // (Its shutdown hook would replace this console's: put that one back.)
    const ownHook = getShutdownHooks().find((h) => h.name === "lab")!;
    const other = new Lab();
    onShutdown(ownHook.name, ownHook.order, ownHook.run);
    const nodeZero = getNodes()[0]!.client as unknown as { eval: (...args: unknown[]) => Promise<unknown> };
    const evalOwn = nodeZero.eval.bind(nodeZero);
    let firstId = "";
    let seen: { status: number | string; id?: string } | null = null;
    nodeZero.eval = async (...args: unknown[]) => {
      const reply = await evalOwn(...args);
      // The run's record as saved: the final one is the first for this run that no longer reads "running".
      const saved = typeof args[4] === "string" && args[3] === firstId ? (JSON.parse(args[4]) as RunRecord) : null;
      if (seen === null && saved && saved.status !== "running") {
        seen = { status: "pending" };
        try {
          seen = { status: 202, id: (await other.start({ strategy: "atomic", stock: 10, workers: 1, ttlMs: 1000, workMs: 0 }, "other")).id };
        } catch (error) {
          seen = { status: error instanceof ApiError ? `${error.status} ${error.message}` : String(error) };
        }
      }
      return reply;
    };
    try {
      firstId = await start({ strategy: "atomic", stock: 20, workers: 2, ttlMs: 1000, workMs: 0 });
      expect((await finish(firstId)).status).toBe("done");
      await until("the other console tried its run", () => (seen !== null && seen.status !== "pending" ? seen : null), 30_000);
    } finally {
      nodeZero.eval = evalOwn;
    }
    expect(seen).toMatchObject({ status: 202 });
    const secondId = (seen as unknown as { id: string }).id;
    await until("the other console's run ends", async () => ((await other.get(secondId))?.status === "done" ? true : null), 60_000);
  });

  it("answers a cancel that comes as the run ends by itself with 200 and the run's own ending (done), not a cancel", async () => {
    const { getLab } = await import("@/server/lab/lab");
    const { getNodes } = await import("@/server/nodes");
    const lab = getLab();
    const cancelOwn = lab.cancel.bind(lab);
    let cancelEntered: () => void = () => undefined;
    const entered = new Promise<void>((resolve) => (cancelEntered = resolve));
    lab.cancel = (id: string) => {
      const answer = cancelOwn(id);
      cancelEntered();
      return answer;
    };
    const nodeZero = getNodes()[0]!.client as unknown as { eval: (...args: unknown[]) => Promise<unknown> };
    const evalOwn = nodeZero.eval.bind(nodeZero);
    let id = "";
    let cancelled: Promise<Awaited<ReturnType<typeof call>>> | null = null;
    // The run has sold out and is storing its final record: the operator's cancel arrives right then.
    nodeZero.eval = async (...args: unknown[]) => {
      const reply = await evalOwn(...args);
      const saved = typeof args[4] === "string" && args[3] === id ? (JSON.parse(args[4]) as RunRecord) : null;
      if (cancelled === null && saved && saved.status !== "running") {
        cancelled = call(run.DELETE, "DELETE", `/api/demo/runs/${id}`, { params: { id } });
        await entered;
      }
      return reply;
    };
    try {
      id = await start({ strategy: "atomic", stock: 20, workers: 2, ttlMs: 1000, workMs: 0 });
      await finish(id);
      await until("the cancel was sent", () => cancelled, 30_000);
    } finally {
      nodeZero.eval = evalOwn;
      lab.cancel = cancelOwn;
    }
    const res = await cancelled!;
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ id, status: "done", stopReason: "sold-out", cancelRequested: true });
    // Once ended, a cancel is the 409 it always was.
    expect((await call(run.DELETE, "DELETE", `/api/demo/runs/${id}`, { params: { id } })).status).toBe(409);
  });

  it("stops after the given number of orders", async () => {
    const id = await start({ strategy: "atomic", stock: 1000, workers: 10, orders: 120, ttlMs: 1000, workMs: 0 });
    const record = await finish(id);
    expect(record.stopReason).toBe("orders");
    expect(record.result).toMatchObject({ sold: 120, remaining: 880, lostUpdates: 0, orders: 120 });
  });

  it("on nodes it does not own, never warns that a short kill restarts the node empty: it only cuts the workers' connections", async () => {
    const id = await start({ strategy: "redlock", stock: 50, workers: 5, ttlMs: 5000, workMs: 1, fault: { node: 1, kind: "kill", atMs: 0, forMs: 100 } });
    const record = await finish(id);
    expect(record.fault).toMatchObject({ mode: "connections" });
    expect(record.fault!.description).toMatch(/the node itself keeps running/);
    const notes = record.notes.join(" ");
    expect(notes).not.toMatch(/restarts empty/);
    expect(notes).toMatch(/Node 1 keeps running with its locks through the cut, so it cannot grant a lock twice/);
  });

  it("serves a running run's live charts from every console, not only from the one running it", async () => {
    const { readRun } = await import("@/server/lab/store");
    const id = await start({ strategy: "naive", stock: 100_000, workers: 5, ttlMs: 1000, workMs: 5 });
    const live = await waitUntil(id, (r) => r.progress.sold > 0 && (r.series?.length ?? 0) >= 4, "it has chart points");
    // What another console over the same nodes answers to GET /api/demo/runs/{id}: the record on node 0.
    const elsewhere = await until(
      "node 0's record of the running run has chart points",
      async () => {
        const record = await readRun(cluster.client(0), id);
        return record && record.status === "running" && record.series!.length >= 4 ? record : null;
      },
      10_000,
    );
    expect(elsewhere.series!.slice(0, 4)).toEqual(live.series!.slice(0, 4));
    const cancelled = await call(run.DELETE, "DELETE", `/api/demo/runs/${id}`, { params: { id } });
    expect(cancelled.status).toBe(200);
  });

  it("runs one at a time: a second run gets 409 with the running one's id, and a cancelled run cleans up", async () => {
    await cluster.client(0).set("stock", "10");
    await cluster.client(0).set("lock:someone-else", "theirs");
    const id = await start({ strategy: "redlock", stock: 100_000, workers: 20, ttlMs: 1000, workMs: 20 });
    await waitUntil(id, (r) => r.progress.sold > 0, "it sells");
    const second = await call(runs.POST, "POST", "/api/demo/runs", { body: { strategy: "atomic", stock: 10, workers: 1, ttlMs: 1000, workMs: 0 } });
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ error: { code: "conflict", details: { runningId: id } } });
    expect(JSON.stringify(second.body)).toContain(id);

    const listed = await call(runs.GET, "GET", "/api/demo/runs", { token: VIEWER_TOKEN });
    expect((listed.body as { runs: RunRecord[] }).runs[0]).toMatchObject({ id, status: "running" });

    const viewerCancel = await call(run.DELETE, "DELETE", `/api/demo/runs/${id}`, { token: VIEWER_TOKEN, params: { id } });
    expect(viewerCancel.status).toBe(403);
    const cancelled = await call(run.DELETE, "DELETE", `/api/demo/runs/${id}`, { params: { id } });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ id, status: "cancelled", stopReason: "cancelled" });
    expect((await get(id)).status).toBe("cancelled");
    expect(await keysOf(id)).toEqual([]);
    expect(await cluster.client(0).get("stock")).toBe("10");
    expect(await cluster.client(0).get("lock:someone-else")).toBe("theirs");

    const again = await call(run.DELETE, "DELETE", `/api/demo/runs/${id}`, { params: { id } });
    expect(again.status).toBe(409);
    const next = await start({ strategy: "atomic", stock: 10, workers: 2, ttlMs: 1000, workMs: 0 });
    expect((await finish(next)).status).toBe("done");
  });

  it("stops its run cleanly when the console shuts down, undoing its fault and removing its keys", async () => {
    const id = await start({ strategy: "redlock", stock: 100_000, workers: 20, ttlMs: 1000, workMs: 10, fault: { node: 1, kind: "pause", atMs: 0 } });
    await waitUntil(id, (r) => r.progress.sold > 0 && r.fault?.startedAtMs !== null, "it sells with node 1 stalled");
    const { getShutdownHooks } = await import("@/server/shutdown");
    const hook = getShutdownHooks().find((h) => h.name === "lab");
    expect(hook?.order).toBe(20);
    await hook!.run();
    const record = await get(id);
    expect(record).toMatchObject({ status: "cancelled", stopReason: "shutdown" });
    expect(record.fault!.endedAtMs).not.toBeNull();
    expect(record.result!.lostUpdates).toBe(0);
    expect(await keysOf(id)).toEqual([]);
  });

  it("tells the page that a fault acts on the lab workers' connections, the nodes not being the console's own", async () => {
    const res = await call(runs.GET, "GET", "/api/demo/runs?limit=1", { token: VIEWER_TOKEN });
    expect(res.status).toBe(200);
    expect((res.body as { lab: unknown }).lab).toMatchObject({ faultMode: "connections" });
  });

  it("lists the runs newest first, with their results, to viewers", async () => {
    const res = await call(runs.GET, "GET", "/api/demo/runs?limit=3", { token: VIEWER_TOKEN });
    expect(res.status).toBe(200);
    const list = (res.body as { runs: RunRecord[] }).runs;
    expect(list).toHaveLength(3);
    expect(list.map((r) => r.createdAt)).toEqual([...list.map((r) => r.createdAt)].sort((a, b) => b - a));
    expect(list.every((r) => r.result !== undefined && r.series === undefined)).toBe(true);
  });

  it("answers bad settings with a 422 that names the field and the limit", async () => {
    const bad = async (body: unknown) => {
      const res = await call(runs.POST, "POST", "/api/demo/runs", { body });
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      return (res.body as { error: { code: string; message: string } }).error;
    };
    const base = { strategy: "redlock", stock: 10, workers: 5, ttlMs: 1000, workMs: 1 };
    expect((await bad({ ...base, workers: 501 })).message).toMatch(/workers.*at most 500/);
    expect((await bad({ ...base, workers: 0 })).message).toMatch(/workers.*at least 1/);
    expect((await bad({ ...base, strategy: "zookeeper" })).message).toMatch(/strategy must be one of/);
    expect((await bad({ ...base, ttlMs: undefined })).message).toMatch(/ttlMs/);
    expect((await bad({ ...base, fault: { node: 0, kind: "kill", atMs: 0 } })).message).toMatch(/fault\.node/);
    expect((await bad({ ...base, fault: { node: 3, kind: "kill", atMs: 0 } })).message).toMatch(/3 lock nodes; choose a node from 1 to 2/);
    expect((await bad({ ...base, fault: { node: 1, kind: "kill", atMs: 200_000, forMs: 200_000 } })).message).toMatch(/5 minutes/);
    expect((await bad({ ...base, pause: { probability: 2, ms: 10 } })).message).toMatch(/probability/);
    expect((await bad({ ...base, turbo: true })).message).toMatch(/turbo/);
    expect((await bad({ ...base, stock: 1.5 })).message).toMatch(/stock must be a whole number/);

    const noOrigin = await call(runs.POST, "POST", "/api/demo/runs", { body: base, origin: "http://evil.example" });
    expect(noOrigin.status).toBe(403);
    const viewer = await call(runs.POST, "POST", "/api/demo/runs", { body: base, token: VIEWER_TOKEN });
    expect(viewer.status).toBe(403);
    const badId = await call(run.GET, "GET", "/api/demo/runs/..%2Fetc", { params: { id: "../etc" } });
    expect(badId.status).toBe(400);
    const unknown = await call(run.GET, "GET", "/api/demo/runs/rzzzzzzzzzzzz", { params: { id: "rzzzzzzzzzzzz" } });
    expect(unknown.status).toBe(404);
    const badLimit = await call(runs.GET, "GET", "/api/demo/runs?limit=500");
    expect(badLimit.status).toBe(400);
  });
  it("fails a run whose stock vanished when node 0 restarted mid-run, and keeps its record", async () => {
    const id = await start({ strategy: "redlock", stock: 100_000, workers: 10, ttlMs: 1000, workMs: 2 });
    await waitUntil(id, (r) => r.progress.sold >= 20 || r.status !== "running", "20 units are sold");
    // Node 0 comes back empty: the stock, and the run history it kept, are gone.
    await cluster.restart(0);
    const record = await finish(id);
    expect(record).toMatchObject({ status: "failed", stopReason: "error" });
    expect(record.error).toMatch(/stock on node 0 vanished mid-run/);
    expect(record.result).toBeUndefined();
    // Stored again on node 0, so every console instance lists it.
    const stored = await until("the run is stored on node 0", async () => cluster.client(0).get(`lockscope:lab:run:${id}`));
    expect(JSON.parse(stored)).toMatchObject({ id, status: "failed" });
    const listed = await call(runs.GET, "GET", "/api/demo/runs", { token: VIEWER_TOKEN });
    expect((listed.body as { runs: RunRecord[] }).runs.map((r) => r.id)).toContain(id);
    expect(await keysOf(id)).toEqual([]);
  });

  it("refuses a run while no quorum of nodes answers, with 503 naming the nodes in plain words", async () => {
    await cluster.kill(1);
    await cluster.kill(2);
    try {
      const res = await call(runs.POST, "POST", "/api/demo/runs", { body: { strategy: "redlock", stock: 100, workers: 2, ttlMs: 1000, workMs: 1 } });
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      const message = (res.body as { error: { message: string } }).error.message;
      expect(message).toMatch(/^A lab run needs a quorum of lock nodes to take the lab's lease: 1 of 3 answered, 2 needed \(node-1 (not reachable|did not answer in time); node-2 (not reachable|did not answer in time)\)\.$/);
    } finally {
      await cluster.restart(1);
      await cluster.restart(2);
      const { getNodes } = await import("@/server/nodes");
      await until("the console's connections to the nodes are back", () => getNodes().every((n) => n.client.status === "ready"));
    }
  });

  it("answers 503, not 500, when node 0 (the run history) stops answering", async () => {
    const { newRunId } = await import("@/lib/lab/keys");
    const unknown = newRunId();
    // The console's connection to node 0 is up first, as it is while a console serves.
    expect((await call(runs.GET, "GET", "/api/demo/runs", { token: VIEWER_TOKEN })).status).toBe(200);
    // SIGSTOP: the console's connection stays open, its commands time out.
    cluster.pause(0);
    try {
      const answers = [
        await call(runs.GET, "GET", "/api/demo/runs", { token: VIEWER_TOKEN }),
        await call(run.GET, "GET", `/api/demo/runs/${unknown}`, { params: { id: unknown }, token: VIEWER_TOKEN }),
        await call(run.DELETE, "DELETE", `/api/demo/runs/${unknown}`, { params: { id: unknown } }),
      ];
      for (const res of answers) {
        expect(res.status, JSON.stringify(res.body)).toBe(503);
        expect((res.body as { error: { message: string } }).error.message).toMatch(/^Node 0 \(redis:\/\/127\.0\.0\.1:\d+\) holds the lab's stock and run history and did not answer in time\.$/);
      }
    } finally {
      cluster.resume(0);
    }
  });

  it("leaves no run in the history when node 0 stalls while a run is being recorded (the start answered 503)", async () => {
    const listed = async () => ((await call(runs.GET, "GET", "/api/demo/runs", { token: VIEWER_TOKEN })).body as { runs: RunRecord[] }).runs.map((r) => r.id);
    const before = await listed();
    cluster.pause(0);
    try {
      const res = await call(runs.POST, "POST", "/api/demo/runs", { body: { strategy: "atomic", stock: 10, workers: 2, ttlMs: 1000, workMs: 0 } });
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      expect((res.body as { error: { message: string } }).error.message).toMatch(/^Node 0 \(redis:\/\/127\.0\.0\.1:\d+\) holds the lab's stock and run history and did not answer in time\.$/);
    } finally {
      cluster.resume(0);
    }
    // Node 0 now runs what was sent to it while stopped; the console's next read comes after it.
    expect(await listed()).toEqual(before);
  });

  /** A run another console is running (or was), as that console records it on node 0, its clock `skewMs` off ours. */
  async function recordedElsewhere(skewMs: number): Promise<{ id: string; settings: RunSettings }> {
    const { addRun } = await import("@/server/lab/store");
    const { newRunId } = await import("@/lib/lab/keys");
    const theirNow = Date.now() + skewMs;
    const id = newRunId(theirNow);
    const settings: RunSettings = { strategy: "redlock-fenced", stock: 100, workers: 2, ttlMs: 1000, workMs: 1 };
    await addRun(cluster.client(0), {
      id,
      status: "running",
      settings,
      actor: "alice",
      createdAt: theirNow,
      finishedAt: null,
      heartbeatAt: theirNow,
      progress: { phase: "running", fraction: 0.5, elapsedMs: 1000, sold: 50, orders: 50, stock: 50, retries: 0, staleWritesRejected: 0, errors: 0 },
      notes: [],
    });
    return { id, settings };
  }

  it("judges a run another console runs by when node 0 last heard from it, not by that console's clock", async () => {
    const { dropRun } = await import("@/server/lab/store");
    // Its console's clock is 5 minutes behind ours, and it has just written its progress.
    const { id } = await recordedElsewhere(-5 * 60_000);
    try {
      await cluster.client(0).mset(`lab:${id}:stock`, "50", `lab:${id}:run`, "100");
      expect(await get(id)).toMatchObject({ id, status: "running" });
      // Nor does the next run started take it for abandoned and remove its keys.
      const next = await start({ strategy: "atomic", stock: 10, workers: 2, ttlMs: 1000, workMs: 0 });
      expect((await finish(next)).status).toBe("done");
      expect(await cluster.client(0).get(`lab:${id}:stock`)).toBe("50");
      expect(await get(id)).toMatchObject({ id, status: "running" });

      // Its console's clock 5 minutes ahead of ours, silent for 16 s by node 0's clock: it stopped reporting.
      const ahead = await recordedElsewhere(5 * 60_000);
      try {
        const record = await get(ahead.id);
        expect(record.status).toBe("running");
        const { runHeartbeatKey } = await import("@/lib/lab/keys");
        const ttl = await cluster.client(0).pttl(runHeartbeatKey(ahead.id));
        await cluster.client(0).pexpire(runHeartbeatKey(ahead.id), ttl - 16_000);
        const silent = await get(ahead.id);
        expect(silent.status).toBe("failed");
        expect(silent.error).toMatch(/^The console running it has not reported for \d+ s or more \(it was stopped or lost node 0\)\.$/);
      } finally {
        await dropRun(cluster.client(0), ahead.id);
      }
    } finally {
      await dropRun(cluster.client(0), id);
      await cluster.client(0).del(`lab:${id}:stock`, `lab:${id}:run`);
    }
  });

  it("removes the keys of a run whose console died mid-run, when the next run starts", async () => {
    // What a console killed in the middle of a fenced run leaves: its record still "running", silent for
    // minutes, and keys an engine write had just left without a TTL.
    const { addRun } = await import("@/server/lab/store");
    const { newRunId } = await import("@/lib/lab/keys");
    const silentSince = Date.now() - 5 * 60_000;
    const ghost = newRunId(silentSince);
    const settings: RunSettings = { strategy: "redlock-fenced", stock: 100, workers: 2, ttlMs: 1000, workMs: 1 };
    await addRun(cluster.client(0), {
      id: ghost,
      status: "running",
      settings,
      actor: "alice",
      createdAt: silentSince,
      finishedAt: null,
      heartbeatAt: silentSince,
      progress: { phase: "running", fraction: 0.5, elapsedMs: 1000, sold: 50, orders: 50, stock: 50, retries: 0, staleWritesRejected: 0, errors: 0 },
      notes: [],
    });
    // Silent for minutes: its heartbeat on node 0 has expired.
    const { runHeartbeatKey } = await import("@/lib/lab/keys");
    await cluster.client(0).del(runHeartbeatKey(ghost));
    await cluster.client(0).mset(`lab:${ghost}:stock`, "50", `fence-seen:lab:${ghost}:stock`, "7");
    await Promise.all([0, 1, 2].map((i) => cluster.client(i).set(`fence:lock:lab:${ghost}:stock`, "7")));

    const id = await start({ strategy: "atomic", stock: 10, workers: 2, ttlMs: 1000, workMs: 0 });
    expect((await finish(id)).status).toBe("done");
    await until("the abandoned run's keys are gone", async () => (await keysOf(ghost)).length === 0);
    const ghostRecord = await until("the abandoned run is closed", async () => {
      const r = await get(ghost);
      return r.finishedAt !== null ? r : null;
    });
    expect(ghostRecord).toMatchObject({ status: "failed" });
  });
});
