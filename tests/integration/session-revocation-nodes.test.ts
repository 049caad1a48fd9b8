import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LockNode } from "@/server/nodes";
import type * as RevocationModule from "@/server/session-revocation";
import { startCluster, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * Two consoles over the same lock nodes, each with its own list of signed-out sessions (as two processes
 * have), reaching the nodes through connections made as the console makes them.
 */
describe("a sign-out reaches the other consoles over the same nodes, whatever happened to the nodes", () => {
  let cluster: TestCluster;
  let revocations: typeof RevocationModule;
  const opened: Redis[] = [];

  function consoleNodes(nodeClientOptions: (timeoutMs: number) => object): LockNode[] {
    return cluster.nodes.map((node, index) => {
      const client = new Redis(node.port, "127.0.0.1", nodeClientOptions(500));
      client.on("error", () => undefined);
      opened.push(client);
      return { id: `node-${index}`, index, url: node.url, maskedUrl: node.url, deployment: "default", connect: () => client, client };
    });
  }

  beforeAll(async () => {
    cluster = await startCluster(1);
    revocations = await import("@/server/session-revocation");
  });
  afterAll(async () => {
    for (const client of opened) client.disconnect();
    await cluster.close();
  });

  it("signed out while the nodes were down, or on nodes that restarted empty since: refused by the other console once they are back", async () => {
    const { nodeClientOptions } = await import("@/server/nodes");
    const aNodes = consoleNodes(nodeClientOptions);
    const bNodes = consoleNodes(nodeClientOptions);
    const a = new revocations.SessionRevocations(() => aNodes, 500);
    const b = new revocations.SessionRevocations(() => bNodes, 500);
    const expires = Date.now() + 12 * 3_600_000;
    await until("both consoles reach the node", () => aNodes[0]!.client.status === "ready" && bNodes[0]!.client.status === "ready");
    expect(await b.isRevoked("sessionAAAAAAAAAAAAAAA")).toBe(false);

    // Signed out on console A while its only node is down: no node records it.
    await cluster.kill(0);
    expect(await a.revoke("sessionAAAAAAAAAAAAAAA", expires)).toMatchObject({ nodes: 0 });
    await cluster.restart(0);
    await until("console B refuses the session signed out while the node was down", () => b.isRevoked("sessionAAAAAAAAAAAAAAA"), 20_000);

    // Signed out on A with the node up; then the node restarts and comes back empty.
    expect(await a.revoke("sessionBBBBBBBBBBBBBBB", expires)).toMatchObject({ nodes: 1 });
    await cluster.kill(0);
    await cluster.restart(0);
    await until("console B refuses the session signed out before the node restarted empty", () => b.isRevoked("sessionBBBBBBBBBBBBBBB"), 20_000);
  });
});
