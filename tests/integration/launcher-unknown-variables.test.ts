import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCluster, type TestCluster } from "../support/redis";
import { startLauncher } from "../support/launcher";

describe("the launcher, given a LOCKSCOPE_ variable it does not know", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(3);
  });
  afterAll(async () => {
    await cluster.close();
  });

  it("names a misspelled one at start with the variable meant, never its value, and leaves Kubernetes's service variables alone", async () => {
    const token = "meant-to-close-reading-to-strangers";
    // What Kubernetes puts in every pod's environment for a Service named `lockscope` (and one named `lockscope-redis`).
    const kubernetes = {
      LOCKSCOPE_SERVICE_HOST: "10.96.0.12",
      LOCKSCOPE_SERVICE_PORT: "3000",
      LOCKSCOPE_SERVICE_PORT_HTTP: "3000",
      LOCKSCOPE_PORT: "tcp://10.96.0.12:3000",
      LOCKSCOPE_PORT_3000_TCP: "tcp://10.96.0.12:3000",
      LOCKSCOPE_PORT_3000_TCP_PROTO: "tcp",
      LOCKSCOPE_PORT_3000_TCP_PORT: "3000",
      LOCKSCOPE_PORT_3000_TCP_ADDR: "10.96.0.12",
      LOCKSCOPE_REDIS_SERVICE_HOST: "10.96.0.13",
      LOCKSCOPE_REDIS_SERVICE_PORT: "6379",
      LOCKSCOPE_REDIS_PORT: "tcp://10.96.0.13:6379",
      LOCKSCOPE_REDIS_PORT_6379_TCP: "tcp://10.96.0.13:6379",
    };
    const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_VIEWR_TOKEN: token, LOCKSCOPE_REDIS_URLS: "redis://10.0.0.1:6379", ...kubernetes });
    try {
      const lines = launcher.output().split("\n");
      const about = (name: string) => lines.filter((line) => new RegExp(`\\b${name}\\b`).test(line));
      // One line each, saying which variable was meant.
      expect(about("LOCKSCOPE_VIEWR_TOKEN")).toHaveLength(1);
      expect(about("LOCKSCOPE_VIEWR_TOKEN")[0]).toMatch(/^lockscope: .*LOCKSCOPE_VIEWR_TOKEN.*ignored.*LOCKSCOPE_VIEWER_TOKEN/);
      expect(about("LOCKSCOPE_REDIS_URLS")).toHaveLength(1);
      expect(about("LOCKSCOPE_REDIS_URLS")[0]).toMatch(/did you mean REDIS_URLS\b/);
      expect(launcher.output()).not.toContain(token);
      expect(launcher.output()).not.toContain("10.0.0.1");
      for (const name of Object.keys(kubernetes)) expect(about(name), name).toEqual([]);
      // It still serves: a warning, not a refusal to start.
      expect((await fetch(`${launcher.baseUrl}/api/health`)).status).toBe(200);
    } finally {
      await launcher.stop();
    }
  });
});
