import Redis from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type * as HealthModule from "@/server/health";
import type * as NodesModule from "@/server/nodes";
import { setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";

/**
 * A node connection coming up (the console's start, a reconnect) while the console's own event loop stalls (a GC
 * pause, a cold first request) past the node timeout: the node answered the connection's handshake in time, and
 * its reply waited, unread, in the socket. What waits for the connection (a force release, an audit write, the
 * health check) finds it up; a node that does not answer the handshake is still found down.
 */
describe("waiting for a node's connection while the console's event loop stalls", () => {
  let cluster: TestCluster;
  let health: typeof HealthModule;
  let nodes: typeof NodesModule;
  const opened: Redis[] = [];

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    health = await import("@/server/health");
    nodes = await import("@/server/nodes");
  });

  afterEach(() => {
    for (const client of opened.splice(0)) client.disconnect();
    if (cluster.paused(0)) cluster.resume(0);
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  /** A console connection to the node, not connected yet; with `stallMs`, the loop stalls right after its handshake's INFO went out. */
  function connection(stallMs: number | null): Redis {
    const client = new Redis(cluster.ports[0]!, "127.0.0.1", { ...nodes.nodeClientOptions(300), lazyConnect: true });
    client.on("error", () => {
      // A node stopped on purpose: the wait tells.
    });
    opened.push(client);
    // (As the console's own connection times its commands.)
    nodes.timeCommands(client);
    const send = client.sendCommand.bind(client);
    client.sendCommand = (command, stream) => {
      const sent = send(command, stream);
      if (stallMs !== null && command.name === "info") {
        process.nextTick(() => {
          const until = performance.now() + stallMs;
          while (performance.now() < until) {
            // a stop-the-world pause
          }
        });
      }
      return sent;
    };
    return client;
  }

  it("finds a node that answered in time up", async () => {
    const client = connection(1_000);
    const ready = health.whenReady(client, 300);
    client.connect().catch(() => undefined);
    expect(await ready).toBe(true);
  });

  it("finds a node that does not answer down", async () => {
    cluster.pause(0);
    const client = connection(null);
    const ready = health.whenReady(client, 300);
    client.connect().catch(() => undefined);
    expect(await ready).toBe(false);
  });
});
