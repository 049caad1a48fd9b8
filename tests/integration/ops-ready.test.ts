import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as ReadyRoute from "@/app/api/ready/route";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until as waitFor } from "../support/wait";


describe("GET /api/ready", () => {
  let cluster: TestCluster;
  let route: typeof ReadyRoute;

  // Polls until the status is `status` (and, when given, that many nodes answer: a restarted node
  // reconnects a moment after the quorum is back).
  const until = async (status: number, up?: number) => {
    const done = (res: { status: number; body: unknown }) =>
      res.status === status && (up === undefined || (res.body as { quorum?: { up?: number } }).quorum?.up === up);
    let res = await call(route.GET, "GET", "/api/ready", { token: null });
    try {
      await waitFor(`ready answering ${status}`, async () => {
        res = await call(route.GET, "GET", "/api/ready", { token: null });
        return done(res);
      }, 30_000, 100);
    } catch {
      // The caller's assertion names what the last answer was.
    }
    return res;
  };


  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    route = await import("@/app/api/ready/route");
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("answers 200 to anyone once the watchers have reconciled with a quorum up", async () => {
    const res = await until(200);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ready: true, quorum: { size: 2, up: 3, ok: true }, reconciled: true });
    const { waitUntilReconciled } = await import("@/server/live");
    expect(await waitUntilReconciled(0)).toBe(true);
  });

  it("stays ready with one node of three down", async () => {
    await cluster.kill(2);
    const res = await call(route.GET, "GET", "/api/ready", { token: null });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ quorum: { size: 2, up: 2, ok: true } });
  });

  it("stays ready when the quorum is lost (the incident a console is for), 503 only when no node answers", async () => {
    await cluster.kill(1);
    const { getHealth } = await import("@/server/health");
    await waitFor("the quorum lost", async () => !(await getHealth()).quorum.ok, 30_000, 100);
    const lost = await call(route.GET, "GET", "/api/ready", { token: null });
    expect(lost.status).toBe(200);
    expect(lost.body).toMatchObject({ ready: true, quorum: { size: 2, up: 1, ok: false } });

    await cluster.kill(0);
    const none = await until(503);
    expect(none.status).toBe(503);
    expect(none.body).toMatchObject({
      error: { code: "unavailable", message: "Not ready: none of the 3 lock nodes answers, so this console has nothing to show." },
    });
    expect(none.headers.get("retry-after")).toBe("1");
    await cluster.restart(0);
    await cluster.restart(1);
    await cluster.restart(2);
    const back = await until(200, 3);
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({ ready: true, quorum: { up: 3 } });
  });

  it("answers 503 once shutdown has begun, so a load balancer stops sending traffic", async () => {
    const flag = Symbol.for("lockscope.shutting-down");
    const g = globalThis as unknown as Record<symbol, unknown>;
    g[flag] = true;
    try {
      const res = await call(route.GET, "GET", "/api/ready", { token: null });
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ error: { code: "unavailable", message: "The console is shutting down." } });
    } finally {
      g[flag] = false;
    }
  });
});
