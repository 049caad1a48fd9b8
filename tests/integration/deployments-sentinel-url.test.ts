import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { startSentinel } from "../support/sentinel";
import { until } from "../support/wait";

type HealthBody = { status: string; nodes: Array<{ id: string; up: boolean; sentinelNode?: true }> };

/**
 * REDIS_URL naming a sentinel (the address an operator is given for "Redis" where Sentinel runs): a sentinel answers
 * PING but holds no key and runs no lock command, so no lock can be seen, taken or released there. The console must
 * say the node is no lock node, not report it up.
 */
describe("a standalone deployment whose URL names a sentinel", () => {
  let nodes: TestCluster;
  let dir: string;
  let sentinel: ChildProcess | null = null;

  beforeAll(async () => {
    nodes = await setUpConsole({ nodes: 1, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "500" } });
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-sentinel-url-"));
    const started = await startSentinel(dir, "locks", nodes.ports[0]!);
    sentinel = started.child;
    delete process.env.REDIS_URLS;
    process.env.REDIS_URL = `redis://127.0.0.1:${started.port}`;
  }, 60_000);
  afterAll(async () => {
    await tearDownConsole(nodes);
    if (sentinel && sentinel.exitCode === null && sentinel.signalCode === null) {
      const exited = new Promise((resolve) => sentinel!.once("exit", resolve));
      sentinel.kill("SIGKILL");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it("is not up in the health nor ready, and the node is marked as a sentinel", async () => {
    const { startLive } = await import("@/server/live");
    startLive();
    const health = await import("@/app/api/health/route");
    const ready = await import("@/app/api/ready/route");
    const body = await until("the node read", async () => {
      const b = (await call(health.GET, "GET", "/api/health", { token: null })).body as HealthBody;
      return b.nodes[0]?.sentinelNode ? b : null;
    }, 20_000);
    expect(body.nodes[0]!.up).toBe(false);
    expect(body.status).toBe("down");
    expect((await call(ready.GET, "GET", "/api/ready")).status).toBe(503);
  });
});
