import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { GroupLimiter, METRIC_CATALOG, OTHER_GROUP, counter, getRegistry, histogram } from "@/server/metrics";

describe("metric groups", () => {
  it("names a lock's group by the first capture group of the pattern", () => {
    const groups = new GroupLimiter(/^([^:]+:[^:/]+)/, 50);
    expect(groups.groupOf("lock:orders/42")).toBe("lock:orders");
    expect(groups.groupOf("lock:orders/43")).toBe("lock:orders");
    expect(groups.groupOf("locks:billing:7")).toBe("locks:billing");
  });

  it("counts keys that match nothing, or an over-long group, as other", () => {
    const groups = new GroupLimiter(/^([^:]+:[^:/]+)/, 50);
    expect(groups.groupOf("orders")).toBe(OTHER_GROUP);
    expect(groups.groupOf(`lock:${"x".repeat(200)}`)).toBe(OTHER_GROUP);
  });

  it("keeps at most the configured number of groups however many distinct keys it sees", () => {
    const groups = new GroupLimiter(/^([^:]+:[^:/]+)/, 3);
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) seen.add(groups.groupOf(`lock:tenant-${i}/job`));
    expect(seen).toEqual(new Set(["lock:tenant-0", "lock:tenant-1", "lock:tenant-2", OTHER_GROUP]));
    // A group admitted before the cap keeps its own series.
    expect(groups.groupOf("lock:tenant-1/other-job")).toBe("lock:tenant-1");
  });

  it("puts everything in other when the cap is 0", () => {
    const groups = new GroupLimiter(/^([^:]+:[^:/]+)/, 0);
    expect(groups.groupOf("lock:orders/1")).toBe(OTHER_GROUP);
  });
});

describe("the metric catalog", () => {
  it("follows Prometheus naming: lockscope_ prefix, _total counters, base units", () => {
    for (const m of METRIC_CATALOG) {
      expect(m.name).toMatch(/^lockscope_[a-z0-9_]+$/);
      if (m.type === "counter") expect(m.name).toMatch(/_total$/);
      else expect(m.name).not.toMatch(/_total$/);
      expect(m.name).not.toMatch(/_(ms|milliseconds|minutes|bytes_kb)$/);
      if (m.type === "histogram") expect(m.name).toMatch(/_seconds$/);
      expect(m.help.length).toBeGreaterThan(10);
    }
    expect(new Set(METRIC_CATALOG.map((m) => m.name)).size).toBe(METRIC_CATALOG.length);
  });

  it("never uses a label that could hold a lock key", () => {
    for (const m of METRIC_CATALOG) {
      for (const label of m.labels) expect(["resource", "key", "lock", "token"]).not.toContain(label);
    }
  });

  it("exports the known label values at 0 before anything happened", async () => {
    const text = await getRegistry().metrics();
    expect(text).toContain('lockscope_lab_runs_total{strategy="redlock-fenced",status="failed"} 0');
    expect(text).toContain('lockscope_lab_lost_updates_total{strategy="naive"} 0');
    expect(text).toContain('lockscope_locks_held{state="partial"} 0');
    expect(text).toContain('lockscope_lock_events_total{type="force-released"} 0');
    expect(text).toContain('lockscope_redlock_extensions_total{result="failed"} 0');
    expect(text).toContain("lockscope_process_cpu_user_seconds_total");
    expect(text).toMatch(/lockscope_build_info\{version="\d+\.\d+\.\d+"\} 1/);
    expect(text).not.toMatch(/^# TYPE \S+ summary$/m);
  });

  it("names in lockscope_audit_writes_total's HELP every sink the audit stores count, the audit database too", async () => {
    // The sinks the stores count writes under (`sink: "…"` in server/audit/): stream and file, or the database.
    const dir = path.resolve(import.meta.dirname, "../../server/audit");
    const sinks = new Set(readdirSync(dir).flatMap((file) => [...readFileSync(path.join(dir, file), "utf8").matchAll(/\bsink: "([a-z]+)"/g)].map((m) => m[1]!)));
    expect([...sinks].sort()).toEqual(["file", "postgres", "stream"]);
    const help = /^# HELP lockscope_audit_writes_total (.*)$/m.exec(await getRegistry().metrics())?.[1] ?? "";
    for (const sink of sinks) expect(help).toMatch(new RegExp(`\\b${sink}\\b`));
  });

  it("names in lockscope_failovers_total's HELP each kind of deployment whose failovers it counts", async () => {
    // A monitor per kind counts them (server/deployments/: Sentinel, cluster, a standalone instance's endpoint).
    const dir = path.resolve(import.meta.dirname, "../../server/deployments");
    const monitors = readdirSync(dir).flatMap((file) => [...readFileSync(path.join(dir, file), "utf8").matchAll(/^export class (\w+)FailoverMonitor\b/gm)].map((m) => m[1]!));
    expect(monitors.sort()).toEqual(["Cluster", "Endpoint", "Sentinel"]);
    const help = /^# HELP lockscope_failovers_total (.*)$/m.exec(await getRegistry().metrics())?.[1] ?? "";
    expect(help).toMatch(/Sentinel/);
    expect(help).toMatch(/cluster/);
    expect(help).toMatch(/standalone/);
  });

  it("hands the declared metric to another part of the console asking for it again", () => {
    const first = counter("lockscope_lab_runs_total", "Lab runs finished, by strategy and status.", ["strategy", "status"]);
    const again = counter("lockscope_lab_runs_total", "Lab runs finished, by strategy and status.", ["strategy", "status"]);
    expect(again).toBe(first);
    const made = histogram("lockscope_test_only_seconds", "A metric made outside the catalog.", [], [1]);
    expect(histogram("lockscope_test_only_seconds", "A metric made outside the catalog.", [], [1])).toBe(made);
  });

  it("says which labels are declared when a caller asks for different ones", () => {
    expect(() => counter("lockscope_lab_runs_total", "x", ["strategy"])).toThrow(/declared in server\/metrics\.ts as a counter with labels \[strategy, status\]/);
  });
});
