import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestCluster } from "../support/redis";
import { OPERATOR_TOKEN, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import { startLauncher, type LauncherProcess } from "../support/launcher";

/**
 * User mistakes answered by the real production server. The long-lived objects (the lock patterns, the live
 * hub, the audit log) are made once per process by whichever bundle asks first (`instrumentation.ts` at start),
 * while each route is a bundle of its own with its own copy of every error class: an error such an object
 * throws has to be recognised by the route all the same, or the user's mistake comes back as a 500.
 */
describe("the production server's answers to mistakes refused by its long-lived objects", () => {
  let cluster: TestCluster;
  let launcher: LauncherProcess;
  const bearer = { authorization: `Bearer ${OPERATOR_TOKEN}` };

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    launcher = await startLauncher({
      REDIS_URLS: cluster.urls.join(","),
      LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN,
      LOCKSCOPE_VIEWER_TOKEN: VIEWER_TOKEN,
      LOCKSCOPE_MAX_STREAMS_PER_ADDRESS: "2",
    });
  }, 240_000);
  afterAll(async () => {
    await launcher?.stop("SIGTERM");
    await tearDownConsole(cluster);
  });

  const putPatterns = (patterns: unknown[]) =>
    fetch(`${launcher.baseUrl}/api/patterns`, {
      method: "PUT",
      headers: { ...bearer, "content-type": "application/json" },
      body: JSON.stringify({ patterns, reason: "tidy the patterns" }),
    }).then(async (res) => ({ status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } }));

  it("refuses a lock-pattern list the pattern store finds wrong with 422 and its reason, and keeps the patterns", async () => {
    const before = (await (await fetch(`${launcher.baseUrl}/api/patterns`, { headers: bearer })).json()) as unknown;
    for (const [patterns, message] of [
      [[{ glob: "lock:*" }, { glob: "lock:*" }], /listed twice/],
      [[{ glob: "*" }], /console's own keys|lockscope/i],
    ] as const) {
      const res = await putPatterns([...patterns]);
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      expect(res.body.error?.code).toBe("unprocessable");
      expect(res.body.error?.message).toMatch(message);
    }
    expect(await (await fetch(`${launcher.baseUrl}/api/patterns`, { headers: bearer })).json()).toEqual(before);
  });

  it("refuses a live stream beyond the limit per address with 429 and Retry-After", async () => {
    const open: http.IncomingMessage[] = [];
    const stream = () =>
      new Promise<http.IncomingMessage>((resolve, reject) => {
        const req = http.get({ host: "127.0.0.1", port: launcher.port, path: "/api/locks/stream?locks=none", headers: { authorization: `Bearer ${VIEWER_TOKEN}` } }, resolve);
        req.on("error", reject);
      });
    try {
      for (let i = 0; i < 2; i++) {
        const res = await stream();
        open.push(res);
        expect(res.statusCode).toBe(200);
      }
      const refused = await stream();
      open.push(refused);
      expect(refused.statusCode).toBe(429);
      expect(refused.headers["retry-after"]).toBe("10");
      const body = await new Promise<string>((resolve) => {
        let text = "";
        refused.on("data", (c: Buffer) => (text += c.toString()));
        refused.on("end", () => resolve(text));
      });
      const error = (JSON.parse(body) as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("rate_limited");
      expect(error.message).toContain("Too many live streams from this address");
    } finally {
      for (const res of open) res.destroy();
    }
  });

  it("refuses a lock-pattern change the audit log cannot record with 503 and says why, and keeps the patterns", async () => {
    const before = (await (await fetch(`${launcher.baseUrl}/api/patterns`, { headers: bearer })).json()) as unknown;
    // Every node answers (the change's lease is granted), but two refuse the audit stream's writes.
    for (const i of [1, 2]) await cluster.client(i).call("ACL", "SETUSER", "default", "-xadd");
    try {
      const res = await putPatterns([{ glob: "lock:*" }, { glob: "jobs:*" }]);
      expect(res.status, JSON.stringify(res.body)).toBe(503);
      expect(res.body.error?.code).toBe("unavailable");
      expect(res.body.error?.message).toMatch(/^The audit log cannot record this change, so the patterns were not changed: the audit stream reached 1 of the 2 nodes it needs/);
      expect(res.body.error?.message).not.toMatch(/release|deleted/);
    } finally {
      for (const i of [1, 2]) await cluster.client(i).call("ACL", "SETUSER", "default", "+xadd");
    }
    expect(await (await fetch(`${launcher.baseUrl}/api/patterns`, { headers: bearer })).json()).toEqual(before);
  });

  it("refuses a lock-pattern change while most lock nodes do not answer with 503 and says why, and keeps the patterns", async () => {
    const before = (await (await fetch(`${launcher.baseUrl}/api/patterns`, { headers: bearer })).json()) as unknown;
    await cluster.kill(1);
    await cluster.kill(2);
    const res = await putPatterns([{ glob: "lock:*" }, { glob: "jobs:*" }]);
    expect(res.status, JSON.stringify(res.body)).toBe(503);
    expect(res.body.error?.code).toBe("unavailable");
    expect(res.body.error?.message).toBe("The lock patterns are changed only while most lock nodes answer, so that two consoles never change them at once (node-1, node-2 did not answer in time); nothing changed.");
    expect(await (await fetch(`${launcher.baseUrl}/api/patterns`, { headers: bearer })).json()).toEqual(before);
  });
});
