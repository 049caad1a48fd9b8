import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as PatternsRoute from "@/app/api/patterns/route";
import type * as LiveModule from "@/server/live";
import { call, lockDetail, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/**
 * A pattern change that a node cannot take at once (it does not answer, or a reconcile is already reading it
 * with the patterns before the change): the reconcile it owes runs once it can, so the new patterns' locks are
 * read on every node, not only on those that answered then.
 */
const METRICS_TOKEN = "it-patterns-metrics-token-0123456789abcdef";

describe("a pattern change a node could not take at once", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let live: typeof LiveModule;
  let patterns: typeof PatternsRoute;
  const put = (globs: string[]) => call(patterns.PUT, "PUT", "/api/patterns", { body: { patterns: globs.map((glob) => ({ glob })), reason: "owed reconcile test" } });

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: "a/*", METRICS_TOKEN } });
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

  it("shows the locks a pattern change brings in as held since before it, not as acquisitions", async () => {
    const metrics = await import("@/app/metrics/route");
    const acquired = async () => {
      const text = (await call(metrics.GET, "GET", "/metrics", { token: METRICS_TOKEN })).body as string;
      return [...text.matchAll(/^lockscope_lock_events_total\{[^}]*type="acquired"[^}]*\} (\d+)/gm)].reduce((sum, m) => sum + Number(m[1]), 0);
    };
    await Promise.all(clients.map((c) => Promise.all([1, 2, 3].map((i) => c.set(`c:held-${i}`, `c-token-${i}`, "PX", 120_000)))));
    const before = await acquired();
    expect((await put(["a/*", "b:*", "c:*"])).status).toBe(200);
    for (const i of [1, 2, 3]) {
      await until(`c:held-${i} held on every node`, () => live.getLockStore().get(`c:held-${i}`)?.quorumHeld === 3, 20_000);
      const page = await lockDetail(`c:held-${i}`);
      expect(page?.timeline.map((t) => [t.type, t.detail])).toEqual([["acquired", "already held when the lock patterns came to cover it"]]);
    }
    expect(await acquired()).toBe(before);
    // A lock taken after the change is an acquisition, as ever.
    await Promise.all(clients.map((c) => c.set("c:taken-now", "c-new", "PX", 120_000)));
    await until("c:taken-now held", () => live.getLockStore().get("c:taken-now")?.quorumHeld === 3, 20_000);
    expect((await lockDetail("c:taken-now"))?.timeline.map((t) => [t.type, t.detail])).toEqual([["acquired", "by a foreign client, on 3 of 3 nodes"]]);
    await until("its acquisition counted", async () => (await acquired()) === before + 1, 10_000);
  });
});
