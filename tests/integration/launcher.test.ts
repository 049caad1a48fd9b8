import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCluster, type TestCluster } from "../support/redis";
import { redisServerChildren, redisServerPids, startLauncher } from "../support/launcher";
import { until } from "../support/wait";

interface HealthBody {
  status: string;
  nodes: Array<{ url: string; up: boolean }>;
}

describe("npm start's launcher", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(3);
  });
  afterAll(async () => {
    await cluster.close();
  });

  it("stops at once with one line naming a bad PORT", async () => {
    const launcher = await startLauncher({ PORT: "http" }, { waitReady: false });
    expect(await launcher.exited).toBe(1);
    const lines = launcher.output().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('PORT="http" is invalid');
  });

  it("stops at once with one line naming a bad REDIS_URLS", async () => {
    const launcher = await startLauncher({ REDIS_URLS: "localhost:6380" }, { waitReady: false });
    expect(await launcher.exited).toBe(1);
    expect(launcher.output().trim()).toMatch(/^lockscope: REDIS_URLS="localhost:6380" is invalid: expected .*redis:\/\//);
  });

  it("serves on three embedded nodes and leaves no redis-server behind after Ctrl-C", async () => {
    const launcher = await startLauncher({ REDIS_URLS: "" });
    // Right after the start, on a loaded machine, a node can briefly read as degraded (a probe slower than
    // the node timeout, a watcher still subscribing): wait for "ok", as an operator watching would.
    const health = await until("health ok", async () => {
      const body = (await (await fetch(`${launcher.baseUrl}/api/health`)).json()) as HealthBody;
      return body.status === "ok" ? body : null;
    });
    expect(health.status).toBe("ok");
    expect(health.nodes).toHaveLength(3);
    const ports = health.nodes.map((n) => new URL(n.url).port);
    expect(ports).not.toContain("6379");
    for (const port of ports) expect(redisServerPids(`:${port}`)).toHaveLength(1);
    expect(redisServerChildren(launcher.child.pid!)).toHaveLength(3);
    expect(launcher.output()).toContain(`console ready at http://localhost:${launcher.port}`);
    expect(await launcher.stop("SIGINT")).toBe(0);
    for (const port of ports) expect(redisServerPids(`:${port}`)).toEqual([]);
  }, 120_000);

  it("uses the nodes in REDIS_URLS and starts none of its own", async () => {
    const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(",") });
    const health = (await (await fetch(`${launcher.baseUrl}/api/health`)).json()) as HealthBody;
    expect(health.nodes.map((n) => n.url)).toEqual(cluster.urls);
    expect(redisServerChildren(launcher.child.pid!)).toEqual([]);
    expect(await launcher.stop("SIGTERM")).toBe(0);
    // The nodes it did not start are still there.
    expect(await cluster.client(0).ping()).toBe("PONG");
  }, 120_000);
});
