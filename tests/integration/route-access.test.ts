import { readdirSync, readFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR_TOKEN, VIEWER_TOKEN } from "../support/console";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";

/**
 * Who may call each route of the real production server, for every route file in `app/` (read from the folder
 * now, so a route added later is checked without touching this file). Unless it is listed in `NOT_BY_ROLE`, a
 * route that reads needs the viewer role once a viewer token is set, and a route that changes something needs the
 * operator role, asked of a browser's session only with the console's own `Origin`. A new route that forgot its
 * check fails here.
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const METRICS_TOKEN = "it-access-metrics-token-0123456789abcdef";
const SESSION_SECRET = "it-access-session-secret-0123456789abcdef";

/** The routes that are not behind the viewer or operator role, and why. Every other route is. */
const NOT_BY_ROLE: Readonly<Record<string, string>> = {
  "GET /api/health": "a probe: anyone",
  "GET /api/ready": "a probe: anyone",
  "GET /metrics": "METRICS_TOKEN alone (checked below)",
  "POST /api/session": "sign-in: anyone with a token (its Origin rules checked below)",
  "DELETE /api/session": "sign-out: anyone carrying a session (its Origin rules checked below)",
};

const MUTATING = new Set(["POST", "PUT", "PATCH", "DELETE"]);

interface RouteFile {
  /** e.g. /api/locks/[resource]/release */
  pattern: string;
  methods: string[];
  /** Methods Next.js answers with another's handler: HEAD with GET's where the file exports no HEAD. */
  answeredBy: Record<string, string>;
}

function findRoutes(dir = path.join(ROOT, "app"), prefix = ""): RouteFile[] {
  const out: RouteFile[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      // Route groups `(name)` add no URL segment; private folders `_x` are not routes.
      if (entry.name.startsWith("_")) continue;
      out.push(...findRoutes(full, prefix + (/^\(.*\)$/.test(entry.name) ? "" : `/${entry.name}`)));
    } else if (/^route\.(ts|tsx|js)$/.test(entry.name)) {
      const methods = [...readFileSync(full, "utf8").matchAll(/^export (?:const|async function|function) (GET|HEAD|POST|PUT|PATCH|DELETE)\b/gm)].map((m) => m[1]!);
      const answeredBy: Record<string, string> = {};
      // Next.js answers HEAD with the GET handler where a route exports none of its own.
      if (methods.includes("GET") && !methods.includes("HEAD")) answeredBy.HEAD = "GET";
      out.push({ pattern: prefix || "/", methods: [...methods, ...Object.keys(answeredBy)], answeredBy });
    }
  }
  return out;
}

/** A path for the pattern: a lock key nobody holds, a lab run id that does not exist. */
function fill(pattern: string): string {
  return pattern.replace(/\[id\]/g, "rzzzzzzzzzzzz").replace(/\[\.{0,3}[^\]]+\]/g, encodeURIComponent("lock:access-check"));
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

