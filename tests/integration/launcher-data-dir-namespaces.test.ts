import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCluster, type TestCluster } from "../support/redis";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { until } from "../support/wait";

const ROOT = path.resolve(import.meta.dirname, "../..");

/**
 * Two containers (or pods) that mount the same data folder each run in their own network namespace. The data
 * folder's lock was a socket in the abstract namespace alone, which belongs to a network namespace: the second
 * console never saw the first, and both wrote the same secrets, audit file and patterns file. `unshare --net` starts
 * the second launcher in a network namespace of its own (in a user namespace, so that no privilege is needed), as
 * a container runtime does.
 */
describe("one console per data folder, across network namespaces", () => {
  let cluster: TestCluster;
  let first: LauncherProcess;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-shared-folder-"));

  beforeAll(async () => {
    cluster = await startCluster(1);
    first = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_DATA_DIR: dataDir });
  }, 120_000);
  afterAll(async () => {
    await first?.stop("SIGTERM");
    await cluster?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("refuses a console in another network namespace on the same folder with one line naming the first", async () => {
    const child = spawn("unshare", ["--map-root-user", "--net", process.execPath, "--import", "tsx", path.join(ROOT, "scripts", "start.ts")], {
      cwd: ROOT,
      env: { ...process.env, REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_DATA_DIR: dataDir, HOST: "127.0.0.1", PORT: "3000", LOG_LEVEL: "warn", NODE_ENV: "production" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (out += c.toString()));
    try {
      const code = await until("the second launcher stops", () => child.exitCode, 60_000);
      expect(code).toBe(1);
      const lines = out.trim().split("\n");
      expect(lines, out).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^lockscope: the data folder .* is in use by another console \\(pid ${first.child.pid}, `));
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
    expect((await fetch(`${first.baseUrl}/api/health`)).status).toBe(200);
  }, 120_000);
});
