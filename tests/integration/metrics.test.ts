import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as MetricsRoute from "@/app/metrics/route";
import type { Redlock as RedlockClass } from "@lockscope/redlock";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import { promtool, samples } from "../support/prometheus";
import type { TestCluster } from "../support/redis";
import { until, within } from "../support/wait";

const METRICS_TOKEN = "it-metrics-token-0123456789abcdef";
const MAX_GROUPS = 4;

/** The console's own series (the catalog's `lockscope_` metrics, not the Node.js process ones). */
function consoleSeries(text: string): string[] {
  return [...samples(text).keys()].filter((s) => s.startsWith("lockscope_") && !/^lockscope_(process|nodejs)_/.test(s)).sort();
}


describe("GET /metrics on real lock nodes", () => {
  let cluster: TestCluster;
  let route: typeof MetricsRoute;
  let redlock: RedlockClass;

  const scrape = async () => {
    const res = await call(route.GET, "GET", "/metrics", { token: METRICS_TOKEN });
    expect(res.status).toBe(200);
    return res.body as string;
  };

  /** Waits until the live view has caught up with what the nodes hold. */
  const untilScrape = async (check: (s: Map<string, number>) => boolean, what: string) => {
    let last = "";
    try {
      return await until(what, async () => {
        last = await scrape();
        return check(samples(last)) ? last : null;
      }, 30_000, 100);
    } catch {
      throw new Error(`metrics never showed ${what}:\n${last.split("\n").filter((l) => /lockscope_(locks_held|lock_events)/.test(l)).join("\n")}`);
    }
  };


  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { METRICS_TOKEN, METRICS_MAX_GROUPS: String(MAX_GROUPS) } });
    route = await import("@/app/metrics/route");
    const { startLive, waitUntilReconciled } = await import("@/server/live");
    const { startConsoleMetrics } = await import("@/server/console-metrics");
    const { instrumentRedlock } = await import("@/server/engine-metrics");
    const { Redlock } = await import("@lockscope/redlock");
    startConsoleMetrics();
    startLive();
    expect(await waitUntilReconciled(30_000)).toBe(true);
    // (A node timeout of 1 s, not the default 200 ms: a pause of this test process must not count answers as missing.)
    redlock = new Redlock(cluster.clients(), { retryCount: 0, label: "metrics-test", nodeTimeoutMs: 1_000 });
    instrumentRedlock(redlock);
  });

  afterAll(async () => {
    await redlock?.quit();
    await tearDownConsole(cluster);
  });

  it("refuses a scrape without the METRICS_TOKEN, in the contract's error shape", async () => {
    const none = await call(route.GET, "GET", "/metrics", { token: null });
    expect(none.status).toBe(401);
    expect(none.body).toMatchObject({ error: { code: "unauthorized", message: expect.stringContaining("METRICS_TOKEN") as unknown } });
    expect(none.headers.get("www-authenticate")).toMatch(/^Bearer/);
    const wrong = await call(route.GET, "GET", "/metrics", { token: "not-the-metrics-token-at-all" });
    expect(wrong.status).toBe(401);
    expect(JSON.stringify(wrong.body)).not.toContain(METRICS_TOKEN);
    // The operator's token is no scrape credential.
    const operator = await call(route.GET, "GET", "/metrics");
    expect(operator.status).toBe(401);
  });

  it("limits wrong scrape tokens per client address with Retry-After, and still serves the right one", async () => {
    const from = (ip: string, token: string) => call(route.GET, "GET", "/metrics", { token, headers: { "x-lockscope-client-ip": ip } });
    for (let i = 0; i < 5; i++) expect((await from("10.8.8.1", `guessed-metrics-token-${i}`)).status).toBe(401);
    const limited = await from("10.8.8.1", "guessed-metrics-token-5");
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ error: { code: "rate_limited" } });
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    // A guesser behind the same address cannot stop the scrapes.
    expect((await from("10.8.8.1", METRICS_TOKEN)).status).toBe(200);
    expect((await from("10.8.8.2", "guessed-metrics-token-6")).status).toBe(401);
  });

  it("serves the Prometheus text format with the nodes up and the quorum", async () => {
    const res = await call(route.GET, "GET", "/metrics", { token: METRICS_TOKEN });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const s = samples(res.body as string);
    for (const node of ["node-0", "node-1", "node-2"]) expect(s.get(`lockscope_node_up{node="${node}"}`)).toBe(1);
    expect(s.get("lockscope_nodes")).toBe(3);
    expect(s.get("lockscope_quorum_size")).toBe(2);
    expect(s.get('lockscope_node_notifications{node="node-0",status="enabled-by-console"}')).toBe(1);
    expect(s.get('lockscope_watcher_connected{node="node-1"}')).toBe(1);
    expect(s.get('lockscope_lab_runs_total{strategy="atomic",status="done"}')).toBe(0);
  });

  it("exports every metric the shipped alert rules and Grafana dashboard name", async () => {
    const ops = (file: string) => readFileSync(path.resolve(import.meta.dirname, "../../ops", file), "utf8");
    // Histograms are queried through their _bucket, _sum and _count series.
    const named = (text: string) => new Set([...text.matchAll(/\blockscope_[a-z0-9_]+/g)].map(([name]) => name.replace(/_(bucket|sum|count)$/, "")));
    const referenced = new Set([...named(ops("prometheus/alerts.yml")), ...named(ops("grafana/lockscope.json"))]);
    // Exported only with AUDIT_DATABASE_URL: audit-postgres.test.ts scrapes them from a console with a database.
    for (const name of ["lockscope_history_events_total", "lockscope_history_queue_events", "lockscope_history_write_failures_total"]) referenced.delete(name);
    expect(referenced.size).toBeGreaterThan(40);
    const scraped = new Set([...(await scrape()).matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    expect([...referenced].filter((name) => !scraped.has(name)).sort()).toEqual([]);
  });

  it("counts what the engine and the watcher see, and passes promtool check metrics after load", async () => {
    // Three groups (lock:orders, lock:billing, lock:mail): a held lock, releases, and a conflict.
    const held = await redlock.acquire(["lock:orders/1"], 30_000);
    const billing = [];
    for (let i = 0; i < 20; i++) billing.push(await redlock.acquire([`lock:billing/${i}`], 10_000));
    await expect(redlock.acquire(["lock:orders/1"], 10_000)).rejects.toThrow();
    const extended = await redlock.acquire(["lock:mail/1"], 10_000);
    await extended.extend(10_000);
    // The watcher reads a key after its notification: a lock released within milliseconds may never
    // be seen as held. Release once it has been.
    await untilScrape((s) => s.get('lockscope_locks_held{state="held"}') === 22, "22 held locks");
    for (const lock of [...billing, extended]) await lock.release();

    const text = await untilScrape(
      (s) =>
        s.get('lockscope_locks_held{state="held"}') === 1 &&
        (s.get('lockscope_lock_events_total{type="released"}') ?? 0) >= 21 &&
        // The live view recomputes the oldest lock about once a second.
        (s.get("lockscope_lock_oldest_held_acquired_timestamp_seconds") ?? 0) > 0,
      "one held lock and 21 releases",
    );
    const s = samples(text);
    expect(s.get('lockscope_redlock_acquire_attempts_total{group="lock:billing",result="acquired"}')).toBe(20);
    expect(s.get('lockscope_redlock_acquire_attempts_total{group="lock:orders",result="conflict"}')).toBe(1);
    expect(s.get('lockscope_redlock_extensions_total{result="ok"}')).toBe(1);
    expect(s.get("lockscope_redlock_hold_seconds_count")).toBe(21);
    expect(s.get("lockscope_redlock_acquire_wait_seconds_count")).toBe(22);
    expect(s.get('lockscope_lock_events_total{type="acquired"}')).toBeGreaterThanOrEqual(22);
    expect(s.get('lockscope_keyspace_events_total{node="node-0",event="set"}')).toBeGreaterThanOrEqual(22);
    expect(s.get('lockscope_lock_contention_events_total{group="lock:orders",traffic="production"}')).toBeGreaterThanOrEqual(1);
    const oldest = s.get("lockscope_lock_oldest_held_acquired_timestamp_seconds") ?? 0;
    expect(Math.abs(oldest - Date.now() / 1000)).toBeLessThan(120);
    expect(text).not.toContain("lock:orders/1");

    const check = promtool(["check", "metrics"], text);
    expect(check.output).toBe("");
    expect(check.status).toBe(0);
    await held.release();
  });

  it("labels the contention lab's locks traffic=\"lab\", apart from production", async () => {
    const labLock = "lock:lab:rtesttraffic1:stock";
    const held = await redlock.acquire([labLock], 10_000);
    const before = samples((await call(route.GET, "GET", "/metrics", { token: METRICS_TOKEN })).body as string);
    await expect(redlock.acquire([labLock], 10_000)).rejects.toThrow();
    const s = samples(await untilScrape((m) => (m.get('lockscope_lock_contention_events_total{group="lock:lab",traffic="lab"}') ?? 0) >= 1, "lab contention counted"));
    expect(s.get('lockscope_lock_contention_events_total{group="lock:lab",traffic="production"}')).toBe(before.get('lockscope_lock_contention_events_total{group="lock:lab",traffic="production"}') ?? 0);
    await held.release();
  });

  it("adds no series for 10,000 more distinct lock keys, whatever their groups", async () => {
    // Fill the group cap and create `other` first, so the baseline holds every series there can be.
    for (const group of ["a", "b", "c", "d", "e"]) (await redlock.acquire([`lock:${group}/0`], 5_000)).release().catch(() => undefined);
    // The nodes' facts (clock skew, persistence) are series too: read from every node by then.
    const nodeFacts = (s: Map<string, number>) => ["node-0", "node-1", "node-2"].every((n) => s.has(`lockscope_node_clock_skew_seconds{node="${n}"}`) && s.has(`lockscope_node_persistence{node="${n}",kind="aof"}`));
    await untilScrape((s) => s.get('lockscope_locks_held{state="held"}') === 0 && s.has('lockscope_redlock_acquire_attempts_total{group="other",result="acquired"}') && nodeFacts(s), "the locks released and the nodes' facts read");
    const before = consoleSeries(await scrape());

    const total = 10_000;
    let next = 0;
    const worker = async () => {
      while (next < total) {
        const i = next++;
        const lock = await redlock.acquire([`lock:tenant-${i}/job-${i}`], 5_000);
        await lock.release();
      }
    };
    await Promise.all(Array.from({ length: 16 }, worker));
    const text = await untilScrape(
      (s) => s.get('lockscope_locks_held{state="held"}') === 0 && (s.get('lockscope_redlock_acquire_attempts_total{group="other",result="acquired"}') ?? 0) >= total,
      "10,000 releases",
    );
    expect(consoleSeries(text)).toEqual(before);
    expect(text).not.toMatch(/tenant-/);
    const groups = new Set([...text.matchAll(/group="([^"]+)"/g)].map((m) => m[1]));
    expect(groups.size).toBeLessThanOrEqual(MAX_GROUPS + 1);
    expect(groups).toContain("other");
  }, 240_000);

  it("exports the lock-safety signals: no TTL, below quorum, the oldest present lock, persistence, clock skew, uptime, a restart within the longest TTL", async () => {
    const clients = cluster.clients();
    await Promise.all(clients.map((c) => c.set("lock:safety/forever", "holder-without-ttl")));
    // A split vote: two nodes hold two different values, neither a quorum (a Redlock that lost its quorum).
    await clients[0]!.set("lock:safety/split", "holder-a", "PX", 600_000);
    await clients[2]!.set("lock:safety/split", "holder-b", "PX", 600_000);
    // On one node only: a single-instance lock, held (not below quorum); it keeps node 1's longest TTL long.
    await clients[1]!.set("lock:safety/long", "long-holder", "PX", 600_000);
    // The SETNX pattern of the Redis documentation: its expiry (Unix seconds) in the value, no TTL, and a holder
    // that died 5 minutes ago: stuck past its TTL.
    const stuckUntil = Math.floor(Date.now() / 1000) - 300;
    await Promise.all(clients.map((c) => c.set("lock:safety/stuck", String(stuckUntil))));
    const s = samples(
      await untilScrape(
        (m) => m.get("lockscope_locks_without_ttl") === 1 && m.get("lockscope_locks_below_quorum") === 1 && m.get("lockscope_locks_past_ttl") === 1 && (m.get('lockscope_node_longest_ttl_seconds{node="node-1"}') ?? 0) >= 500,
        "a lock without TTL, one below quorum and one past its TTL",
      ),
    );
    // How long it has been past its TTL, for LockscopeLockStuckPastTtl.
    expect(s.get("lockscope_lock_oldest_past_ttl_expiry_timestamp_seconds")).toBe(stuckUntil);
    expect(s.get("lockscope_lock_oldest_acquired_timestamp_seconds")).toBeGreaterThan(0);
    for (const node of ["node-0", "node-1", "node-2"]) {
      // The test nodes run with `--save "" --appendonly no`.
      expect(s.get(`lockscope_node_persistence{node="${node}",kind="aof"}`)).toBe(0);
      expect(s.get(`lockscope_node_persistence{node="${node}",kind="rdb"}`)).toBe(0);
      expect(Math.abs(s.get(`lockscope_node_clock_skew_seconds{node="${node}"}`) ?? 99)).toBeLessThan(5);
      expect(s.get(`lockscope_node_uptime_seconds{node="${node}"}`)).toBeGreaterThanOrEqual(0);
    }
    expect(s.get('lockscope_node_restart_hazard{node="node-1"}')).toBe(0);

    // Node 1 restarts empty while a 10-minute lock was on it: it may now grant that lock again.
    await cluster.restart(1);
    const after = samples(await untilScrape((m) => m.get('lockscope_node_restart_hazard{node="node-1"}') === 1, "the restart hazard on node-1"));
    expect(after.get('lockscope_node_restart_hazard{node="node-0"}')).toBe(0);
    await Promise.all(cluster.clients().map((c) => c.del("lock:safety/forever", "lock:safety/split", "lock:safety/long", "lock:safety/stuck")));
  }, 60_000);

  it("counts lost locks, failed extensions and node errors", async () => {
    const { forceRelease } = await import("@lockscope/redlock");
    // Lost: an operator force-releases a lock its holder still uses; the holder's signal aborts.
    const lost = redlock.using(["lock:orders/lost"], 10_000, (signal) => new Promise<string>((resolve) => signal.addEventListener("abort", () => resolve("aborted"), { once: true })));
    await untilScrape((s) => (s.get('lockscope_locks_held{state="held"}') ?? 0) >= 1, "the lock held");
    // The group's lost-lock series is there at 0 before its first loss, or increase() never sees that loss.
    expect(samples(await scrape()).get('lockscope_redlock_locks_lost_total{group="lock:orders"}')).toBe(0);
    await within("the force release", forceRelease(cluster.clients(), "lock:orders/lost"));
    expect(await within("the holder's signal aborting after the force release", lost)).toBe("aborted");

    // An extension that fails: the keys were deleted behind the holder's back.
    const gone = await within("acquiring lock:billing/gone", redlock.acquire(["lock:billing/gone"], 10_000));
    await Promise.all(cluster.clients().map((c) => c.del("lock:billing/gone")));
    await expect(within("the failing extension", gone.extend(10_000))).rejects.toThrow();

    // A node down: the engine's votes from it are errors.
    await within("killing node 2", cluster.kill(2));
    const survivor = await within("acquiring with node 2 down", redlock.acquire(["lock:billing/survivor"], 5_000));
    await within("releasing with node 2 down", survivor.release());

    const s = samples(await within("the last scrape", scrape()));
    expect(s.get('lockscope_redlock_locks_lost_total{group="lock:orders"}')).toBe(1);
    expect(s.get('lockscope_redlock_extensions_total{result="failed"}')).toBe(1);
    expect(s.get("lockscope_redlock_release_validity_margin_seconds_count")).toBe(s.get("lockscope_redlock_hold_seconds_count"));
    expect(s.get('lockscope_redlock_node_errors_total{node="node-2",operation="acquire"}')).toBeGreaterThanOrEqual(1);
    expect(s.get('lockscope_node_up{node="node-2"}')).toBe(0);
    expect(s.has('lockscope_node_latency_seconds{node="node-2"}')).toBe(false);
    // Nor how long it has run: it was killed, and a count going on from its last reading would say it still runs.
    expect(s.has('lockscope_node_uptime_seconds{node="node-2"}')).toBe(false);
    expect(s.has('lockscope_node_uptime_seconds{node="node-0"}')).toBe(true);
    // Nor its clock's skew, which is measured on every reading (LockscopeClockSkew must not go on from the last one).
    expect(s.has('lockscope_node_clock_skew_seconds{node="node-2"}')).toBe(false);
    expect(s.has('lockscope_node_clock_skew_seconds{node="node-0"}')).toBe(true);
  });
});
