import { spawn, type ChildProcess } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, it } from "vitest";
import { freePort } from "../../lib/redlock/test/support/redis";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { makeCertificates, type TestCertificates } from "../support/tls";
import { until } from "../support/wait";

const SERVER_NAME = "redis.lockscope.test";
type HealthBody = { nodes: Array<{ up: boolean }> };

/**
 * The TLS files renewed in place (a new CA, server and client certificates, as cert-manager or an operator's rotation
 * writes them) and the server restarted with the new ones: the console's connection reconnects, and must do so with
 * the files as they are now, not with the ones it read when it started.
 */
describe("a standalone instance over TLS whose certificates are rotated", () => {
  let unused: TestCluster;
  let before: TestCertificates;
  let after: TestCertificates;
  let live: string;
  let port: number;
  let server: ChildProcess | null = null;

  const startServer = (certs: TestCertificates) => {
    server = spawn(
      "redis-server",
      ["--port", "0", "--tls-port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--tls-cert-file", certs.serverCert, "--tls-key-file", certs.serverKey, "--tls-ca-cert-file", certs.caFile, "--tls-auth-clients", "yes"],
      { stdio: "ignore" },
    );
  };
  const stopServer = async () => {
    const child = server;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  };
  const install = (certs: TestCertificates) => {
    copyFileSync(certs.caFile, path.join(live, "ca.pem"));
    copyFileSync(certs.clientCert, path.join(live, "client.pem"));
    copyFileSync(certs.clientKey, path.join(live, "client.key"));
  };

  beforeAll(async () => {
    before = makeCertificates(SERVER_NAME);
    after = makeCertificates(SERVER_NAME);
    live = mkdtempSync(path.join(os.tmpdir(), "lockscope-tls-live-"));
    install(before);
    port = await freePort();
    startServer(before);
    unused = await setUpConsole({ nodes: 0, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "500" } });
    delete process.env.REDIS_URLS;
    Object.assign(process.env, {
      REDIS_URL: `rediss://127.0.0.1:${port}`,
      REDIS_TLS_CA_FILE: path.join(live, "ca.pem"),
      REDIS_TLS_CERT_FILE: path.join(live, "client.pem"),
      REDIS_TLS_KEY_FILE: path.join(live, "client.key"),
      REDIS_TLS_SERVERNAME: SERVER_NAME,
    });
  }, 60_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await stopServer();
    for (const dir of [live, before?.dir, after?.dir]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("reconnects with the renewed files once the server comes back with its new certificate", async () => {
    const health = await import("@/app/api/health/route");
    const up = async () => ((await call(health.GET, "GET", "/api/health", { token: null })).body as HealthBody).nodes[0]?.up === true;
    await until("the node up over TLS", up, 20_000);

    install(after);
    await stopServer();
    startServer(after);
    await until("the node up again, reached with the renewed files", up, 30_000);
  }, 90_000);
});
