import { describe, expect, it } from "vitest";
import { isLabResource, isRunId, newRunId, runKeys } from "@/lib/lab/keys";
import { lockSafetyCounts } from "@/lib/safety-signals";
import { LAB_PRESETS } from "@/lib/lab/presets";
import { checkAgainstNodes, retryDelayFor, runSettingsSchema, settingsNotes, STRATEGIES, type RunSettings } from "@/lib/lab/settings";
import { Sampler } from "@/lib/lab/sampler";
import { lostUpdates, ordersPerSec, oversold, percentile, progressFraction, Samples } from "@/lib/lab/stats";
import type { Tally } from "@/lib/lab/strategy";

const base: RunSettings = { strategy: "redlock", stock: 100, workers: 10, ttlMs: 1000, workMs: 5 };

function messageOf(input: unknown): string {
  const parsed = runSettingsSchema.safeParse(input);
  if (parsed.success) throw new Error("expected the settings to be refused");
  return parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
}

describe("lab settings", () => {
  it("accepts the contract's settings, with optional orders, pause and fault", () => {
    const full = { ...base, orders: 50, pause: { probability: 0.1, ms: 2000 }, fault: { node: 1, kind: "kill", atMs: 500, forMs: 3000 } };
    expect(runSettingsSchema.parse(full)).toEqual(full);
    expect(runSettingsSchema.parse(base)).toEqual(base);
  });

  it("says which limit a value breaks", () => {
    expect(messageOf({ ...base, workers: 501 })).toContain("workers must be at most 500");
    expect(messageOf({ ...base, stock: 0 })).toContain("stock must be at least 1");
    expect(messageOf({ ...base, ttlMs: 10 })).toContain("ttlMs must be at least 50");
    expect(messageOf({ ...base, workMs: 20_000 })).toContain("workMs must be at most 10,000");
    expect(messageOf({ ...base, fault: { node: 1, kind: "kill", atMs: 0, forMs: 400_000 } })).toContain("fault.forMs must be at most 300,000");
    expect(messageOf({ ...base, fault: { node: 1, kind: "kill", atMs: 250_000, forMs: 60_000 } })).toContain("5 minutes");
    expect(messageOf({ ...base, fault: { node: 0, kind: "kill", atMs: 0 } })).toContain("fault.node must be at least 1");
    expect(messageOf({ ...base, fault: { node: 1, kind: "reboot", atMs: 0 } })).toContain('fault.kind must be "kill" or "pause"');
    expect(messageOf({ ...base, strategy: "mutex" })).toContain("strategy must be one of");
    expect(messageOf({ ...base, extra: 1 })).toContain("extra");
    expect(messageOf({ ...base, workers: "10" })).toContain("workers must be a number");
  });

  it("says one thing about a number out of range or not whole, never two", () => {
    expect(messageOf({ ...base, stock: 1e20 })).toBe("stock: stock must be at most 100,000");
    expect(messageOf({ ...base, workers: -1e20 })).toBe("workers: workers must be at least 1");
    expect(messageOf({ ...base, stock: 2.5 })).toBe("stock: stock must be a whole number");
    expect(messageOf({ ...base, fault: { node: 1, kind: "kill", atMs: 1e300 } })).toBe("fault.atMs: fault.atMs must be at most 300,000");
  });

  it("checks the fault's node against the console's nodes", () => {
    const settings = { ...base, fault: { node: 3, kind: "pause" as const, atMs: 0 } };
    expect(checkAgainstNodes(settings, 3)).toBe("fault.node: the lab runs on 3 lock nodes; choose a node from 1 to 2 (node 0 holds the stock and cannot be faulted).");
    expect(checkAgainstNodes(settings, 5)).toBeNull();
    expect(checkAgainstNodes({ ...base, fault: { node: 1, kind: "kill", atMs: 0 } }, 1)).toBe("fault.node: the lab runs on one lock node, which holds the stock and cannot be faulted.");
    // Where the console watches several deployments, the lab's is named: the console itself has more nodes.
    expect(checkAgainstNodes(settings, 3, "orders")).toMatch(/^fault\.node: the lab runs on 3 lock nodes \(deployment orders\);/);
  });

  it("warns when a killed node comes back before the TTL ran out, and when a fault cannot touch the strategy", () => {
    const early = settingsNotes({ ...base, ttlMs: 5000, fault: { node: 1, kind: "kill", atMs: 0, forMs: 1000 } });
    expect(early.join(" ")).toMatch(/sooner than the 5000 ms TTL: it restarts empty/);
    // A cut of the workers' connections leaves the node running with its locks: no double grant to warn of.
    const cut = settingsNotes({ ...base, ttlMs: 5000, fault: { node: 1, kind: "kill", atMs: 0, forMs: 1000 } }, "connections").join(" ");
    expect(cut).not.toMatch(/restarts empty/);
    expect(cut).toMatch(/keeps running with its locks through the cut/);
    expect(settingsNotes({ ...base, ttlMs: 1000, fault: { node: 1, kind: "kill", atMs: 0, forMs: 3000 } })).toEqual([]);
    expect(settingsNotes({ ...base, strategy: "naive", fault: { node: 1, kind: "pause", atMs: 0 } }).join(" ")).toMatch(/uses node 0 only/);
    expect(settingsNotes({ ...base, pause: { probability: 0.5, ms: 100 } }).join(" ")).toMatch(/fit in the 1000 ms TTL with 895 ms to spare/);
  });

  it("warns that a fault on one of two nodes stops every Redlock acquisition while it lasts", () => {
    const cut = settingsNotes({ ...base, fault: { node: 1, kind: "kill", atMs: 1000 } }, "connections", 2).join(" ");
    expect(cut).toMatch(/With 2 lock nodes a Redlock quorum is both: no lock can be taken while the lab workers' connections to node 1 are cut, from 1000 ms until the run ends/);
    expect(cut).toMatch(/orders still waiting for their lock when the run stops are not counted in the lock wait/);
    const stopped = settingsNotes({ ...base, strategy: "redlock-fenced", fault: { node: 1, kind: "pause", atMs: 0, forMs: 5000 } }, "process", 2).join(" ");
    expect(stopped).toMatch(/no lock can be taken while node 1 is stopped \(SIGSTOP\), from 0 ms for 5000 ms/);
    // Three nodes keep a quorum of two without node 1; the naive lock uses node 0 only.
    expect(settingsNotes({ ...base, fault: { node: 1, kind: "kill", atMs: 0, forMs: 3000 } }, "process", 3)).toEqual([]);
    expect(settingsNotes({ ...base, strategy: "naive", fault: { node: 1, kind: "kill", atMs: 0 } }, "connections", 2).join(" ")).not.toMatch(/quorum/);
  });

  it("says no margin is left when the work, or the work with a pause, outlasts the TTL", () => {
    // Each order works 200 ms under a 100 ms lock: every lock expires under its holder, pauses or not.
    const slowWork = settingsNotes({ ...base, strategy: "naive", ttlMs: 100, workMs: 200, pause: { probability: 0.1, ms: 50 } }).join(" ");
    expect(slowWork).not.toMatch(/to spare/);
    expect(slowWork).toMatch(/200 ms of work per order outlasts the 100 ms TTL: every lock expires under its holder/);
    expect(settingsNotes({ ...base, ttlMs: 100, workMs: 200 }).join(" ")).toMatch(/every lock expires under its holder/);
    // 600 ms of work and a 500 ms pause: the paused holders outlast the 1000 ms TTL.
    expect(settingsNotes({ ...base, ttlMs: 1000, workMs: 600, pause: { probability: 0.1, ms: 500 } })).toEqual([]);
    expect(settingsNotes({ ...base, strategy: "atomic", ttlMs: 100, workMs: 200 })).toEqual([]);
  });

  it("spaces lock retries out as the crowd grows, within 10 to 100 ms", () => {
    expect(retryDelayFor(1)).toBe(10);
    expect(retryDelayFor(50)).toBe(15);
    expect(retryDelayFor(500)).toBe(60);
    expect(retryDelayFor(5000)).toBe(100);
  });
});

describe("lab result math", () => {
  it("counts units sold twice as sold minus what left the stock", () => {
    expect(lostUpdates(120, 100, 0)).toBe(20);
    expect(lostUpdates(100, 100, 0)).toBe(0);
    expect(lostUpdates(40, 100, 60)).toBe(0);
    expect(lostUpdates(45, 100, 60)).toBe(5);
  });

  it("counts units sold beyond the stock as oversold, never below 0", () => {
    expect(oversold(120, 100)).toBe(20);
    expect(oversold(100, 100)).toBe(0);
    // Lost updates without overselling: a run stopped early, or one whose stock a late write raised again.
    expect(oversold(45, 100)).toBe(0);
  });

  it("takes percentiles by nearest rank", () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentile(values, 50)).toBe(50);
    expect(percentile(values, 99)).toBe(99);
    expect(percentile(values, 100)).toBe(100);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNull();
  });

  it("keeps samples in a growing typed array", () => {
    const samples = new Samples();
    for (let i = 0; i < 5000; i++) samples.push(i);
    expect(samples.length).toBe(5000);
    expect(Array.from(samples.slice(4998))).toEqual([4998, 4999]);
    expect(percentile(samples.slice(), 50)).toBe(2499);
  });

  it("rates orders per second and progress", () => {
    expect(ordersPerSec(300, 1500)).toBe(200);
    expect(ordersPerSec(10, 0)).toBe(0);
    expect(progressFraction({ stock: 100, remaining: 25, ordersPlaced: 0 })).toBe(0.75);
    expect(progressFraction({ stock: 100, remaining: -3, ordersPlaced: 0 })).toBe(1);
    expect(progressFraction({ stock: 1000, remaining: 990, orders: 20, ordersPlaced: 10 })).toBe(0.5);
    expect(progressFraction({ stock: 100, remaining: null, ordersPlaced: 3 })).toBe(0);
  });
});

