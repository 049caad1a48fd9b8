import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startProxy, type TcpProxy } from "../../lib/redlock/test/support/proxy";
import { call, lockDetail, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

type HealthBody = { status: string; quorum: { size: number; up: number; ok: boolean }; nodes: Array<{ id: string; up: boolean; sameServerAs?: string }> };

/**
 * A Redlock set whose URLs differ but two of them reach one server (another name or address for it, a proxy or a
 * load balancer in front of it): that server counts twice towards the quorum. The console must tell, and not
 * report the quorum held when only that server answers.
 */
describe("a Redlock set with two URLs reaching the same server", () => {
  let cluster: TestCluster;
  let proxy: TcpProxy;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 2, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "500" } });
    proxy = await startProxy(cluster.ports[0]!);
    process.env.REDIS_URLS = [cluster.urls[0]!, `redis://127.0.0.1:${proxy.port}`, cluster.urls[1]!].join(",");
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
    await proxy?.close();
  });

  it("marks the second URL as the same server, counted down, so the quorum is lost with the other server", async () => {
    const { startLive } = await import("@/server/live");
    startLive();
    const health = await import("@/app/api/health/route");
    const read = async () => (await call(health.GET, "GET", "/api/health", { token: null })).body as HealthBody;
    const marked = await until("node-1 named the same server as node-0", async () => {
      const b = await read();
      return b.nodes[1]?.sameServerAs === "node-0" ? b : null;
    }, 20_000);
    expect(marked.nodes.map((n) => n.up)).toEqual([true, false, true]);
    // A lock on both servers is held on two nodes of three, not three: the second URL's copy is the first's.
    const [first, other] = cluster.clients();
    await Promise.all([first!, other!].map((c) => c.set("lock:same-server/1", "holder-1", "PX", 120_000)));
    const held = await until("the lock seen on both servers", async () => {
      const d = await lockDetail("lock:same-server/1");
      return d?.state === "held" ? d : null;
    }, 20_000);
    expect(held.quorumHeld).toBe(2);

    await cluster.kill(1);
    const body = await until("the other server seen down", async () => {
      const b = await read();
      return b.nodes[2]?.up === false ? b : null;
    }, 20_000);
    expect(body.quorum).toEqual({ size: 2, up: 1, ok: false });
    expect(body.status).toBe("down");
    // With the other server gone, the one left holds it on one node of the quorum's two: not held by a quorum.
    const left = await until("the lock seen with the other server down", async () => {
      const d = await lockDetail("lock:same-server/1");
      return d?.nodes[2]?.up === false ? d : null;
    }, 20_000);
    expect(left.quorumHeld).toBe(1);
    expect(left.state).not.toBe("held");
  }, 60_000);
});
