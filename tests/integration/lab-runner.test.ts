import { spawn } from "node:child_process";
import path from "node:path";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ping } from "@/lib/redis-node";
import { newRunId } from "@/lib/lab/keys";
import { LabRun, type NodeProcessControl } from "@/lib/lab/runner";
import type { RunSettings } from "@/lib/lab/settings";
import { startCluster, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

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
      { strategy: "redlock", stock: 300, workers: 40, ttlMs: 2_000, workMs: 1, fault: { node: 1, kind: "kill", atMs: 200, forMs: 2_500 } },
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
  }, 180_000);

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
    const { run } = lab({ strategy: "redlock", stock: 150, workers: 20, ttlMs: 10_000, workMs: 1, fault: { node: 1, kind: "pause", atMs: 50 } });
    expect(run.faultMode).toBe("connections");
    const outcome = await run.run();
    expect(outcome.result).toMatchObject({ sold: 150, remaining: 0, lostUpdates: 0 });
    expect(outcome.fault).toMatchObject({ mode: "connections", kind: "pause" });
    expect(outcome.fault!.description).toMatch(/Stalls the lab workers' own commands to node 1/);
    expect(cluster.nodes[1]!.isPaused).toBe(false);
  });

  it("on nodes it does not own, reconnects its workers when a short cut ends, as the fault's description says", async () => {
    // A cut of 1 ms ends before the connections it closed have finished closing.
    const controller = new AbortController();
    const { id, run } = lab(
      { strategy: "redlock", stock: 100_000, workers: 20, ttlMs: 1000, workMs: 2, fault: { node: 1, kind: "kill", atMs: 100, forMs: 1 } },
      { signal: controller.signal },
    );
    const done = run.run();
    const workersOnNode1 = async () => {
      const list = (await cluster.client(1).client("LIST")) as string;
      return list.split("\n").filter((line) => line.includes(`name=lockscope:lab:${id}:w`)).length;
    };
    try {
      await until("the cut has ended", () => typeof run.fault()?.endedAtMs === "number");
      expect(run.fault()!.description).toMatch(/^Cuts the lab workers' own connections to node 1 at 100 ms for 1 ms .*; it lasted from \d+ to \d+ ms\.$/);
      await until("the 20 workers are connected to node 1 again", async () => (await workersOnNode1()) === 20, 10_000);
    } finally {
      controller.abort("cancelled");
      await done;
    }
  });

  it("says a fault that was due after the run ended never happened", async () => {
    const acted: string[] = [];
    const control = processControl();
    const { run } = lab(
      { strategy: "redlock", stock: 20, workers: 5, ttlMs: 500, workMs: 1, fault: { node: 1, kind: "kill", atMs: 60_000, forMs: 1000 } },
      { processControl: { ...control, kill: (i) => (acted.push(`kill ${i}`), control.kill(i)), restart: (i) => (acted.push(`restart ${i}`), control.restart(i)) } },
    );
    const outcome = await run.run();
    expect(outcome.stopReason).toBe("sold-out");
    expect(acted).toEqual([]);
    expect(outcome.fault).toMatchObject({ startedAtMs: null, endedAtMs: null });
    expect(outcome.fault!.description).toMatch(/^Kills node 1's redis-server \(SIGKILL\) at 60000 ms and restarts it, empty, 1000 ms later; it never happened: the run ended at \d+ ms, before it was due\.$/);
  });

  /** Makes every lab worker's `command` fail (a node error: the command timed out) where `fails(client)` says so, while `use` runs. */
  async function failing<T>(command: "watch" | "evalsha", fails: (client: Redis, args: unknown[]) => boolean, use: () => Promise<T>): Promise<T> {
    const original = Reflect.get(Redis.prototype, command) as (...a: unknown[]) => Promise<unknown>;
    Reflect.set(Redis.prototype, command, function (this: Redis, ...args: unknown[]) {
      if (/:w\d+$/.test(String(this.options.connectionName)) && fails(this, args)) return Promise.reject(new Error("Command timed out"));
      return original.apply(this, args);
    });
    try {
      return await use();
    } finally {
      Reflect.set(Redis.prototype, command, original);
    }
  }

  it("says a fault due after the sale never happened as of the sale's end, even when the final read of the stock was slow", async () => {
    // Node 0 answers the run's stock reads 1.5 s late: the run's end (undoing, cleanup) comes well after its sale.
    const original = Reflect.get(Redis.prototype, "mget") as (...a: unknown[]) => Promise<unknown>;
    Reflect.set(Redis.prototype, "mget", async function (this: Redis, ...args: unknown[]) {
      if (/:control$/.test(String(this.options.connectionName))) await new Promise((resolve) => setTimeout(resolve, 1_500));
      return original.apply(this, args);
    });
    let outcome: Awaited<ReturnType<LabRun["run"]>>;
    try {
      outcome = await lab({ strategy: "atomic", stock: 20, workers: 5, ttlMs: 500, workMs: 1, fault: { node: 1, kind: "pause", atMs: 1_000 } }).run.run();
    } finally {
      Reflect.set(Redis.prototype, "mget", original);
    }
    expect(outcome.stopReason).toBe("sold-out");
    const [, endedAt] = /the run ended at (\d+) ms, before it was due\.$/.exec(outcome.fault!.description) ?? [];
    expect(Number(endedAt)).toBe(outcome.result!.durationMs);
  });

  it("counts a naive lock's release that failed on a node error as a release error, not as an order that failed", async () => {
    // Every release fails: each lock expires by its TTL, which the next order waits out; every order still sells.
    // Four locks: three sales, and the order that found the stock sold out.
    const { result } = await failing("watch", () => true, () => lab({ strategy: "naive", stock: 3, workers: 1, ttlMs: 100, workMs: 0 }).run.run());
    expect(result).toMatchObject({ sold: 3, orders: 3, remaining: 0, lostUpdates: 0, errors: 0, locksLost: 0, releaseErrors: 4 });
  });

  it("counts a Redlock release that too few nodes answered as a release error, not as a lock lost", async () => {
    // Nodes 1 and 2 fail every release (node 0 answers and deletes): the lock is neither released on a quorum nor
    // known to be gone, so it expires by its TTL.
    // The engine's release of a one-resource, unfenced lock is EVALSHA sha 1 <resource> <value> (its acquisition
    // script takes three more arguments).
    const port0 = cluster.nodes[0]!.port;
    const { result } = await failing(
      "evalsha",
      (client, args) => args.length === 4 && client.options.port !== port0,
      () => lab({ strategy: "redlock", stock: 3, workers: 1, ttlMs: 100, workMs: 0 }).run.run(),
    );
    expect(result).toMatchObject({ sold: 3, remaining: 0, lostUpdates: 0, errors: 0, locksLost: 0, releaseErrors: 4 });
  });

  it("keeps a naive order's lock wait and attempts across a lock attempt that failed on a node error", async () => {
    const { id, run } = lab({ strategy: "naive", stock: 1, workers: 1, ttlMs: 1000, workMs: 0 });
    let calls = 0;
    let firstAt: number | undefined;
    let lockedAt: number | undefined;
    // Someone else holds the lock on node 0 for a while: the order waits, its second SETNX fails, it waits on.
    await cluster.client(0).set(`lock:lab:${id}:stock`, "someone-else", "PX", 400);
    const original = Reflect.get(Redis.prototype, "setnx") as (...a: unknown[]) => Promise<number>;
    Reflect.set(Redis.prototype, "setnx", function (this: Redis, ...args: unknown[]) {
      if (!/:w\d+$/.test(String(this.options.connectionName))) return original.apply(this, args);
      calls += 1;
      firstAt ??= performance.now();
      if (calls === 2) return Promise.reject(new Error("Command timed out"));
      return original.apply(this, args).then((taken) => {
        if (taken === 1) lockedAt ??= performance.now();
        return taken;
      });
    });
    const outcome = await run.run().finally(() => Reflect.set(Redis.prototype, "setnx", original));
    const result = outcome.result!;
    expect(result).toMatchObject({ sold: 1, errors: 1 });
    // Two orders took the lock (the sale, then the one that found the stock sold out): every attempt beyond each
    // order's first is a retry, the one that failed on the node error included.
    expect(calls).toBeGreaterThan(3);
    expect(result.retries).toBe(calls - 2);
    // The sale's wait (the longer of the two) runs from its first attempt, before the error, to its lock.
    expect(result.waitP99Ms).toBeGreaterThanOrEqual(Math.floor((lockedAt! - firstAt!) * 100) / 100);
  });

  it("keeps a fenced Redlock order's lock wait and attempts across an acquisition that failed with an error", async () => {
    // A fenced run first, so that every node has its fence marker.
    expect((await lab({ strategy: "redlock-fenced", stock: 1, workers: 1, ttlMs: 1000, workMs: 0 }).run.run()).result).toMatchObject({ sold: 1 });
    const { id, run } = lab({ strategy: "redlock-fenced", stock: 1, workers: 1, ttlMs: 1000, workMs: 0 }, {
      onRedlock: (redlock) => {
        redlock.on("attempt-failed", () => {
          failed += 1;
          firstAt ??= performance.now();
        });
        redlock.on("acquired", () => {
          acquired += 1;
          lockedAt ??= performance.now();
        });
      },
    });
    let failed = 0;
    let acquired = 0;
    let firstAt: number | undefined;
    let lockedAt: number | undefined;
    // Nodes 1 and 2 lost their fence markers (as when restarted empty): a quorum grants the lock but cannot vouch
    // for its fence, and the acquisition fails with an error, until an operator re-seeds them (put back here).
    const markers = await Promise.all([1, 2].map((i) => cluster.client(i).get("lockscope:fence-epoch")));
    await Promise.all([0, 1, 2].map((i) => cluster.client(i).set(`lock:lab:${id}:stock`, "someone-else", "PX", 400)));
    await Promise.all([1, 2].map((i) => cluster.client(i).del("lockscope:fence-epoch")));
    const done = run.run();
    try {
      await until("an acquisition failed with an error", () => run.progress().errors >= 1, 10_000, 5);
    } finally {
      for (const [k, node] of [1, 2].entries()) {
        const marker = markers[k];
        if (marker) await cluster.client(node).set("lockscope:fence-epoch", marker);
      }
    }
    const { result } = await done;
    expect(result).toMatchObject({ sold: 1 });
    expect(result!.errors).toBeGreaterThanOrEqual(1);
    expect(acquired).toBe(2);
    // Every attempt, the failed acquisitions' included, is one failed attempt or one lock taken; every one beyond
    // each order's first is a retry.
    expect(result!.retries).toBe(failed + acquired - 2);
    expect(result!.waitP99Ms).toBeGreaterThanOrEqual(Math.floor((lockedAt! - firstAt!) * 100) / 100);
  });

  it("removes its keys by name at the end, without walking every key of nodes that hold other data", async () => {
    // Lock nodes that also hold an application's data (a standalone Redis used for caching and locks alike).
    const others = Array.from({ length: 5_000 }, (_, i) => [`cache:item:${i}`, "v"]).flat();
    await cluster.client(0).mset(...others);
    try {
      for (let i = 0; i < 3; i++) await cluster.client(i).config("RESETSTAT");
      const { id, run } = lab({ strategy: "redlock", stock: 20, workers: 4, ttlMs: 2_000, workMs: 1 });
      expect((await run.run()).result).toMatchObject({ sold: 20, remaining: 0, lostUpdates: 0 });
      for (let i = 0; i < 3; i++) {
        const stats = await cluster.client(i).info("commandstats");
        // SCAN walks the whole keyspace (some 10 s a node per million keys), for keys whose names the run knows.
        expect(stats, `node ${i}`).not.toMatch(/^cmdstat_scan:/m);
      }
      expect(await leftovers(id)).toEqual([]);
      expect(await cluster.client(0).exists(`cache:item:0`, `cache:item:4999`)).toBe(2);
    } finally {
      for (let i = 0; i < 5_000; i += 1000) await cluster.client(0).del(...Array.from({ length: 1000 }, (_, j) => `cache:item:${i + j}`));
    }
  });

  it("stops at its time limit, reports what it sold, and cleans up", async () => {
    const { id, run } = lab({ strategy: "naive", stock: 100_000, workers: 10, ttlMs: 10_000, workMs: 20 }, { maxRunMs: 800 });
    const { stopReason, result } = await run.run();
    expect(stopReason).toBe("time-limit");
    expect(result!.sold).toBeGreaterThan(0);
    expect(result!.lostUpdates).toBe(0);
    expect(result!.remaining).toBe(100_000 - result!.sold);
    // The progress bar shows the share sold, not a full bar for a sale that did not end.
    expect(run.progress()).toMatchObject({ phase: "finished", fraction: Math.round((result!.sold / 100_000) * 1000) / 1000 });
    expect(await leftovers(id)).toEqual([]);
  });

  it("reports no lock wait for a locking run that never took its lock, rather than a wait of 0 ms", async () => {
    const id = newRunId();
    // Someone else holds the run's lock on node 0 for the whole run: no worker ever takes it.
    await cluster.client(0).set(`lock:lab:${id}:stock`, "someone else", "PX", 60_000);
    const run = new LabRun({ id, settings: { strategy: "naive", stock: 100, workers: 3, ttlMs: 1_000, workMs: 1 }, nodeUrls: cluster.urls, maxRunMs: 600 });
    const { stopReason, result } = await run.run();
    expect(stopReason).toBe("time-limit");
    expect(result).toMatchObject({ sold: 0, remaining: 100, waitP50Ms: null, waitP99Ms: null });
    expect(result!.retries).toBeGreaterThan(0);
    expect(await leftovers(id)).toEqual([]);
  });

  it("says how many orders were still waiting for the lock when the run stopped, whose waits no percentile counts", async () => {
    const id = newRunId();
    // Someone else holds the run's lock on every node: no worker takes it.
    for (let i = 0; i < 3; i++) await cluster.client(i).set(`lock:lab:${id}:stock`, "someone else", "PX", 60_000);
    const run = new LabRun({ id, settings: { strategy: "redlock", stock: 100, workers: 4, ttlMs: 1_000, workMs: 1 }, nodeUrls: cluster.urls, maxRunMs: 600 });
    const { stopReason, result } = await run.run();
    expect(stopReason).toBe("time-limit");
    // Every worker was waiting with its order when the time limit came.
    expect(result).toMatchObject({ sold: 0, waitingAtStop: 4 });
    const fine = await lab({ strategy: "naive", stock: 30, workers: 1, ttlMs: 10_000, workMs: 1 }).run.run();
    expect(fine.result).toMatchObject({ sold: 30, waitingAtStop: 0 });
  });

  it("places exactly the orders asked for with every strategy, the locking ones too, and says so", async () => {
    for (const strategy of ["naive", "redlock", "atomic"] as const) {
      const { stopReason, result } = await lab({ strategy, stock: 1000, workers: 10, orders: 50, ttlMs: 10_000, workMs: 5 }).run.run();
      expect({ strategy, stopReason, orders: result!.orders, sold: result!.sold }).toEqual({ strategy, stopReason: "orders", orders: 50, sold: 50 });
      expect(result!.remaining).toBe(950);
    }
  });

  it("fails a run stopped by an error (the lab lease lost), with the reason, not as cancelled", async () => {
    const controller = new AbortController();
    const { run } = lab({ strategy: "redlock", stock: 100_000, workers: 10, ttlMs: 2000, workMs: 5 }, { signal: controller.signal });
    const done = run.run();
    await until("a few units are sold", () => run.progress().sold >= 5);
    controller.abort(new Error("the lab lease was lost"));
    const outcome = await done;
    expect(outcome.stopReason).toBe("error");
    expect(outcome.error).toBe("the lab lease was lost");
  });

  it("records no figures for a run cancelled while its workers were still connecting: its stock was never written", async () => {
    const controller = new AbortController();
    const { id, run } = lab({ strategy: "redlock", stock: 500, workers: 200, ttlMs: 1000, workMs: 1 }, { signal: controller.signal });
    const done = run.run();
    // run() is waiting for its first connection: nothing is written yet.
    expect(run.progress().phase).toBe("connecting");
    controller.abort("cancelled");
    const outcome = await done;
    expect(outcome.stopReason).toBe("cancelled");
    // Not "500 remaining, 0 sold": that stock never existed in Redis.
    expect(outcome.result).toBeNull();
    expect(outcome.notes).toContain("It stopped before the sale began (its workers were still connecting): no stock was written and nothing was sold, so it has no figures.");
    expect(run.progress()).toMatchObject({ phase: "finished", sold: 0, stock: null, fraction: 0 });
    expect(await leftovers(id)).toEqual([]);
  });

  it("reads the stock at the end until node 0 answers, and fails the run without figures if it never does", async () => {
    // Node 0's answer to the final read times out (the control connection's command timeout), `failures` times.
    const original = Reflect.get(Redis.prototype, "mget") as (...a: unknown[]) => Promise<unknown>;
    const failFinalReads = (run: LabRun, failures: number) => {
      Redis.prototype.mget = function (this: Redis, ...args: unknown[]) {
        if (String(this.options.connectionName).endsWith(":control") && run.progress().phase === "stopping" && failures-- > 0) {
          return Promise.reject(new Error("Command timed out"));
        }
        return original.apply(this, args);
      } as typeof Redis.prototype.mget;
    };
    try {
      const late = lab({ strategy: "atomic", stock: 100, workers: 20, ttlMs: 1000, workMs: 1 }).run;
      failFinalReads(late, 2);
      const answered = await late.run();
      // A figure from before the end would count the last sales as lost (an atomic run never loses one).
      expect(answered.stopReason).toBe("sold-out");
      expect(answered.result).toMatchObject({ sold: 100, remaining: 0, lostUpdates: 0 });

      const silent = lab({ strategy: "atomic", stock: 100, workers: 20, ttlMs: 1000, workMs: 1 }).run;
      failFinalReads(silent, Number.POSITIVE_INFINITY);
      const unanswered = await silent.run();
      expect(unanswered.stopReason).toBe("error");
      expect(unanswered.result).toBeNull();
      expect(unanswered.error).toMatch(/did not answer the final read/);
    } finally {
      Redis.prototype.mget = original as typeof Redis.prototype.mget;
    }
  }, 30_000);

  it("stops promptly when cancelled, even with a node stalled, and brings the node back", async () => {
    const controller = new AbortController();
    const { id, run } = lab(
      { strategy: "redlock", stock: 100_000, workers: 50, ttlMs: 10_000, workMs: 5, fault: { node: 2, kind: "pause", atMs: 0 } },
      { processControl: processControl(), signal: controller.signal },
    );
    const done = run.run();
    await until("20 units are sold", () => run.progress().sold >= 20);
    controller.abort("cancelled");
    const outcome = await done;
    expect(outcome.stopReason).toBe("cancelled");
    expect(outcome.result!.lostUpdates).toBe(0);
    expect(cluster.nodes[2]!.isPaused).toBe(false);
    expect(await leftovers(id)).toEqual([]);
  });
  it("removes its keys from a node that stalled through the end of the run, once that node answers again", async () => {
    // Not a lab fault: node 2 stops answering mid-run (a GC-like stall of the server) and stays stopped past the end,
    // so the cleanup cannot reach it; on SIGCONT it runs the workers' queued writes (the fence among them, no TTL).
    const { id, run } = lab({ strategy: "redlock-fenced", stock: 200, workers: 20, ttlMs: 500, workMs: 5 });
    const done = run.run();
    await until("20 units are sold", () => run.progress().sold >= 20);
    cluster.pause(2);
    let outcome: Awaited<typeof done>;
    try {
      outcome = await done;
    } finally {
      cluster.resume(2);
    }
    expect(outcome.result).toMatchObject({ sold: 200, remaining: 0, lostUpdates: 0 });
    expect(outcome.notes.join(" ")).toMatch(/Could not remove this run's keys from node 2 yet: .*; trying again until it answers\./);
    await until("node 2 has none of the run's keys", async () => (await leftovers(id)).length === 0, 20_000);
  }, 60_000);

  it("tells the same run time in its live progress as in its result, even when a node stalls through the cleanup", async () => {
    // Node 2 stops answering mid-run and stays stopped past the end: removing the run's keys waits on it for seconds.
    const { id, run } = lab({ strategy: "redlock", stock: 200, workers: 20, ttlMs: 1000, workMs: 2 });
    const done = run.run();
    await until("20 units are sold", () => run.progress().sold >= 20);
    cluster.pause(2);
    let outcome: Awaited<typeof done>;
    try {
      outcome = await done;
    } finally {
      cluster.resume(2);
    }
    expect(outcome.notes.join(" ")).toMatch(/Could not remove this run's keys from node 2 yet/);
    // The Demo page shows the first as the Live counter and the second as the table's Duration.
    expect(run.progress().elapsedMs).toBe(outcome.result!.durationMs);
    await until("node 2 has none of the run's keys", async () => (await leftovers(id)).length === 0, 20_000);
  }, 60_000);

  it("ends its chart where the sale ended, not after the slow restart of a node killed until the end", async () => {
    // The killed node takes 1.5 s more to start again (a large dataset to load): that is not the sale's time.
    const slowRestart: NodeProcessControl = { ...processControl(), restart: async (i) => {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await cluster.restart(i);
    } };
    const { run } = lab({ strategy: "redlock", stock: 200, workers: 20, ttlMs: 1000, workMs: 2, fault: { node: 1, kind: "kill", atMs: 100 } }, { processControl: slowRestart });
    const outcome = await run.run();
    expect(outcome.fault!.endedAtMs).not.toBeNull();
    const last = outcome.series.at(-1)!;
    // The chart's last point is the stock once the workers stopped, at the run's duration.
    expect(last).toMatchObject({ t: outcome.result!.durationMs, sold: 200, stock: 0 });
    expect(outcome.series.every((p, i) => i === 0 || p.t >= outcome.series[i - 1]!.t)).toBe(true);
  }, 60_000);

  it("fails a run whose stock vanished when node 0 restarted empty mid-run, with no result to misread", async () => {
    const { id, run } = lab({ strategy: "redlock-fenced", stock: 100_000, workers: 10, ttlMs: 1000, workMs: 2 });
    const done = run.run();
    await until("10 units are sold", () => run.progress().sold >= 10);
    await cluster.restart(0);
    const outcome = await done;
    expect(outcome.stopReason).toBe("error");
    expect(outcome.error).toMatch(/stock on node 0 vanished mid-run/);
    expect(outcome.result).toBeNull();
    expect(await leftovers(id)).toEqual([]);
  });

  it.each(["atomic", "redlock-fenced"] as const)("fails a run (%s) whose stock key alone was deleted mid-run (evicted, or deleted by hand), with no result to misread", async (strategy) => {
    const { id, run } = lab({ strategy, stock: 100_000, workers: 5, ttlMs: 1000, workMs: 2 });
    const done = run.run();
    await until("10 units are sold", () => run.progress().sold >= 10);
    // The run's marker stays: only the stock is gone, as a memory-full node's volatile-* eviction can leave it. It is
    // deleted again until the run ends, as such a node goes on evicting: a buyer's write in flight as it went (a
    // fenced run's) writes it again once.
    let ended = false;
    const finished = done.finally(() => {
      ended = true;
    });
    while (!ended) {
      await cluster.client(0).del(run.keys.stock);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const outcome = await finished;
    expect(outcome.stopReason).toBe("error");
    expect(outcome.error).toMatch(/stock on node 0 vanished mid-run/);
    expect(outcome.result).toBeNull();
    expect(await leftovers(id)).toEqual([]);
  });

  // (Fenced, the stock is written by the engine's fenced write, and the lock's fence and the stock's last fence are kept.)
  it.each(["redlock", "redlock-fenced"])("keeps a TTL on every key of a run, so a run whose process is killed leaves nothing behind (%s)", async (strategy) => {
    const id = newRunId();
    const keyTtlMs = 3_000;
    const child = spawn(process.execPath, ["--import", "tsx", path.resolve(import.meta.dirname, "../support/lab-child.ts"), cluster.urls.join(","), id, String(keyTtlMs), strategy], {
      cwd: path.resolve(import.meta.dirname, "../.."),
      stdio: ["ignore", "pipe", "inherit"],
    });
    let sold = 0;
    child.stdout.on("data", (chunk: Buffer) => {
      const last = chunk.toString().trim().split("\n").at(-1);
      if (last) sold = Number(last);
    });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    try {
      await until("the run sells", () => sold >= 10, 30_000);
    } finally {
      child.kill("SIGKILL");
      await exited;
    }
    const keys = await leftovers(id);
    for (let i = 0; i < 3; i++) {
      const [, onNode] = await cluster.client(i).scan("0", "MATCH", `*${id}*`, "COUNT", 10_000);
      for (const key of onNode) {
        const ttl = await cluster.client(i).pttl(key);
        expect(ttl, `node ${i}: ${key}`).toBeGreaterThan(0);
        expect(ttl, `node ${i}: ${key}`).toBeLessThanOrEqual(keyTtlMs);
      }
    }
    // The stock was among them (with the lock and the engine's queues, which have TTLs of their own).
    expect(keys).toContain(`lab:${id}:stock`);
    await until("the killed run's keys are gone", async () => (await leftovers(id)).length === 0, 15_000);
  });
});