describe("lab charts", () => {
  it("keeps a long run's chart from t = 0 to its final stock, evenly spaced, within 600 points", () => {
    // A five-minute run (the limit) sampled every 250 ms, selling one unit a sample, then its final sample.
    const stock = 2000;
    const sampler = new Sampler();
    sampler.start(stock);
    const tally: Tally = { sold: 0, ordersPlaced: 0, retries: 0, staleWritesRejected: 0, locksLost: 0, releaseErrors: 0, errors: 0, waitingAtStop: 0, minStockSeen: stock, waits: new Samples() };
    for (let i = 1; i < 1200; i++) {
      tally.sold = i;
      sampler.sample(i * 250, tally, stock - i);
    }
    tally.sold = 1200;
    sampler.sample(300_000, tally, stock - 1200, { final: true });

    const series = sampler.series();
    expect(series.length).toBeLessThanOrEqual(600);
    expect(series[0]).toMatchObject({ t: 0, sold: 0, stock });
    expect(series.at(-1)).toMatchObject({ t: 300_000, sold: 1200, stock: stock - 1200 });
    // Every point but the final one on one grid, four units a second throughout.
    const gaps = new Set(series.slice(1, -1).map((p, i) => p.t - series[i]!.t));
    expect([...gaps]).toHaveLength(1);
    expect(series.slice(1).every((p) => p.ordersPerSec === 4)).toBe(true);
  });

  it("keeps a burst and a long lock wait on a long run's chart after it thins the chart out", () => {
    // A five-minute run sampled every 250 ms: one unit a sample, except a burst of 400 units with one 5-second
    // lock wait between the first two samples (an interval the thinning drops a point of).
    const stock = 5000;
    const sampler = new Sampler();
    sampler.start(stock);
    const tally: Tally = { sold: 0, ordersPlaced: 0, retries: 0, staleWritesRejected: 0, locksLost: 0, releaseErrors: 0, errors: 0, waitingAtStop: 0, minStockSeen: stock, waits: new Samples() };
    for (let i = 1; i < 1200; i++) {
      tally.sold += i === 1 ? 400 : 1;
      tally.waits.push(i === 1 ? 5000 : 1);
      sampler.sample(i * 250, tally, stock - tally.sold);
    }
    sampler.sample(300_000, tally, stock - tally.sold, { final: true });

    const series = sampler.series();
    expect(series.length).toBeLessThanOrEqual(600);
    // The chart's units sold per second, over each point's interval, add up to what was sold.
    const charted = series.slice(1).reduce((sum, p, i) => sum + (p.ordersPerSec * (p.t - series[i]!.t)) / 1000, 0);
    expect(Math.round(charted)).toBe(tally.sold);
    // The 5-second wait is on the chart.
    expect(Math.max(...series.map((p) => p.waitP99Ms ?? 0))).toBe(5000);
  });
});

