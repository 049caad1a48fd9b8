import type Redis from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import { call, OPERATOR_TOKEN, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";

/**
 * The console's own event loop held up (a GC pause, a cold first request, a long synchronous task) longer than the
 * node timeout, right after it asked the nodes: every node answered at once, and its reply waited, unread, in the
 * socket. A node that answered in time is not one that did not answer: the release goes through, and is audited.
 * A node that truly does not answer is still judged late.
 */
describe("a force release while the console's event loop stalls", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let release: typeof ReleaseModule;
  let audit: typeof AuditModule;
  /** The command after whose sending to every node the loop stalls next (once), and for how long. */
  let stallAfter: { command: string; ms: number; nodesLeft: number } | null = null;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
    clients = cluster.clients();
    release = await import("@/app/api/locks/[resource]/release/route");
    audit = await import("@/app/api/audit/route");
    const { getNodes } = await import("@/server/nodes");
    const { whenReady } = await import("@/server/health");
    for (const node of getNodes()) {
      const connection = node.client as Redis;
      await whenReady(connection, 10_000);
      const send = connection.sendCommand.bind(connection);
      connection.sendCommand = (command, stream) => {
        const sent = send(command, stream);
        const stall = stallAfter;
        if (stall && command.name === stall.command && --stall.nodesLeft === 0) {
          stallAfter = null;
          // Once it went out to every node (each connection sends its own batch): busy, nothing else runs.
          process.nextTick(() => {
            const until = performance.now() + stall.ms;
            while (performance.now() < until) {
              // a stop-the-world pause
            }
          });
        }
        return sent;
      };
    }
    // A first release loads the console's scripts on the nodes: a stall below holds up one round trip.
    await clients[0]!.set("lock:stall/warm-up", "warm", "PX", 600_000);
    expect((await forceRelease("lock:stall/warm-up", "warm")).status).toBe(200);
  });

  afterEach(() => {
    stallAfter = null;
    for (const i of [0, 1, 2]) if (cluster.paused(i)) cluster.resume(i);
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  function forceRelease(resource: string, token: string) {
    return call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
      token: OPERATOR_TOKEN,
      params: { resource },
      body: { reason: "holder crashed", token },
      headers: { "x-lockscope-actor": "olivia" },
    });
  }

  async function auditEntry(id: string) {
    const listed = (await call(audit.GET, "GET", "/api/audit", { token: VIEWER_TOKEN })).body as {
      entries: Array<{ id: string; outcome: string; nodes: Array<{ id: string; result: string }> }>;
    };
    return listed.entries.find((e) => e.id === id);
  }

  it.each([
    ["reading the lock on every node", "evalsha"],
    ["writing the audit intent on every node", "xadd"],
  ])("releases and audits the lock when the stall comes right after %s", async (_, command) => {
    const resource = `lock:stall/${command}`;
    await Promise.all(clients.map((c) => c.set(resource, "stuck-holder", "PX", 600_000)));
    stallAfter = { command, ms: 1_000, nodesLeft: 3 };
    const res = await forceRelease(resource, "stuck-holder");
    expect(stallAfter, "the stall happened").toBeNull();
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ outcome: "released", nodes: [{ result: "deleted" }, { result: "deleted" }, { result: "deleted" }] });
    for (const client of clients) expect(await client.exists(resource)).toBe(0);
    const entry = await auditEntry((res.body as { auditId: string }).auditId);
    expect(entry).toMatchObject({ outcome: "released", nodes: [{ result: "deleted" }, { result: "deleted" }, { result: "deleted" }] });
  });

  it("counts each node's delete that came in time when the stall comes right after the release script", async () => {
    // (The format's own result per node, before the console reads again a node that did not answer.)
    const { formatByName } = await import("@/lib/locks/formats");
    const { getNodes } = await import("@/server/nodes");
    const resource = "lock:stall/release-script";
    await Promise.all(clients.map((c) => c.set(resource, "stuck-holder", "PX", 600_000)));
    stallAfter = { command: "evalsha", ms: 1_000, nodesLeft: 3 };
    const result = await formatByName("token").release!(
      getNodes().map((n) => n.client),
      resource,
      "stuck-holder",
      { nodeTimeoutMs: 600 },
    );
    expect(stallAfter, "the stall happened").toBeNull();
    expect(result.nodes.map((n) => (n.result === "error" ? n.error : n.result))).toEqual(["deleted", "deleted", "deleted"]);
  });

  it("still judges a node that does not answer late, and releases on the others", async () => {
    const resource = "lock:stall/frozen-node";
    await Promise.all(clients.map((c) => c.set(resource, "stuck-holder", "PX", 600_000)));
    cluster.pause(2);
    const res = await forceRelease(resource, "stuck-holder");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((res.body as { nodes: Array<{ result: string }> }).nodes.map((n) => n.result)).toEqual(["deleted", "deleted", "error"]);
    cluster.resume(2);
    const entry = await auditEntry((res.body as { auditId: string }).auditId);
    expect(entry?.outcome).toBe("released");
    expect(entry?.nodes.map((n) => n.result)).toEqual(["deleted", "deleted", "error"]);
  });
});
