import { spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "@/lib/redis-node";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { PROMETHEUS_DIR, prometheusBinary } from "../support/prometheus";
import { startCluster, type TestCluster } from "../support/redis";
import { setTimeout as sleep } from "node:timers/promises";

const METRICS_TOKEN = "it-prometheus-metrics-token-0123456789";

interface Target {
  labels: { job: string };
  health: "up" | "down" | "unknown";
  lastError: string;
}
interface RuleGroup {
  rules: Array<{ name: string; health: string; type: string }>;
}

/**
 * The real proof that the scrape config works: a real Prometheus, given ops/prometheus/prometheus.yml
 * (only its target, token file and intervals changed) and alerts.yml, scrapes a real console.
 */
describe("a real Prometheus with ops/prometheus/prometheus.yml", () => {
  let cluster: TestCluster;
  let console_: LauncherProcess;
  let prometheus: ChildProcess;
  let prometheusUrl = "";
  let prometheusLog = "";
  const tmp = mkdtempSync(path.join(os.tmpdir(), "lockscope-prometheus-"));

  const api = async <T>(pathAndQuery: string): Promise<T> => {
    const res = await fetch(`${prometheusUrl}${pathAndQuery}`);
    const body = (await res.json()) as { status: string; data: T };
    expect(body.status).toBe("success");
    return body.data;
  };

  const until = async <T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> => {
    const deadline = Date.now() + 60_000;
    let value = await read();
    while (!ok(value)) {
      if (Date.now() > deadline) throw new Error(`Prometheus never showed ${what}: ${JSON.stringify(value).slice(0, 1500)}\n${prometheusLog.slice(-1500)}`);
      await sleep(250);
      value = await read();
    }
    return value;
  };

  beforeAll(async () => {
    const binary = prometheusBinary();
    // Healthy means persistent too: nodes without it page (LockscopeNodePersistenceOff, pending at once).
    cluster = await startCluster(3, ["--appendonly", "yes"]);
    console_ = await startLauncher({ REDIS_URLS: cluster.urls.join(","), METRICS_TOKEN });

    const tokenFile = path.join(tmp, "metrics-token");
    writeFileSync(tokenFile, `${METRICS_TOKEN}\n`, { mode: 0o600 });
    let config = readFileSync(path.join(PROMETHEUS_DIR, "prometheus.yml"), "utf8");
    const replace = (from: string, to: string) => {
      expect(config).toContain(from);
      config = config.replace(from, to);
    };
    replace("/etc/prometheus/lockscope-metrics-token", tokenFile);
    replace("- localhost:3000", `- 127.0.0.1:${console_.port}`);
    replace("scrape_interval: 15s", "scrape_interval: 2s");
    replace("evaluation_interval: 15s", "evaluation_interval: 2s");
    replace("scrape_timeout: 10s", "scrape_timeout: 2s");
    // A second job with a wrong token shows the console refusing it.
    config += [
      "  - job_name: wrong-token-probe",
      "    metrics_path: /metrics",
      "    authorization:",
      "      type: Bearer",
      "      credentials: not-the-metrics-token-0000",
      "    static_configs:",
      `      - targets: ["127.0.0.1:${console_.port}"]`,
      "",
    ].join("\n");
    writeFileSync(path.join(tmp, "prometheus.yml"), config);
    copyFileSync(path.join(PROMETHEUS_DIR, "alerts.yml"), path.join(tmp, "alerts.yml"));

    const port = await freePort();
    prometheusUrl = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      binary,
      [
        `--config.file=${path.join(tmp, "prometheus.yml")}`,
        `--storage.tsdb.path=${path.join(tmp, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--log.level=warn",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    prometheus.stdout?.on("data", (c: Buffer) => (prometheusLog += c.toString()));
    prometheus.stderr?.on("data", (c: Buffer) => (prometheusLog += c.toString()));
    await until(
      async () => {
        try {
          return (await fetch(`${prometheusUrl}/-/ready`)).status;
        } catch {
          return 0;
        }
      },
      (status) => status === 200,
      "ready",
    );
  }, 300_000);

  afterAll(async () => {
    if (prometheus && prometheus.exitCode === null) {
      const exited = new Promise((r) => prometheus.once("exit", r));
      prometheus.kill("SIGTERM");
      const timer = setTimeout(() => prometheus.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    }
    await console_?.stop("SIGTERM");
    await cluster?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it("scrapes the console with the token and reports the target up", async () => {
    const targets = await until(
      () => api<{ activeTargets: Target[] }>("/api/v1/targets"),
      (d) => d.activeTargets.some((t) => t.labels.job === "lockscope" && t.health === "up"),
      "the lockscope target up",
    );
    const ours = targets.activeTargets.find((t) => t.labels.job === "lockscope");
    expect(ours?.lastError).toBe("");
  });

  it("is refused with a wrong token", async () => {
    const targets = await until(
      () => api<{ activeTargets: Target[] }>("/api/v1/targets"),
      (d) => d.activeTargets.some((t) => t.labels.job === "wrong-token-probe" && t.health === "down"),
      "the wrong-token target down",
    );
    expect(targets.activeTargets.find((t) => t.labels.job === "wrong-token-probe")?.lastError).toMatch(/401/);
  });

  it("stores the console's series: three lock nodes up and a quorum of two", async () => {
    const result = await until(
      () => api<{ result: Array<{ value: [number, string] }> }>(`/api/v1/query?query=${encodeURIComponent('sum(lockscope_node_up{job="lockscope"})')}`),
      (d) => d.result[0]?.value[1] === "3",
      "three nodes up",
    );
    expect(result.result[0]?.value[1]).toBe("3");
    const quorum = await api<{ result: Array<{ value: [number, string] }> }>(`/api/v1/query?query=${encodeURIComponent('lockscope_quorum_size{job="lockscope"}')}`);
    expect(quorum.result[0]?.value[1]).toBe("2");
  });

  it("answers every query of the Grafana dashboard, with data for the lock nodes and the lock-safety facts", async () => {
    interface Panel {
      title: string;
      targets?: Array<{ expr?: string; legendFormat?: string }>;
      panels?: Panel[];
    }
    const dashboard = JSON.parse(readFileSync(path.join(PROMETHEUS_DIR, "..", "grafana", "lockscope.json"), "utf8")) as { panels: Panel[] };
    const queries = dashboard.panels
      .flatMap((p) => [p, ...(p.panels ?? [])])
      .flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, legend: t.legendFormat ?? "", expr: (t.expr ?? "").replaceAll("$__rate_interval", "1m").replace(/=~"\$[a-z]+"/g, '=~".*"') })));
    expect(queries.length).toBeGreaterThan(40);
    // On a healthy console these show something (others are empty until their event: a lab run, a lock held).
    const withData = new Set(["Nodes up", "Node up", "Keyspace notifications", "PING latency", "Locks by state", "Locks without TTL, below quorum, past TTL", "Node persistence and restart hazard", "Node clock skew", "Locks lost in node restarts and failovers"]);
    for (const q of queries) {
      const answer = await until(
        () => api<{ result: unknown[] }>(`/api/v1/query?query=${encodeURIComponent(q.expr)}`),
        // (Failovers and a cluster's unserved slots are series of Sentinel and cluster deployments: none on this Redlock set;
        // nor has any of its nodes its keyspace notifications unavailable.)
        (d) => !withData.has(q.panel) || d.result.length > 0 || q.legend.startsWith("failover") || q.legend.endsWith("slots served by no primary") || q.legend.endsWith(": unavailable"),
        `data for "${q.panel}" (${q.legend}): ${q.expr}`,
      );
      expect(Array.isArray(answer.result), q.expr).toBe(true);
    }
  });

  it("loads and evaluates every alert rule, and none fires on a healthy console", async () => {
    const data = await until(
      () => api<{ groups: RuleGroup[] }>("/api/v1/rules"),
      (d) => d.groups.length > 0 && d.groups.every((g) => g.rules.every((r) => r.health === "ok")),
      "every rule evaluated",
    );
    const alerts = readFileSync(path.join(PROMETHEUS_DIR, "alerts.yml"), "utf8");
    const declared = [...alerts.matchAll(/^\s*- alert: (\S+)$/gm)].map((m) => m[1]).sort();
    expect(data.groups.flatMap((g) => g.rules.map((r) => r.name)).sort()).toEqual(declared);
    const firing = await api<{ alerts: Array<{ labels: { alertname: string }; state: string }> }>("/api/v1/alerts");
    // The wrong-token job is `up == 0`, but it is no installation of the console: LockscopeDown watches job=~"lockscope.*" only.
    expect(firing.alerts).toEqual([]);
  });
});
