import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

const CONSOLES_KEY = "lockscope:consoles";

const beat = (id: string, at: number) => JSON.stringify({ id, name: id.split("/")[0], secret: "fingerprint-of-another-key", generated: false, at });

/**
 * A console that is killed (SIGKILL at the end of a grace period, out of memory, a crash loop) never removes its
 * entry from `lockscope:consoles`, and the list never expires while another console beats: each such stop left
 * one more entry on every node, read by every console at every beat, for as long as the installation ran.
 */
describe("the list of consoles on the lock nodes", () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("loses the entry of a console killed long ago, and keeps one that stopped a moment ago", async () => {
    const now = Date.now();
    const killedLongAgo = "crashed-pod-7d9f:3000/0a1b2c3d";
    const stoppedJustNow = "draining-pod-5c2e:3000/4e5f6a7b";
    for (const client of cluster.clients()) {
      await client.hset(CONSOLES_KEY, killedLongAgo, beat(killedLongAgo, now - 60 * 60_000), stoppedJustNow, beat(stoppedJustNow, now - 45_000));
    }
    const { startConsoleRegistry } = await import("@/server/cluster/registry");
    const { self } = startConsoleRegistry();

    const lists = await until(
      "every node lists this console and no longer the one killed an hour ago",
      async () => {
        const all = await Promise.all(cluster.clients().map((c) => c.hgetall(CONSOLES_KEY)));
        return all.every((entries) => self.id in entries && !(killedLongAgo in entries)) ? all : null;
      },
      30_000,
    );
    // A console that stopped 45 s ago is no peer any more, but its entry is not removed yet: a live console whose
    // clock is some seconds off must never lose its own.
    for (const entries of lists) expect(Object.keys(entries).sort()).toEqual([stoppedJustNow, self.id].sort());
  }, 60_000);
});
