import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

/**
 * The passwords in REDIS_URLS, wherever the console shows a node: the open /api/health (and the UI, which shows
 * its `url`) and the log's node lines. Node 0 takes the right password, node 1 a wrong one, node 2 is written
 * with the password alone before the `@`, as Lettuce and Jedis take it (`redis://password@host`).
 */
describe("node URLs with passwords", () => {
  let cluster: TestCluster;
  const lines: string[] = [];
  const RIGHT = "right-pass-0123";
  const WRONG = "wrong-pass-4567";
  const ALONE = "alone-pass-8901";

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOG_LEVEL: "debug" } });
    for (const client of cluster.clients()) {
      await client.config("SET", "requirepass", RIGHT);
      client.disconnect();
    }
    const [p0, p1, p2] = cluster.ports;
    process.env.REDIS_URLS = [`redis://:${RIGHT}@127.0.0.1:${p0}`, `redis://:${WRONG}@127.0.0.1:${p1}`, `redis://${ALONE}@127.0.0.1:${p2}`].join(",");
    const { createLogger } = await import("@/server/logger");
    const { setGlobal } = await import("@/server/global");
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString("utf8"));
        done();
      },
    });
    setGlobal("logger", createLogger("debug", stream));
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("are shown masked by /api/health and in the log, whatever the node answered", async () => {
    const { getNodes } = await import("@/server/nodes");
    const nodes = getNodes();
    await until("every node said up or unreachable", () => lines.filter((l) => /"msg":"lock node (up|unreachable)"/.test(l)).length === 3);
    const health = await import("@/app/api/health/route");
    const res = await call(health.GET, "GET", "/api/health", { token: null });
    expect(res.status).toBe(200);
    const urls = (res.body as { nodes: Array<{ url: string }> }).nodes.map((n) => n.url);
    expect(urls).toEqual([`redis://:****@127.0.0.1:${cluster.ports[0]}`, `redis://:****@127.0.0.1:${cluster.ports[1]}`, `redis://****@127.0.0.1:${cluster.ports[2]}`]);
    expect(nodes.map((n) => n.maskedUrl)).toEqual(urls);
    const shown = `${JSON.stringify(res.body)}\n${lines.join("")}`;
    for (const secret of [RIGHT, WRONG, ALONE]) expect(shown).not.toContain(secret);
  });
});
