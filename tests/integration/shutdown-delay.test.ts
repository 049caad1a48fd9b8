import { spawn } from "node:child_process";
import http from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "@/lib/redis-node";
import { startLauncher } from "../support/launcher";
import { PROD_NODE_ARGS } from "../support/production";
import { startCluster, type TestCluster } from "../support/redis";
import { until, within } from "../support/wait";

const ROOT = path.resolve(import.meta.dirname, "../..");
const OPERATOR_TOKEN = "it-delay-operator-token-0123456789";
const RESOURCE = "lock:rolling/1";

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * One request on a connection of its own, as a load balancer that has not yet heard of the shutdown opens one;
 * rejects when the connection is refused.
 */
function request(port: number, pathname: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port, path: pathname, agent: false, headers }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("error", reject);
  });
}

describe("the shutdown delay: not ready but still serving after SIGTERM, for rolling updates behind a load balancer", () => {
  let cluster: TestCluster;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-delay-"));

  beforeAll(async () => {
    cluster = await startCluster(3);
    for (let i = 0; i < 3; i++) await cluster.client(i).set(RESOURCE, "holder-a", "PX", 120_000);
  }, 120_000);
  afterAll(async () => {
    await cluster?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("the production start answers a request on a new connection while /api/ready is already 503, then stops on a second signal and exits 0", async () => {
    const port = await freePort();
    // `npm run start:prod`: the compiled launcher with Node.js's production flags.
    const child = spawn(process.execPath, [...PROD_NODE_ARGS, path.join(ROOT, "dist", "start.mjs")], {
      cwd: ROOT,
      env: {
        PATH: "/usr/bin:/bin",
        NODE_ENV: "production",
        HOST: "127.0.0.1",
        PORT: String(port),
        LOG_LEVEL: "warn",
        REDIS_URLS: cluster.urls.join(","),
        LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN,
        LOCKSCOPE_DATA_DIR: dataDir,
        // Far longer than the test needs: the second signal below ends it.
        LOCKSCOPE_SHUTDOWN_DELAY_MS: "60000",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (out += c.toString()));
    const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")));
    try {
      await until(
        "the console is ready",
        async () => {
          if (child.exitCode !== null) throw new Error(`the console exited:\n${out}`);
          return out.includes("console ready at http://") && (await request(port, "/api/ready").then((r) => r.status === 200, () => false));
        },
        90_000,
        200,
      );

      child.kill("SIGTERM");
      const notReady = await until(
        "/api/ready answers 503 after SIGTERM",
        async () => {
          const answer = await request(port, "/api/ready").catch((error: Error) => {
            throw new Error(`a new connection was refused after SIGTERM (${error.message}):\n${out}`);
          });
          return answer.status === 503 ? answer : null;
        },
        20_000,
        50,
      );
      expect(JSON.parse(notReady.body)).toMatchObject({ error: { code: "unavailable", message: "The console is shutting down." } });

      // A request the load balancer still sends here, on a new connection: answered in full.
      const locks = await request(port, `/api/locks/${encodeURIComponent(RESOURCE)}`, { authorization: `Bearer ${OPERATOR_TOKEN}` });
      expect(locks.status).toBe(200);
      expect(JSON.parse(locks.body)).toMatchObject({ resource: RESOURCE, state: "held", token: "holder-a" });
      // …and the client is told to open its next connection afresh, to a console that stays.
      expect(locks.headers.connection).toBe("close");
      expect((await request(port, "/api/ready")).status).toBe(503);
      expect(out).toMatch(/SIGTERM received, shutting down in 60000 ms/);

      // A second signal ends the delay: the console shuts down as it would have after it.
      child.kill("SIGINT");
      expect(await within("the console exits after the second signal", exited, 30_000)).toBe(0);
      expect(out).toMatch(/lockscope: stopped in \d+ ms\.\n$/);
      expect(out).not.toMatch(/did not finish|took too long|still running after the drain/);
      await expect(request(port, "/api/health")).rejects.toThrow();
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  }, 180_000);

  it("Ctrl-C (SIGINT) stops at once, without the delay", async () => {
    const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN, LOCKSCOPE_SHUTDOWN_DELAY_MS: "60000" });
    try {
      expect(await within("the console exits on SIGINT", launcher.stop("SIGINT"), 30_000)).toBe(0);
      expect(launcher.output()).toContain("lockscope: SIGINT received, shutting down…");
      expect(launcher.output()).not.toContain("shutting down in");
    } finally {
      await launcher.stop("SIGKILL");
    }
  }, 180_000);
});
