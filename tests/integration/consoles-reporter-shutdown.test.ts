import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

const LEASE_KEY = "lockscope:lease:metrics-reporter";
const SHUTTING_DOWN = Symbol.for("lockscope.shutting-down");

/**
 * The console that exports the lock nodes' metrics lets go of its lease first thing at shutdown, so another
 * console takes over at its next try (5 s) instead of after the lease's TTL. A try that was under way when the
 * shutdown began took the lease after that step had run, and kept it: extended until the connections closed,
 * then left on the nodes for its whole TTL, while the other consoles found it held and stayed quiet.
 */
describe("the metrics reporter's lease at shutdown", () => {
  let cluster: TestCluster;
  const g = globalThis as unknown as Record<symbol, unknown>;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
  });
  afterAll(async () => {
    delete g[SHUTTING_DOWN];
    await tearDownConsole(cluster);
  });

  it("is let go of when a try under way at shutdown takes it", async () => {
    const admins = cluster.clients();
    // What happens to the lease key on each node, as the nodes tell it.
    const events: string[][] = admins.map(() => []);
    for (const [i, admin] of admins.entries()) {
      await admin.config("SET", "notify-keyspace-events", "KA");
      const subscriber = cluster.client(i);
      subscriber.on("message", (_channel: string, event: string) => events[i]!.push(event));
      await subscriber.subscribe(`__keyspace@0__:${LEASE_KEY}`);
    }

    const { startMetricsReporter } = await import("@/server/cluster/reporter");
    const { getShutdownHooks } = await import("@/server/shutdown");
    // Its first try starts at once and needs the nodes' answers: it is under way when the shutdown begins.
    const reporter = startMetricsReporter();
    g[SHUTTING_DOWN] = true;
    const step = getShutdownHooks().find((h) => h.name === "metrics-reporter");
    expect(step).toBeDefined();
    await step!.run();

    await until("the try under way took the lease on a quorum of nodes", () => events.filter((e) => e.length > 0).length >= 2, 20_000);
    let present: number[] = [];
    await until(
      "the lease gone from every node",
      async () => {
        present = await Promise.all(admins.map((admin) => admin.exists(LEASE_KEY)));
        return present.every((n) => n === 0);
      },
      20_000,
    ).catch((error: Error) => {
      throw new Error(`${error.message}: present on nodes ${JSON.stringify(present)}, events ${JSON.stringify(events)}`);
    });
    expect(reporter.holds()).toBe(false);
  }, 60_000);
});