describe("lab keys and presets", () => {
  it("counts a lock of the operator's own under lock:lab: as production, not as the lab's", () => {
    // A service named "lab" (lock:lab:samples/42) is production: its locks page and alert like any other.
    const own = ["lock:lab:samples/42", "lock:lab:r1:stock", "lock:lab:rmx00000000abc:stock:extra", "lock:lab:rmx00000000abc"];
    for (const resource of own) expect(isLabResource(resource), resource).toBe(false);
    expect(isLabResource(runKeys(newRunId()).lock)).toBe(true);
    const counts = lockSafetyCounts(
      [
        { resource: "lock:lab:samples/42", state: "held", expiresAt: null, acquiredAt: 1_000 },
        { resource: runKeys(newRunId()).lock, state: "held", expiresAt: null, acquiredAt: 500 },
      ],
      isLabResource,
    );
    expect(counts).toMatchObject({ withoutTtl: 1, oldestAcquiredAt: 1_000 });
  });

  it("makes run ids that sort by time and carry no glob characters", () => {
    const a = newRunId(1_700_000_000_000);
    const b = newRunId(1_700_000_000_001);
    expect(isRunId(a)).toBe(true);
    expect(a < b).toBe(true);
    expect(a).toMatch(/^r[0-9a-z]+$/);
    expect(isRunId("r*")).toBe(false);
  });

  it("puts the run's lock under lock:* and names everything it cleans, each name with the run's id", () => {
    const id = newRunId();
    const keys = runKeys(id);
    expect(keys.lock).toBe(`lock:lab:${id}:stock`);
    expect(keys.stock).toBe(`lab:${id}:stock`);
    for (const name of keys.cleanupKeys) expect(name).toContain(`:${id}:`);
    expect(keys.cleanupKeys).toEqual(
      expect.arrayContaining([keys.lock, keys.stock, keys.marker, `fence:lock:lab:${id}:stock`, `waitq:lock:lab:${id}:stock`, `fence-seen:lab:${id}:stock`]),
    );
    expect(() => runKeys("*")).toThrow(TypeError);
  });

  it("ships presets that are valid settings, including every strategy side by side", () => {
    for (const preset of LAB_PRESETS) {
      for (const run of preset.runs) expect(runSettingsSchema.safeParse(run).success, preset.id).toBe(true);
    }
    const all = LAB_PRESETS.find((p) => p.id === "all-strategies")!;
    expect(all.runs.map((r) => r.strategy)).toEqual([...STRATEGIES]);
    const kill = LAB_PRESETS.find((p) => p.id === "redlock-kill")!.runs[0]!;
    // A preset restarts a killed node only after the TTL, as the Redis documentation asks.
    expect(kill.fault!.forMs!).toBeGreaterThan(kill.ttlMs);
    expect(settingsNotes(kill)).toEqual([]);
  });
});
