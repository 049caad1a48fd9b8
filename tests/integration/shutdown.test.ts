import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redisServerPids, startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

const OPERATOR_TOKEN = "it-shutdown-operator-token-0123456789";

/** Opens the live stream and collects its text until the server ends it. */
async function openStream(baseUrl: string): Promise<{ text: () => string; ended: Promise<void> }> {
  const res = await fetch(`${baseUrl}/api/locks/stream`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const ended = (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        text += decoder.decode(value, { stream: true });
      }
    } catch {
      // The connection closing under us also ends the stream; what it sent before is in `text`.
    }
  })();
  return { text: () => text, ended };
}

describe("graceful shutdown of the real launcher (SIGTERM)", () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), "lockscope-shutdown-"));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  describe("with embedded nodes", () => {
    let launcher: LauncherProcess;
    const auditFile = path.join(tmp, "audit.jsonl");

    beforeAll(async () => {
      launcher = await startLauncher({ REDIS_URLS: "", LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN, AUDIT_FILE: auditFile });
    }, 300_000);
    afterAll(async () => {
      await launcher?.stop("SIGKILL");
    });

    it("ends the live stream with a final event, keeps the audit log, stops its nodes and exits 0", async () => {
      const health = (await (await fetch(`${launcher.baseUrl}/api/health`)).json()) as { nodes: Array<{ url: string }> };
      const ports = health.nodes.map((n) => Number(new URL(n.url).port));
      expect(ports).toHaveLength(3);

      // A lock on every node, force-released through the console: the audit log must survive the shutdown.
      const clients = ports.map((port) => new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1 }));
      try {
        await Promise.all(clients.map((c) => c.set("lock:shutdown/1", "someone-else", "PX", 60_000)));
      } finally {
        for (const c of clients) c.disconnect();
      }
      await until("the console is ready", async () => (await fetch(`${launcher.baseUrl}/api/ready`)).status === 200, 30_000, 100);
      const release = await fetch(`${launcher.baseUrl}/api/locks/${encodeURIComponent("lock:shutdown/1")}/release`, {
        method: "POST",
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ reason: "shutdown test" }),
      });
      expect(release.status).toBe(200);
      const { auditId } = (await release.json()) as { auditId: string };

      const stream = await openStream(launcher.baseUrl);
      await until("the stream's snapshot", () => stream.text().includes("event: snapshot"), 30_000, 100);

      const code = await launcher.stop("SIGTERM");
      await stream.ended;
      // Exit 0 means every step finished inside the launcher's budget (it exits 1 when it has to cut one short).
      expect(code).toBe(0);
      // What the shutdown said of its own steps, from the signal on (a node slow to answer on a loaded machine
      // before it may log a warning of its own, which is not the shutdown's).
      const output = launcher.output();
      const shutdown = output.slice(output.indexOf("SIGTERM received"));
      expect(shutdown).toMatch(/^SIGTERM received, shutting down…\n[\s\S]*lockscope: stopped in \d+ ms\.\n$/);
      expect(shutdown).not.toMatch(/shutdown step .* (did not finish|failed)|took too long|still running after the drain/);
      expect(stream.text()).toMatch(/event: end\ndata: \{"reason":"shutdown"\}\n\n$/);
      for (const port of ports) expect(redisServerPids(`:${port}`)).toEqual([]);
      const audit = readFileSync(auditFile, "utf8");
      expect(audit).toContain(auditId);
      expect(audit).toContain("shutdown test");
    });
  });

  it("stops its embedded nodes when the signal comes while it is still starting", async () => {
    const launcher = await startLauncher({ REDIS_URLS: "" }, { waitReady: false });
    try {
      await until("the embedded nodes are up", () => /embedded lock nodes on [\d, ]+\n/.test(launcher.output()), 30_000, 100);
      const ports = /embedded lock nodes on ([\d, ]+)\n/.exec(launcher.output())![1]!.split(", ");
      expect(ports).toHaveLength(3);
      expect(await launcher.stop("SIGTERM")).toBe(0);
      for (const port of ports) expect(redisServerPids(`:${port}`)).toEqual([]);
    } finally {
      await launcher.stop("SIGKILL");
    }
  });

  describe("with REDIS_URLS and a lab run in flight", () => {
    let cluster: TestCluster;
    let launcher: LauncherProcess;

    beforeAll(async () => {
      cluster = await startCluster(3);
      launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN });
    }, 300_000);
    afterAll(async () => {
      await launcher?.stop("SIGKILL");
      await cluster?.close();
    });

    it("stops the run (recorded as cancelled), leaves the nodes it did not start running and exits 0", async () => {
      const start = await fetch(`${launcher.baseUrl}/api/demo/runs`, {
        method: "POST",
        headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, "content-type": "application/json" },
        // Far more stock than can sell before the SIGTERM below.
        body: JSON.stringify({ strategy: "redlock", stock: 100_000, workers: 4, ttlMs: 2_000, workMs: 20 }),
      });
      expect(start.status).toBe(202);
      const { id } = (await start.json()) as { id: string };
      await until("the run sells", async () => {
        const run = (await (await fetch(`${launcher.baseUrl}/api/demo/runs/${id}`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } })).json()) as {
          status: string;
          progress?: { sold?: number };
        };
        return run.status === "running" && (run.progress?.sold ?? 0) > 0;
      }, 30_000, 100);

      expect(await launcher.stop("SIGTERM")).toBe(0);
      const record = JSON.parse((await cluster.client(0).get(`lockscope:lab:run:${id}`)) ?? "{}") as { status?: string };
      expect(record.status).toBe("cancelled");
      expect(await cluster.client(1).ping()).toBe("PONG");
    });
  });
});
