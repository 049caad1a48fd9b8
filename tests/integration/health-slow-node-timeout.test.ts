import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCluster, type TestCluster } from "../support/redis";
import { startLauncher, type LauncherProcess } from "../support/launcher";

const ROOT = path.resolve(import.meta.dirname, "../..");

/** The Dockerfile's HEALTHCHECK: its command and how long Docker lets it run before counting it failed. */
function dockerHealthCheck(): { command: string[]; timeoutMs: number } {
  const dockerfile = readFileSync(path.join(ROOT, "Dockerfile"), "utf8");
  const check = /^HEALTHCHECK ([^\n]*?)\\\n\s*CMD (\[.*\])$/m.exec(dockerfile);
  if (!check) throw new Error("no HEALTHCHECK … CMD [...] in the Dockerfile");
  const seconds = /--timeout=(\d+)s/.exec(check[1]!)?.[1];
  if (seconds === undefined) throw new Error("no --timeout=<n>s on the Dockerfile's HEALTHCHECK");
  return { command: JSON.parse(check[2]!) as string[], timeoutMs: Number(seconds) * 1000 };
}

/** Runs the health check as Docker does in the container (the console on 127.0.0.1:PORT): its exit code, or "timed out". */
function runHealthCheck(launcher: LauncherProcess): Promise<number | "timed out"> {
  const { command, timeoutMs } = dockerHealthCheck();
  const [bin, ...args] = command;
  return new Promise((resolve) => {
    const child = spawn(bin === "node" ? process.execPath : bin!, args, { env: { ...process.env, PORT: String(launcher.port) }, stdio: "ignore" });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve("timed out");
    }, timeoutMs);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve(code ?? 1);
    });
  });
}

interface HealthBody {
  status: string;
  nodes: Array<{ id: string; up: boolean }>;
}

describe("the container's health check with a long LOCKSCOPE_NODE_TIMEOUT_MS", () => {
  let cluster: TestCluster;
  let launcher: LauncherProcess;
  beforeAll(async () => {
    cluster = await startCluster(3);
    // The longest node timeout there is: a node that does not answer would keep /api/health waiting a minute.
    launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_NODE_TIMEOUT_MS: "60000" });
  });
  afterAll(async () => {
    await launcher?.stop();
    await cluster?.close();
  });

  it("passes while a node hangs or is down, the console serving, and /api/health names that node not up", async () => {
    expect(await runHealthCheck(launcher)).toBe(0);

    // Hung (SIGSTOP): connected, but no answer.
    cluster.pause(1);
    try {
      expect(await runHealthCheck(launcher)).toBe(0);
      const body = (await (await fetch(`${launcher.baseUrl}/api/health`)).json()) as HealthBody;
      expect(body.nodes.map((n) => [n.id, n.up])).toEqual([["node-0", true], ["node-1", false], ["node-2", true]]);
      expect(body.status).toBe("degraded");
    } finally {
      cluster.resume(1);
    }

    // Down (SIGKILL): the console reconnects meanwhile.
    await cluster.kill(2);
    expect(await runHealthCheck(launcher)).toBe(0);
    const body = (await (await fetch(`${launcher.baseUrl}/api/health`)).json()) as HealthBody;
    expect(body.nodes.find((n) => n.id === "node-2")?.up).toBe(false);
  });
});
