import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startPostgres, type TestPostgres } from "../support/postgres";
import { until } from "../support/wait";

/** The test's own PostgreSQL server processes: its postmaster and the backends it started. */
function serverPids(server: TestPostgres): number[] {
  const postmaster = Number(readFileSync(path.join(server.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
  let children: number[] = [];
  try {
    children = execFileSync("pgrep", ["-P", String(postmaster)], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean)
      .map(Number);
  } catch {
    // No children.
  }
  return [postmaster, ...children];
}

describe("lock history left unwritten at shutdown (the real launcher, PostgreSQL not answering)", () => {
  let server: TestPostgres;
  let launcher: LauncherProcess;
  let frozen: number[] = [];

  beforeAll(async () => {
    server = await startPostgres();
    const url = await server.createDatabase("shutdown_slow");
    launcher = await startLauncher({ REDIS_URLS: "", AUDIT_DATABASE_URL: url, LOG_LEVEL: "warn" });
  }, 300_000);
  afterAll(async () => {
    for (const pid of frozen) {
      try {
        process.kill(pid, "SIGCONT");
      } catch {
        // Gone.
      }
    }
    await launcher?.stop("SIGKILL");
    await server?.close();
  });

  it("says in its log how many events a database that takes them no more never got, within the shutdown", async () => {
    const backlog = async () => {
      const text = await (await fetch(`${launcher.baseUrl}/metrics`)).text();
      return Number(/^lockscope_history_queue_events (\d+)/m.exec(text)?.[1] ?? Number.NaN);
    };
    const health = (await (await fetch(`${launcher.baseUrl}/api/health`)).json()) as { nodes: Array<{ url: string }> };
    const clients = health.nodes.map((n) => new Redis(Number(new URL(n.url).port), "127.0.0.1", { maxRetriesPerRequest: 1 }));
    // (The embedded nodes stop with the console.)
    for (const c of clients) c.on("error", () => undefined);
    frozen = serverPids(server);
    for (const pid of frozen) process.kill(pid, "SIGSTOP");
    try {
      for (let i = 0; i < 3; i++) await Promise.all(clients.map((c) => c.set(`lock:unwritten/${i}`, `holder-${i}`, "PX", 60_000)));
      // Waiting for the database (the gauge follows the first write that failed to get an answer).
      await until("the backlog in /metrics", async () => ((await backlog()) >= 3 ? true : null), 30_000, 200);
      expect(await launcher.stop("SIGTERM")).toBe(0);
    } finally {
      for (const c of clients) c.disconnect();
    }
    const line = launcher
      .output()
      .split("\n")
      .find((l) => l.includes("lock history events were not written"));
    expect(line, launcher.output().slice(-2000)).toBeDefined();
    expect((JSON.parse(line!) as { events: number }).events).toBeGreaterThanOrEqual(3);
    // Within the step's share of the shutdown: the launcher never had to give up on it (and the line is not left to luck).
    expect(launcher.output()).not.toContain("shutdown step history did not finish");
    expect(launcher.output()).not.toContain(server.password);
  });
});
