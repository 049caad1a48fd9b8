import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HealthModule from "@/app/api/health/route";
import { call, listedLocks, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A TCP proxy in front of the node that can go silent on chosen connections, as a NAT gateway, a firewall or a load
 * balancer does when it forgets an idle flow: no byte passes either way any more, and neither end is told (no FIN,
 * no RST). Every other connection carries on.
 */
async function startProxy(targetPort: number): Promise<{ port: number; silence(sentText: string): number; close(): Promise<void> }> {
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket; sent: string; silent: boolean }>();
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, "127.0.0.1");
    const pair = { client, upstream, sent: "", silent: false };
    pairs.add(pair);
    const cut = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on("error", cut);
      s.on("close", cut);
    }
    client.on("data", (chunk: Buffer) => {
      if (pair.sent.length < 4_096) pair.sent += chunk.toString("latin1");
      if (!pair.silent) upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (!pair.silent) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    silence(sentText) {
      let n = 0;
      for (const pair of pairs) {
        if (!pair.sent.includes(sentText)) continue;
        pair.silent = true;
        n += 1;
      }
      return n;
    },
    close: () => {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

interface NodeHealth {
  id: string;
  watcher: { up: boolean; reconnects: number; gaps: number };
}

describe("a node whose subscriber connection goes silent while its command connection stays", () => {
  let cluster: TestCluster;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let health: typeof HealthModule;

  const nodeHealth = async () => ((await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: NodeHealth[] }).nodes[0]!;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    proxy = await startProxy(cluster.ports[0]!);
    process.env.REDIS_URLS = `redis://127.0.0.1:${proxy.port}`;
    health = await import("@/app/api/health/route");
    await startLiveReconciled();
  });

  afterAll(async () => {
    // (The proxy first: a connection it keeps silent would hold the shutdown's QUIT.)
    await proxy?.close();
    await tearDownConsole(cluster);
  });

  it("notices, reconnects it, and shows what changed meanwhile: a lock released and a lock taken", async () => {
    const node = cluster.client(0);
    await node.set("lock:before", "before-token", "PX", 300_000);
    await until("the lock held", async () => (await listedLocks()).find((l) => l.resource === "lock:before")?.state === "held");
    const before = await nodeHealth();

    // Only the watcher's subscriber (its connection name, as CLIENT SETNAME sent it); the command connections go on.
    expect(proxy.silence("\r\nlockscope:watcher\r\n")).toBe(1);
    await node.del("lock:before");
    await node.set("lock:after", "after-token", "PX", 300_000);

    const shown = await until(
      "the changes made while the subscriber was silent shown",
      async () => {
        const locks = await listedLocks();
        const after = locks.find((l) => l.resource === "lock:after");
        const gone = locks.find((l) => l.resource === "lock:before");
        return after?.state === "held" && (gone === undefined || gone.state === "released") ? { after, gone } : null;
      },
      45_000,
      250,
    );
    expect(shown.after.token).toBe("after-token");
    const back = await until("the watcher up again", async () => {
      const h = await nodeHealth();
      return h.watcher.up ? h : null;
    });
    // Said as a gap in what the console heard, not passed over.
    expect(back.watcher.gaps).toBeGreaterThan(before.watcher.gaps);
    expect(back.watcher.reconnects).toBeGreaterThan(before.watcher.reconnects);

    // Heard by notification again: a lock taken now shows without waiting on anything else.
    await node.set("lock:later", "later-token", "PX", 300_000);
    await until("a later lock shown", async () => (await listedLocks()).find((l) => l.resource === "lock:later")?.state === "held");
  });

  it("leaves the connections of a node that answers on neither alone (frozen past the subscriber's limit)", async () => {
    const node = cluster.client(0);
    const before = await until("the watcher up", async () => {
      const h = await nodeHealth();
      return h.watcher.up ? h : null;
    });
    cluster.pause(0);
    try {
      await new Promise((resolve) => setTimeout(resolve, 16_000));
    } finally {
      cluster.resume(0);
    }
    await node.set("lock:thawed", "thawed-token", "PX", 300_000);
    await until("a lock taken after the thaw shown", async () => (await listedLocks()).find((l) => l.resource === "lock:thawed")?.state === "held");
    // Wait out one more round of the subscriber's check: still the same connection, with no gap.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    const after = await nodeHealth();
    expect(after.watcher).toMatchObject({ up: true, reconnects: before.watcher.reconnects, gaps: before.watcher.gaps });
  });
});
