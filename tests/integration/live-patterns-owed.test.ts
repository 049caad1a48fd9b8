import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as PatternsRoute from "@/app/api/patterns/route";
import type * as LiveModule from "@/server/live";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A pattern change that a node cannot take at once (it does not answer, or a reconcile is already reading it
 * with the patterns before the change): the reconcile it owes runs once it can, so the new patterns' locks are
 * read on every node, not only on those that answered then.
 */
describe("a pattern change a node could not take at once", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let live: typeof LiveModule;
  let patterns: typeof PatternsRoute;
  const put = (globs: string[]) => call(patterns.PUT, "PUT", "/api/patterns", { body: { patterns: globs.map((glob) => ({ glob })), reason: "owed reconcile test" } });

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: "a/*" } });
    clients = cluster.clients();
    (await import("@/server/patterns")).setPatternsAuditor({ recordIntent: () => Promise.resolve(), recordOutcome: () => Promise.resolve() });
    patterns = await import("@/app/api/patterns/route");
    live = await import("@/server/live");
    live.startLive();
    expect(await live.waitUntilReconciled(30_000)).toBe(true);
  });

  afterAll(async () => {
    cluster.resume(2);
    await tearDownConsole(cluster);
  });

  it("reads the new patterns' keys on a node that did not answer when they changed, once it answers", async () => {
    await Promise.all(clients.map((c) => c.set("b:held", "b-token")));
    cluster.pause(2);
    await until("node 2 not answering", () => live.getWatcherStatus()[2]?.answering === false, 10_000);
    expect((await put(["a/*", "b:*"])).status).toBe(200);
    cluster.resume(2);
    // Until then the lock is held by nodes 0 and 1 only (node 2's key was never read).
    const lock = await until(
      "b:held read on every node",
      () => {
        const shown = live.getLockStore().get("b:held");
        return shown?.nodes.every((n) => n.token === "b-token") ? shown : null;
      },
      20_000,
    );
    expect(lock).toMatchObject({ state: "held", quorumHeld: 3 });
  });
});
