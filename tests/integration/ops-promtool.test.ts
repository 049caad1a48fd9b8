import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PROMETHEUS_DIR, ROOT, promtool } from "../support/prometheus";

interface Panel {
  title: string;
  targets?: Array<{ expr?: string; legendFormat?: string }>;
  panels?: Panel[];
}

/** The dashboard's query of that panel and legend, with Grafana's variables as "All" and a 5m rate interval. */
function dashboardQuery(title: string, legend: string): string {
  const dashboard = JSON.parse(readFileSync(path.join(ROOT, "ops", "grafana", "lockscope.json"), "utf8")) as { panels: Panel[] };
  const panel = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]).find((p) => p.title === title);
  const expr = panel?.targets?.find((t) => t.legendFormat === legend)?.expr;
  if (!expr) throw new Error(`no query "${legend}" in the dashboard's panel "${title}"`);
  return expr.replaceAll("$__rate_interval", "5m").replace(/=~"\$[a-z]+"/g, '=~".*"');
}

describe("ops/prometheus with the real promtool", () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), "lockscope-promtool-"));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it("checks the alert rules", () => {
    const { status, output } = promtool(["check", "rules", "alerts.yml"]);
    expect(output).toContain("SUCCESS");
    expect(status).toBe(0);
  });

  it("passes the unit tests of every alert", () => {
    const { status, output } = promtool(["test", "rules", "alerts.test.yml"]);
    expect(output).toContain("SUCCESS");
    expect(status).toBe(0);
  });

  it("accepts the example scrape configuration with its rule file", () => {
    // The example reads the token from /etc/prometheus; point it at a file that exists here.
    const tokenFile = path.join(tmp, "metrics-token");
    writeFileSync(tokenFile, "a-metrics-token-0123456789\n");
    const config = readFileSync(path.join(PROMETHEUS_DIR, "prometheus.yml"), "utf8").replace("/etc/prometheus/lockscope-metrics-token", tokenFile);
    expect(config).toContain(tokenFile);
    writeFileSync(path.join(tmp, "prometheus.yml"), config);
    copyFileSync(path.join(PROMETHEUS_DIR, "alerts.yml"), path.join(tmp, "alerts.yml"));
    const { status, output } = promtool(["check", "config", path.join(tmp, "prometheus.yml")]);
    expect(output).toMatch(/SUCCESS: .*prometheus\.yml is valid/);
    expect(output).toMatch(/SUCCESS: \d+ rules found/);
    expect(status).toBe(0);
  });

  it("shows each installation's lock nodes on the dashboard: a node down in one is not hidden by the other's node of that name", () => {
    // Two installations (one job each, as ops/prometheus/prometheus.yml says), both with node-0..node-2;
    // node-0 of lockscope-us is down.
    const series = (job: string, node: string, up: number) => `      - series: 'lockscope_node_up{job="${job}", instance="${job}:3000", node="${node}"}'\n        values: "${up}x5"`;
    const nodeUp = dashboardQuery("Node up", "{{job}} {{deployment}} {{node}}");
    const nodesUp = dashboardQuery("Nodes up", "up {{job}}");
    const yml = [
      "evaluation_interval: 1m",
      "tests:",
      "  - interval: 1m",
      "    input_series:",
      ...["node-0", "node-1", "node-2"].map((n) => series("lockscope", n, 1)),
      series("lockscope-us", "node-0", 0),
      series("lockscope-us", "node-1", 1),
      series("lockscope-us", "node-2", 1),
      "    promql_expr_test:",
      `      - expr: ${JSON.stringify(`${nodeUp} == 0`)}`,
      "        eval_time: 2m",
      "        exp_samples:",
      "          - labels: '{job=\"lockscope-us\", node=\"node-0\"}'",
      "            value: 0",
      `      - expr: ${JSON.stringify(nodesUp)}`,
      "        eval_time: 2m",
      "        exp_samples:",
      "          - labels: '{job=\"lockscope\"}'",
      "            value: 3",
      "          - labels: '{job=\"lockscope-us\"}'",
      "            value: 2",
      "",
    ].join("\n");
    writeFileSync(path.join(tmp, "dashboard.test.yml"), yml);
    const { status, output } = promtool(["test", "rules", path.join(tmp, "dashboard.test.yml")]);
    expect(output).toContain("SUCCESS");
    expect(status).toBe(0);
  });

  it("names each deployment's kind beside its quorum on the dashboard, and still shows the quorum without it", () => {
    const quorum = dashboardQuery("Nodes up", "quorum {{job}} {{deployment}} {{kind}}");
    const series = (name: string, labels: string, value: number) => `      - series: '${name}{job="lockscope", instance="c:3000", ${labels}}'\n        values: "${value}x5"`;
    const yml = [
      "evaluation_interval: 1m",
      "tests:",
      "  - interval: 1m",
      "    input_series:",
      series("lockscope_quorum_size", 'deployment="orders"', 2),
      series("lockscope_deployment_info", 'deployment="orders", kind="redlock"', 1),
      series("lockscope_quorum_size", 'deployment="payments"', 1),
      series("lockscope_deployment_info", 'deployment="payments", kind="sentinel"', 1),
      // A console that does not export the kind: its quorum is still shown.
      `      - series: 'lockscope_quorum_size{job="lockscope-old", instance="o:3000"}'\n        values: "2x5"`,
      "    promql_expr_test:",
      `      - expr: ${JSON.stringify(quorum)}`,
      "        eval_time: 2m",
      "        exp_samples:",
      "          - labels: '{job=\"lockscope\", deployment=\"orders\", kind=\"redlock\"}'",
      "            value: 2",
      "          - labels: '{job=\"lockscope\", deployment=\"payments\", kind=\"sentinel\"}'",
      "            value: 1",
      "          - labels: '{job=\"lockscope-old\"}'",
      "            value: 2",
      "",
    ].join("\n");
    writeFileSync(path.join(tmp, "dashboard-quorum.test.yml"), yml);
    const { status, output } = promtool(["test", "rules", path.join(tmp, "dashboard-quorum.test.yml")]);
    expect(output).toContain("SUCCESS");
    expect(status).toBe(0);
  });

  it("really fails on a broken rule (the check is not a no-op)", () => {
    writeFileSync(path.join(tmp, "broken.yml"), "groups:\n  - name: x\n    rules:\n      - alert: Broken\n        expr: sum(lockscope_node_up\n");
    const { status } = promtool(["check", "rules", path.join(tmp, "broken.yml")]);
    expect(status).not.toBe(0);
  });
});
