import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as MetricsRoute from "@/app/metrics/route";
import { call, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import { PROMETHEUS_DIR, promtool, samples } from "../support/prometheus";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * Managed Redis refuses CONFIG: INFO persistence still says whether the append-only file is on, but nothing says
 * whether a save schedule is set. The console exports what it knows (aof 0) and leaves the schedule out; the
 * shipped LockscopeNodePersistenceOff, fed what it scraped, must not page "no save schedule" on that alone.
 */
describe("/metrics and LockscopeNodePersistenceOff on nodes that refuse CONFIG", () => {
  let cluster: TestCluster;
  let route: typeof MetricsRoute;
  const tmp = mkdtempSync(path.join(os.tmpdir(), "lockscope-persistence-"));

  beforeAll(async () => {
    // CONFIG renamed away, the notification flags given at start, as a managed service's parameter group gives them.
    cluster = await setUpConsole({ nodes: 3, extraArgs: ["--rename-command", "CONFIG", "", "--notify-keyspace-events", "KEA"] });
    route = await import("@/app/metrics/route");
    await startLiveReconciled({ metrics: true });
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
    rmSync(tmp, { recursive: true, force: true });
  });

  it("exports appendonly off and no save schedule it cannot read, and the alert does not page on that", async () => {
    const text = await until(
      "every node's persistence read",
      async () => {
        const body = String((await call(route.GET, "GET", "/metrics", { token: null })).body);
        const s = samples(body);
        return ["node-0", "node-1", "node-2"].every((n) => s.has(`lockscope_node_persistence{node="${n}",kind="aof"}`)) ? body : null;
      },
      30_000,
      100,
    );
    const persistence = text.split("\n").filter((line) => line.startsWith("lockscope_node_persistence{"));
    // The test nodes run with `--appendonly no` (INFO: aof_enabled:0); their save schedule is not readable.
    expect(persistence.sort()).toEqual(['lockscope_node_persistence{node="node-0",kind="aof"} 0', 'lockscope_node_persistence{node="node-1",kind="aof"} 0', 'lockscope_node_persistence{node="node-2",kind="aof"} 0']);

    // The scraped series, as Prometheus would keep them for 20 minutes, through the shipped rules.
    const input = persistence.map((line) => {
      const cut = line.lastIndexOf(" ");
      const series = line.slice(0, cut).replace("{", '{job="lockscope", instance="c:3000", ');
      return `      - series: '${series}'\n        values: "${line.slice(cut + 1)}x20"`;
    });
    const yml = [
      `rule_files: [${JSON.stringify(path.join(PROMETHEUS_DIR, "alerts.yml"))}]`,
      "evaluation_interval: 1m",
      "tests:",
      "  - interval: 1m",
      "    input_series:",
      ...input,
      "    alert_rule_test:",
      "      - eval_time: 15m",
      "        alertname: LockscopeNodePersistenceOff",
      "        exp_alerts: []",
      "",
    ].join("\n");
    writeFileSync(path.join(tmp, "persistence.test.yml"), yml);
    const { status, output } = promtool(["test", "rules", path.join(tmp, "persistence.test.yml")]);
    expect(output).toContain("SUCCESS");
    expect(status).toBe(0);
  });
});
