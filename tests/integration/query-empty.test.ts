import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole } from "../support/console";

type Handler = Parameters<typeof call>[0];

/** zod's own wording, which says nothing about which parameter is wrong or what to give instead. */
const ZOD_DEFAULT = /too small|too big|expected (string|number)|invalid input|invalid option|[<>]=/i;

describe("an empty query parameter is refused with a message that names it and says what to give", () => {
  let cluster: TestCluster;
  let routes: Array<{ name: string; handler: Handler; method: string; path: string; params?: Record<string, string>; query: string[] }>;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1 });
    const audit = await import("@/app/api/audit/route");
    const auditExport = await import("@/app/api/audit/export/route");
    const demoRuns = await import("@/app/api/demo/runs/route");
    const history = await import("@/app/api/history/route");
    const lockHistory = await import("@/app/api/locks/[resource]/history/route");
    const release = await import("@/app/api/locks/[resource]/release/route");
    const lock = await import("@/app/api/locks/[resource]/route");
    const groups = await import("@/app/api/locks/groups/route");
    const locks = await import("@/app/api/locks/route");
    const stream = await import("@/app/api/locks/stream/route");
    const losses = await import("@/app/api/losses/route");
    const resource = { resource: "lock:orders/42" };
    routes = [
      { name: "GET /api/audit", handler: audit.GET, method: "GET", path: "/api/audit", query: ["limit", "before", "resource", "actor", "from", "to"] },
      { name: "GET /api/audit/export", handler: auditExport.GET, method: "GET", path: "/api/audit/export", query: ["format", "before", "resource", "actor", "from", "to"] },
      { name: "GET /api/demo/runs", handler: demoRuns.GET, method: "GET", path: "/api/demo/runs", query: ["limit"] },
      { name: "GET /api/history", handler: history.GET, method: "GET", path: "/api/history", query: ["limit", "before", "from", "to", "at", "resource", "deployment"] },
      { name: "GET /api/locks/[resource]/history", handler: lockHistory.GET, method: "GET", path: "/api/locks/lock%3Aorders%2F42/history", params: resource, query: ["limit", "before", "from", "to", "at", "deployment"] },
      { name: "POST /api/locks/[resource]/release", handler: release.POST, method: "POST", path: "/api/locks/lock%3Aorders%2F42/release", params: resource, query: ["deployment"] },
      { name: "GET /api/locks/[resource]", handler: lock.GET, method: "GET", path: "/api/locks/lock%3Aorders%2F42", params: resource, query: ["deployment"] },
      { name: "GET /api/locks/groups", handler: groups.GET, method: "GET", path: "/api/locks/groups", query: ["q", "sort", "order", "offset", "limit", "deployment"] },
      { name: "GET /api/locks", handler: locks.GET, method: "GET", path: "/api/locks", query: ["state", "limit", "group", "q", "sort", "order", "offset", "deployment"] },
      { name: "GET /api/locks/stream", handler: stream.GET, method: "GET", path: "/api/locks/stream", query: ["lastEventId", "group", "locks", "deployment"] },
      { name: "HEAD /api/locks/stream", handler: stream.HEAD, method: "HEAD", path: "/api/locks/stream", query: ["lastEventId", "group", "locks", "deployment"] },
      { name: "GET /api/losses", handler: losses.GET, method: "GET", path: "/api/losses", query: ["deployment"] },
    ];
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("on every route that takes query parameters, for each of them", async () => {
    const answers: string[] = [];
    for (const route of routes) {
      for (const name of route.query) {
        const res = await call(route.handler, route.method, `${route.path}?${name}=`, {
          ...(route.params ? { params: route.params } : {}),
          ...(route.method === "POST" ? { body: { reason: "checking an empty parameter" } } : {}),
        });
        const message = route.method === "HEAD" ? "" : ((res.body as { error?: { message?: string } } | null)?.error?.message ?? "");
        answers.push(`${route.name} ?${name}=: ${res.status} ${message}`);
        expect([route.name, name, res.status]).toEqual([route.name, name, 400]);
        if (route.method === "HEAD") continue;
        expect(res.body, `${route.name} ?${name}=`).toMatchObject({ error: { code: "bad_request" } });
        expect(message, `${route.name} ?${name}=`).toContain(name);
        expect(message, `${route.name} ?${name}=`).toMatch(/empty/);
        expect(message, `${route.name} ?${name}=`).not.toMatch(ZOD_DEFAULT);
      }
    }
    expect(answers.length).toBeGreaterThan(40);
  });

  it("says what the lock routes' `resource` is: the lock's key name", async () => {
    const history = await import("@/app/api/history/route");
    const res = await call(history.GET, "GET", "/api/history?resource=");
    expect(res.status).toBe(400);
    expect((res.body as { error: { message: string } }).error.message).toMatch(/resource.*must not be empty.*lock's key name/);
  });
});
