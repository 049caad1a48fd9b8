import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startPostgres, type TestPostgres } from "../support/postgres";
import { until } from "../support/wait";

describe("lock history left unwritten at shutdown (the real launcher, PostgreSQL down)", () => {
  let server: TestPostgres;
  let launcher: LauncherProcess;

  beforeAll(async () => {
    server = await startPostgres();
    const url = await server.createDatabase("shutdown");
    launcher = await startLauncher({ REDIS_URLS: "", AUDIT_DATABASE_URL: url, LOG_LEVEL: "warn" });
  }, 300_000);
  afterAll(async () => {
    await launcher?.stop("SIGKILL");
    await server?.close();
  });

  it("says in its log how many events the database never took, without the database's password", async () => {
    const backlog = async () => {
      const text = await (await fetch(`${launcher.baseUrl}/metrics`)).text();
      return Number(/^lockscope_history_queue_events (\d+)/m.exec(text)?.[1] ?? Number.NaN);
    };
    const health = (await (await fetch(`${launcher.baseUrl}/api/health`)).json()) as { nodes: Array<{ url: string }> };
    const clients = health.nodes.map((n) => new Redis(Number(new URL(n.url).port), "127.0.0.1", { maxRetriesPerRequest: 1 }));
    server.stop();
    try {
      for (let i = 0; i < 3; i++) await Promise.all(clients.map((c) => c.set(`lock:unwritten/${i}`, `holder-${i}`, "PX", 60_000)));
      await until("the backlog in /metrics", async () => ((await backlog()) >= 3 ? true : null), 20_000, 200);
      expect(await launcher.stop("SIGTERM")).toBe(0);
    } finally {
      for (const c of clients) c.disconnect();
      server.start();
    }
    const line = launcher
      .output()
      .split("\n")
      .find((l) => l.includes("lock history events were not written"));
    expect(line, launcher.output().slice(-2000)).toBeDefined();
    // The three acquisitions at least (a key seen on some nodes before the others may add a `partial`).
    expect((JSON.parse(line!) as { events: number }).events).toBeGreaterThanOrEqual(3);
    expect(launcher.output()).not.toContain(server.password);
  });
});
