import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as ReadyRoute from "@/app/api/ready/route";
import { call, setUpConsole, startLiveReconciled, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

/** A deployment of one lock node (a SETNX lock's single instance): readiness speaks of that node, not of "none of 1". */
describe("GET /api/ready on one lock node", () => {
  let cluster: TestCluster;
  let route: typeof ReadyRoute;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    route = await import("@/app/api/ready/route");
    await startLiveReconciled();
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("answers 503 saying the lock node does not answer while it is down, and 200 once it is back", async () => {
    expect((await call(route.GET, "GET", "/api/ready", { token: null })).status).toBe(200);
    await cluster.kill(0);
    const down = await until("not ready", async () => {
      const res = await call(route.GET, "GET", "/api/ready", { token: null });
      return res.status === 503 ? res : null;
    });
    expect(down.body).toMatchObject({ error: { code: "unavailable", message: "Not ready: the lock node does not answer, so this console has nothing to show." } });
    await cluster.restart(0);
    await until("ready again", async () => (await call(route.GET, "GET", "/api/ready", { token: null })).status === 200, 30_000);
  });
});
