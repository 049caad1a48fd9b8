import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

type Handler = Parameters<typeof call>[0];

/**
 * A number written in decimal digits but out of range (`offset=99999999999`, eleven digits) is said to be out of range,
 * never "not a whole number, in decimal digits", which it is: a script author reads that as a wrong format and looks
 * for the mistake in the wrong place.
 */
describe("a whole number out of range is refused as out of range, whatever its length", () => {
  let cluster: TestCluster;
  let routes: Array<{ name: string; handler: Handler; path: string; query: string; max: string }>;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    const locks = await import("@/app/api/locks/route");
    const groups = await import("@/app/api/locks/groups/route");
    const demoRuns = await import("@/app/api/demo/runs/route");
    routes = [
      { name: "GET /api/locks", handler: locks.GET, path: "/api/locks", query: "limit", max: "1000000" },
      { name: "GET /api/locks (paged)", handler: locks.GET, path: "/api/locks?sort=resource", query: "offset", max: "10000000" },
      { name: "GET /api/locks/groups", handler: groups.GET, path: "/api/locks/groups", query: "offset", max: "10000000" },
      { name: "GET /api/locks/groups", handler: groups.GET, path: "/api/locks/groups", query: "limit", max: "10000" },
      { name: "GET /api/demo/runs", handler: demoRuns.GET, path: "/api/demo/runs", query: "limit", max: "50" },
    ];
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("says the bound for a long number, and still refuses what is no number", async () => {
    for (const route of routes) {
      for (const value of ["99999999999", "12345678901234567890123"]) {
        const join = route.path.includes("?") ? "&" : "?";
        const res = await call(route.handler, "GET", `${route.path}${join}${route.query}=${value}`, { token: VIEWER_TOKEN });
        const message = (res.body as { error?: { message?: string } } | null)?.error?.message ?? "";
        expect([route.name, route.query, value, res.status]).toEqual([route.name, route.query, value, 400]);
        expect(message, `${route.name} ${route.query}=${value}`).not.toMatch(/decimal digits/);
        expect(message, `${route.name} ${route.query}=${value}`).toMatch(new RegExp(`at most ${route.max}`));
      }
      const join = route.path.includes("?") ? "&" : "?";
      const res = await call(route.handler, "GET", `${route.path}${join}${route.query}=1e3`, { token: VIEWER_TOKEN });
      expect(res.status).toBe(400);
      expect((res.body as { error: { message: string } }).error.message).toMatch(/decimal digits/);
    }
  });
});
