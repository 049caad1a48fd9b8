import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole } from "../support/console";

/**
 * A force release runs a script on every node (compare-and-delete, fence advance, revocation in one step). Where the
 * nodes refuse scripts (EVAL and EVALSHA renamed away, as some managed services do, or not granted to the console's
 * Redis user), it cannot be done: the answer says why, not that no node answered, and nothing is touched.
 */
describe("force release on nodes that refuse scripts", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, extraArgs: ["--rename-command", "EVAL", "", "--rename-command", "EVALSHA", ""] });
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("is refused with a 422 that names the nodes and what they refuse, and touches nothing", async () => {
    for (const client of cluster.clients()) await client.set("lock:scriptless", "holder-1", "PX", 60_000);
    const release = await import("@/app/api/locks/[resource]/release/route");
    const res = await call(release.POST, "POST", "/api/locks/lock%3Ascriptless/release", { body: { reason: "stuck holder" }, params: { resource: "lock:scriptless" } });
    expect(res.status, JSON.stringify(res.body)).toBe(422);
    const body = res.body as { error: { message: string; details?: { scriptsRefused?: string[] } } };
    expect(body.error.message).toMatch(/^node-0, node-1, node-2 refuse scripts/);
    expect(body.error.message).toMatch(/nothing was touched/);
    expect(body.error.details?.scriptsRefused).toEqual(["node-0", "node-1", "node-2"]);
    for (const client of cluster.clients()) expect(await client.get("lock:scriptless")).toBe("holder-1");
  });
});
