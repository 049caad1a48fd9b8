import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startPrometheus, type PrometheusServer } from "../support/prometheus";
import { startCluster, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

const METRICS_TOKEN = "it-replicas-metrics-token-0123456789";

interface Alert {
  labels: Record<string, string>;
  state: string;
  annotations?: Record<string, string>;
}

/** Two consoles on the same three nodes, both scraped by one real Prometheus with the shipped rules. */
describe("a real Prometheus scraping two replicas", () => {
  let cluster: TestCluster;
  let a: LauncherProcess;
  let b: LauncherProcess;
  let prometheus: PrometheusServer;

  beforeAll(async () => {
    cluster = await startCluster(3);
    const env = { REDIS_URLS: cluster.urls.join(","), METRICS_TOKEN, LOCKSCOPE_SESSION_SECRET: "cIV/i24E0hoyOZLEw78JV1Bw2K+oFlUhjHj3usSD0js=" };
    a = await startLauncher(env);
    b = await startLauncher(env);
    prometheus = await startPrometheus([`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`], METRICS_TOKEN);
  }, 300_000);

  afterAll(async () => {
    await prometheus?.stop();
    await Promise.all([a?.stop("SIGTERM"), b?.stop("SIGTERM")]);
    await cluster?.close();
  });

  it("counts three lock nodes, not six: one console reports the nodes' metrics", async () => {
    await until("both consoles scraped", async () => (await prometheus.scalar('count(up{job="lockscope"} == 1)')) === "2", 60_000, 250);
    await until("one reporter", async () => (await prometheus.scalar("count(lockscope_metrics_reporter == 1)")) === "1", 60_000, 250);
    // Prometheus keeps the last samples of a console that stopped exporting for one scrape: wait for the
    // election to have settled in the stored series.
    const sum = await until("three nodes up", async () => {
      const value = await prometheus.scalar('sum(lockscope_node_up{job="lockscope"})');
      return value === "3" ? value : null;
    }, 60_000, 250);
    expect(sum).toBe("3");
    expect(await prometheus.scalar("count(count by (instance) (lockscope_nodes))")).toBe("1");
    expect(await prometheus.scalar("count(lockscope_build_info)")).toBe("2");
    // The dashboard's query gives the same with any number of consoles.
    expect(await prometheus.scalar("sum(max by (node) (lockscope_node_up))")).toBe("3");
  });

  /** The alerts of that name once there is at least one (pending or firing). */
  const alertsNamed = (name: string) =>
    until(`${name} pending or firing`, async () => {
      const data = await prometheus.api<{ alerts: Alert[] }>("alerts");
      const ours = data.alerts.filter((x) => x.labels.alertname === name);
      return ours.length > 0 ? ours : null;
    }, 60_000, 250);

  it("raises one alert for one node down, whichever console reports it", async () => {
    await cluster.kill(2);
    const alerts = await alertsNamed("LockscopeLockNodeDown");
    expect(alerts).toHaveLength(1);
    expect(alerts[0]!.labels).toMatchObject({ node: "node-2", job: "lockscope" });
    expect(alerts[0]!.labels.instance).toBeUndefined();
    expect(await prometheus.scalar("sum(max by (node) (lockscope_node_up))")).toBe("2");
    const atRisk = await alertsNamed("LockscopeQuorumAtRisk");
    expect(atRisk).toHaveLength(1);
    // The summary reads the total and the quorum from the consoles' own series.
    expect(atRisk[0]!.annotations?.summary).toBe("Redlock quorum at risk: 2 of 3 lock nodes up and writable, 2 needed");
  }, 120_000);
});