describe("who may call each route of the production server", () => {
  let cluster: TestCluster;
  let launcher: LauncherProcess;
  let viewerCookie: string;
  let operatorCookie: string;
  const routes = findRoutes();
  const calls = routes.flatMap((r) =>
    r.methods.map((method) => ({
      method,
      key: `${method} ${r.pattern}`,
      /** What it is exempt as: HEAD answered by GET's handler is what GET is. */
      rule: `${r.answeredBy[method] ?? method} ${r.pattern}`,
      path: fill(r.pattern),
    })),
  );

  beforeAll(async () => {
    cluster = await startCluster(3);
    launcher = await startLauncher({
      REDIS_URLS: cluster.urls.join(","),
      LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN,
      LOCKSCOPE_VIEWER_TOKEN: VIEWER_TOKEN,
      LOCKSCOPE_SESSION_SECRET: SESSION_SECRET,
      METRICS_TOKEN,
    });
    viewerCookie = await signIn(VIEWER_TOKEN);
    operatorCookie = await signIn(OPERATOR_TOKEN);
  }, 240_000);
  afterAll(async () => {
    await launcher?.stop("SIGTERM");
    await cluster?.close();
  });

  const origin = () => `http://127.0.0.1:${launcher.port}`;

  const send = (method: string, target: string, headers: Record<string, string> = {}, body?: string) =>
    new Promise<Answer>((resolve, reject) => {
      const length: Record<string, string> = body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) };
      const req = http.request({ host: "127.0.0.1", port: launcher.port, method, path: target, headers: { host: `127.0.0.1:${launcher.port}`, ...length, ...headers } }, (res) => {
        // A live stream never ends: its headers are the answer.
        if ((res.headers["content-type"] ?? "").startsWith("text/event-stream")) {
          res.destroy();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: "" });
          return;
        }
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.setTimeout(15_000, () => req.destroy(new Error(`timeout: ${method} ${target}`)));
      req.on("error", reject);
      req.end(body);
    });

  /** A request as the caller sends it: mutating ones with a JSON object that no route's schema takes whole. */
  const ask = (method: string, target: string, headers: Record<string, string> = {}) =>
    MUTATING.has(method) ? send(method, target, { "content-type": "application/json", ...headers }, "{}") : send(method, target, headers);

  async function signIn(token: string): Promise<string> {
    const res = await send("POST", "/api/session", { origin: origin(), "content-type": "application/json" }, JSON.stringify({ token }));
    expect(res.status).toBe(200);
    return String(res.headers["set-cookie"]?.[0] ?? "").split(";")[0]!;
  }

  const seen = (what: string, res: Answer) => `${what} → ${res.status} ${res.text.slice(0, 200)}`;

  it("finds every route file, and each exports a handler", () => {
    expect(calls.map((c) => c.key)).toEqual(expect.arrayContaining(["GET /api/locks", "POST /api/locks/[resource]/release", "PUT /api/patterns", "DELETE /api/demo/runs/[id]"]));
    for (const route of routes) expect(route.methods.length, route.pattern).toBeGreaterThan(0);
    // An exception that names no route is a route renamed or gone: the list must follow it.
    for (const key of Object.keys(NOT_BY_ROLE)) expect(calls.map((c) => c.key), key).toContain(key);
  });

  it("refuses every read to a caller without credentials (401) while a viewer token is set, and serves it to a viewer", async () => {
    for (const call of calls.filter((c) => !MUTATING.has(c.method) && !(c.rule in NOT_BY_ROLE))) {
      const anonymous = await ask(call.method, call.path);
      expect(anonymous.status, seen(`${call.key} without credentials`, anonymous)).toBe(401);
      expect(anonymous.headers["www-authenticate"], call.key).toMatch(/^Bearer /);
      // The route answers the viewer, so the 401 above was about the credentials, not the path.
      for (const [who, headers] of [
        ["a viewer's token", { authorization: `Bearer ${VIEWER_TOKEN}` }],
        ["a viewer's session", { cookie: viewerCookie }],
      ] as const) {
        const res = await ask(call.method, call.path, headers);
        expect([401, 403], seen(`${call.key} with ${who}`, res)).not.toContain(res.status);
      }
    }
  });

  it("refuses every write to a caller without credentials (401) and to a viewer (403), by token or session", async () => {
    for (const call of calls.filter((c) => MUTATING.has(c.method) && !(c.rule in NOT_BY_ROLE))) {
      const anonymous = await ask(call.method, call.path, { origin: origin() });
      expect(anonymous.status, seen(`${call.key} without credentials`, anonymous)).toBe(401);
      const viewer = await ask(call.method, call.path, { authorization: `Bearer ${VIEWER_TOKEN}` });
      expect(viewer.status, seen(`${call.key} with a viewer's token`, viewer)).toBe(403);
      const viewerSession = await ask(call.method, call.path, { cookie: viewerCookie, origin: origin() });
      expect(viewerSession.status, seen(`${call.key} with a viewer's session`, viewerSession)).toBe(403);
      // The operator gets past the role check (the body `{}` is refused by the route's schema, or the run is
      // unknown): the refusals above were about the role.
      const operator = await ask(call.method, call.path, { authorization: `Bearer ${OPERATOR_TOKEN}` });
      expect([401, 403], seen(`${call.key} with the operator's token`, operator)).not.toContain(operator.status);
    }
  });

  it("refuses a write on an operator's session unless it carries the console's own Origin, whatever its content type", async () => {
    const foreign = ["http://attacker.example", `http://localhost:${launcher.port + 1}`, "null"];
    for (const call of calls.filter((c) => MUTATING.has(c.method) && !(c.rule in NOT_BY_ROLE))) {
      const session = { cookie: operatorCookie };
      const none = await ask(call.method, call.path, session);
      expect(none.status, seen(`${call.key} on a session without Origin`, none)).toBe(403);
      for (const from of foreign) {
        const res = await ask(call.method, call.path, { ...session, origin: from });
        expect(res.status, seen(`${call.key} on a session from Origin ${from}`, res)).toBe(403);
        // A form's content types cannot slip past either.
        for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
          const typed = await send(call.method, call.path, { ...session, origin: from, "content-type": type }, "{}");
          expect(typed.status, seen(`${call.key} on a session from Origin ${from} as ${type}`, typed)).toBe(403);
        }
      }
      // DNS rebinding: the attacker's name as Host and Origin, which agree with each other.
      const rebound = await ask(call.method, call.path, { ...session, host: `attacker.example:${launcher.port}`, origin: `http://attacker.example:${launcher.port}` });
      expect(rebound.status, seen(`${call.key} rebound`, rebound)).toBe(421);
      // With its own Origin, the session gets past the checks (to the route's own refusal of `{}`).
      const own = await ask(call.method, call.path, { ...session, origin: origin() });
      expect([401, 403, 421], seen(`${call.key} on a session from its own Origin`, own)).not.toContain(own.status);
    }
  });

  it("signs in and out only from the console's own Origin (or, for a script, without one)", async () => {
    const signInFrom = (headers: Record<string, string>) => send("POST", "/api/session", { "content-type": "application/json", ...headers }, JSON.stringify({ token: VIEWER_TOKEN }));
    for (const from of ["http://attacker.example", "null"]) {
      const res = await signInFrom({ origin: from });
      expect(res.status, seen(`sign-in from ${from}`, res)).toBe(403);
      expect(res.headers["set-cookie"], from).toBeUndefined();
    }
    const cookie = await signIn(VIEWER_TOKEN);
    for (const headers of [{}, { origin: "http://attacker.example" }, { origin: "null" }] as Array<Record<string, string>>) {
      const out = await send("DELETE", "/api/session", { cookie, ...headers });
      expect(out.status, seen(`sign-out with ${JSON.stringify(headers)}`, out)).toBe(403);
    }
    expect((await send("GET", "/api/session", { cookie })).status).toBe(200);
  });

  it("serves /metrics only to METRICS_TOKEN where it is set: not without credentials, not to the API's tokens", async () => {
    for (const [who, headers] of [
      ["no credentials", {}],
      ["the viewer's token", { authorization: `Bearer ${VIEWER_TOKEN}` }],
      ["the operator's token", { authorization: `Bearer ${OPERATOR_TOKEN}` }],
      ["an operator's session", { cookie: operatorCookie }],
    ] as const) {
      const res = await send("GET", "/metrics", headers);
      expect(res.status, seen(`GET /metrics with ${who}`, res)).toBe(401);
    }
    expect((await send("GET", "/metrics", { authorization: `Bearer ${METRICS_TOKEN}` })).status).toBe(200);
  });
});
