import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

const OPERATOR_TOKEN = "it-drain-operator-token-0123456789";

/** A raw HTTP/1.1 connection, so a request can be left half-sent across the SIGTERM. */
function connect(port: number): Promise<{ socket: net.Socket; received: () => string; closed: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    let received = "";
    socket.on("data", (c: Buffer) => (received += c.toString()));
    const closed = new Promise<void>((r) => socket.once("close", () => r()));
    socket.once("error", reject);
    socket.once("connect", () => resolve({ socket, received: () => received, closed }));
  });
}

describe("shutdown drains the requests in flight", () => {
  let cluster: TestCluster;
  let launcher: LauncherProcess;

  beforeAll(async () => {
    cluster = await startCluster(3);
    launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN, LOG_LEVEL: "warn" });
  }, 300_000);
  afterAll(async () => {
    await launcher?.stop("SIGKILL");
    await cluster?.close();
  });

  it("answers a request that was in flight at SIGTERM, refuses new connections, and exits 0", async () => {
    const body = JSON.stringify({ token: OPERATOR_TOKEN, name: "late" });
    const conn = await connect(launcher.port);
    // Headers now, the body after the signal: the request is in flight the whole time.
    conn.socket.write(
      [
        "POST /api/session HTTP/1.1",
        `Host: 127.0.0.1:${launcher.port}`,
        `Origin: ${launcher.baseUrl}`,
        "Content-Type: application/json",
        `Content-Length: ${Buffer.byteLength(body)}`,
        "",
        "",
      ].join("\r\n"),
    );
    // The launcher counts it once its headers are parsed; readiness answering on another connection
    // shows the server has read them (requests on one process are handled in arrival order).
    await until("the console still serves", async () => (await fetch(`${launcher.baseUrl}/api/health`)).text().then(() => true), 10_000, 50);
    launcher.child.kill("SIGTERM");
    await until("the launcher drains the requests in flight", () => /draining \d+ in-flight request\(s\)/.test(launcher.output()), 15_000, 50).catch((error: Error) => {
      throw new Error(`${error.message}\n${launcher.output()}`);
    });
    await expect(fetch(`${launcher.baseUrl}/api/health`)).rejects.toThrow();
    conn.socket.write(body);
    await conn.closed;
    expect(conn.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(conn.received()).toMatch(/connection: close/i);
    expect(conn.received()).toContain('"role":"operator"');
    expect(await launcher.exited).toBe(0);
    expect(launcher.output()).not.toMatch(/still running after the drain|took too long/);
  }, 60_000);
});
