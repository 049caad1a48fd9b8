import { readdirSync, readFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_ROUTES } from "@/lib/api-routes";
import type { TestCluster } from "../support/redis";
import { call, OPERATOR_TOKEN, ORIGIN, setUpConsole, VIEWER_TOKEN, tearDownConsole } from "../support/console";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { until } from "../support/wait";

/**
 * Malformed requests against every route the console serves (found by reading `app/` now, so a route
 * added later is covered without touching this file): none may answer 5xx, leak a stack trace, or touch
 * a key. In-process first (every exported handler, many bodies), then over HTTP against the real
 * production server (raw paths with broken percent-encoding, methods nobody exported).
 */

const ROOT = path.resolve(import.meta.dirname, "../..");
const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;

interface RouteFile {
  file: string;
  /** URL path with `[param]` segments kept, e.g. /api/locks/[resource]/release */
  pattern: string;
  params: string[];
}

function findRoutes(dir = path.join(ROOT, "app"), prefix = ""): RouteFile[] {
  const out: RouteFile[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      // Route groups `(name)` add no URL segment; private folders `_x` are not routes.
      if (entry.name.startsWith("_")) continue;
      const segment = /^\(.*\)$/.test(entry.name) ? "" : `/${entry.name}`;
      out.push(...findRoutes(full, prefix + segment));
    } else if (/^route\.(ts|tsx|js)$/.test(entry.name)) {
      const pattern = prefix || "/";
      out.push({ file: full, pattern, params: [...pattern.matchAll(/\[\.{0,3}([^\]]+)\]/g)].map((m) => m[1]!) });
    }
  }
  return out;
}

const PARAM_VALUES = [
  "",
  "%",
  "%E0%A4%A",
  "%ZZ",
  "lock%3A%FF",
  "lock:ok",
  "session:private",
  "x".repeat(5000),
  "..%2F..%2Fetc%2Fpasswd",
  "lock%3Aa%00b",
  "%F0%9F%94%92",
  "-1",
  "9".repeat(40),
  "null",
];

const QUERIES = [
  "",
  "?limit=-1",
  "?limit=1e9",
  "?limit=abc&limit=2",
  "?before=%ZZ",
  "?before=0000000000000-zzzzzzzzzzzz",
  "?from=NaN&to=-Infinity",
  "?format=<script>",
  `?resource=${"y".repeat(5000)}`,
  "?resource[]=1&actor[$ne]=x",
  "?unknown=1",
  "?%=%",
];

const BODIES: Array<{ raw: string | Uint8Array; type?: string }> = [
  { raw: "" },
  { raw: "{" },
  { raw: "null" },
  { raw: "[]" },
  { raw: "1" },
  { raw: '"string"' },
  { raw: "true" },
  { raw: '{"__proto__":{"role":"operator"},"constructor":{"prototype":{"x":1}}}' },
  { raw: '{"reason":{"$gt":""},"token":["a"]}' },
  { raw: '{"reason":"valid reason","token":null,"extra":1}' },
  { raw: '{"reason":"' + "r".repeat(600) + '"}' },
  { raw: JSON.stringify({ reason: "valid reason", token: "t".repeat(5000) }) },
  { raw: JSON.stringify({ strategy: "redlock", stock: -1, workers: 1e9, ttlMs: "soon", workMs: null }) },
  { raw: JSON.stringify({ strategy: "rm -rf", stock: 1.5, workers: 0, ttlMs: 0, workMs: 0, fault: { node: 99, kind: "explode", atMs: -1 } }) },
  { raw: JSON.stringify({ token: 12345, name: { first: "x" } }) },
  { raw: `${"[".repeat(5000)}${"]".repeat(5000)}` },
  { raw: JSON.stringify({ reason: "x".repeat(20_000) }) },
  { raw: new Uint8Array([0x7b, 0x22, 0x72, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]) },
  { raw: "reason=hello", type: "application/x-www-form-urlencoded" },
  { raw: '{"reason":"valid reason"}', type: "text/plain" },
  { raw: '{"reason":"valid reason"}', type: "application/json; charset=latin1" },
];

const AUTHS: Array<Record<string, string>> = [
  {},
  { authorization: `Bearer ${OPERATOR_TOKEN}` },
  { authorization: `Bearer ${VIEWER_TOKEN}` },
  { authorization: "Bearer " },
  { authorization: "Bearer a b c" },
  { authorization: `Basic ${Buffer.from("admin:admin").toString("base64")}` },
  { cookie: "lockscope_session=e30.AAAA" },
  { cookie: `lockscope_session=${"A".repeat(5000)}` },
  { "x-lockscope-actor": "<img src=x onerror=alert(1)>", authorization: `Bearer ${OPERATOR_TOKEN}` },
];

type Handler = (request: Request, context: { params: Promise<Record<string, string>> }) => Promise<Response>;

function fill(pattern: string, value: string): string {
  return pattern.replace(/\[\.{0,3}[^\]]+\]/g, value);
}

async function settle(response: Response): Promise<string> {
  // Streams (SSE) never end on their own: take what is there now and hang up.
  if (response.headers.get("content-type")?.startsWith("text/event-stream")) {
    await response.body?.cancel();
    return "";
  }
  const reader = response.body?.getReader();
  if (!reader) return "";
  const chunks: Uint8Array[] = [];
  const timer = setTimeout(() => void reader.cancel(), 5_000);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
    }
  } finally {
    clearTimeout(timer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * Routes whose 503 is their meaning, not a failure: the readiness probe says "not ready yet" with it.
 * Any other 5xx, anywhere, fails.
 */
const STATUS_ROUTES = new Set(["/api/ready"]);

function assertSound(where: string, status: number, text: string, pattern = ""): void {
  const allowed = STATUS_ROUTES.has(pattern) && status === 503 && /"code":"unavailable"/.test(text);
  if (!allowed) expect(status, `${where} → ${status} ${text.slice(0, 300)}`).toBeLessThan(500);
  expect(text, where).not.toMatch(/\n\s+at [\w.<>]+ \(|node_modules|webpack-internal/);
}

describe("malformed requests against every route", () => {
  let cluster: TestCluster;
  let nodes: Redis[];
  const routes = findRoutes();
  // Keys no request here may delete: one outside LOCK_PATTERNS (targeted by name), one lock nobody names.
  // (`lock:ok` itself is a lock key, and a well-formed operator request among the fuzz may release it.)
  const sentinels: Array<[string, string]> = [
    ["session:private", "keep-me"],
    ["lock:ok/untargeted", "held-by-someone"],
  ];

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3 });
    nodes = cluster.clients();
    await Promise.all(nodes.flatMap((n) => sentinels.map(([k, v]) => n.set(k, v))));
    // Until its nodes are read, a lock's page answers 503 (whether it is held cannot be said): a console not ready
    // yet, not a route failing on a bad input.
    const ready = await import("@/app/api/ready/route");
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 60_000);
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("finds the console's routes", () => {
    const patterns = routes.map((r) => r.pattern);
    expect(patterns).toContain("/api/locks/[resource]/release");
    expect(patterns).toContain("/api/audit");
    expect(patterns).toContain("/api/session");
  });

  it("knows, before routing, every route and the methods its file exports", () => {
    // lib/api-routes.ts answers unknown paths and methods before Next.js routes: it must list what app/ serves.
    const served = routes
      .map((r) => ({ pattern: r.pattern, methods: [...readFileSync(r.file, "utf8").matchAll(/^export (?:const|async function|function) (GET|POST|PUT|PATCH|DELETE)\b/gm)].map((m) => m[1]).sort() }))
      .sort((a, b) => a.pattern.localeCompare(b.pattern));
    const table = API_ROUTES.map((r) => ({ pattern: r.pattern, methods: [...r.methods].sort() })).sort((a, b) => a.pattern.localeCompare(b.pattern));
    expect(table).toEqual(served);
  });

  it("answers every malformed in-process request with a 4xx (or a success), never a 5xx or a stack trace", async () => {
    let calls = 0;
    for (const route of routes) {
      const mod = (await import(route.file)) as Partial<Record<(typeof METHODS)[number], Handler>>;
      for (const method of METHODS) {
        const handler = mod[method];
        if (!handler) continue;
        const mutating = method !== "GET" && method !== "HEAD" && method !== "OPTIONS";
        const send = async (paramValue: string, query: string, auth: Record<string, string>, body?: (typeof BODIES)[number], origin: string | null = ORIGIN) => {
          const headers = new Headers({ host: new URL(ORIGIN).host, "x-lockscope-client-ip": "10.1.2.3", ...auth });
          if (origin && mutating) headers.set("origin", origin);
          if (body) headers.set("content-type", body.type ?? "application/json");
          const params = Object.fromEntries(route.params.map((p) => [p, paramValue]));
          const url = `${ORIGIN}${fill(route.pattern, encodeURIComponent(paramValue))}${query}`;
          const payload: BodyInit | undefined = mutating && body ? (typeof body.raw === "string" ? body.raw : Buffer.from(body.raw)) : undefined;
          const request = new Request(url, { method, headers, body: payload });
          const response = await handler(request, { params: Promise.resolve(params) });
          calls += 1;
          assertSound(`${method} ${route.pattern} param=${paramValue.slice(0, 30)} query=${query.slice(0, 40)} auth=${Object.keys(auth).join("+")}`, response.status, await settle(response), route.pattern);
        };
        const operator = AUTHS[1]!;
        for (const value of route.params.length > 0 ? PARAM_VALUES : ["-"]) {
          await send(value, "", operator, mutating ? BODIES[9] : undefined);
        }
        const someParam = "lock:ok";
        for (const query of QUERIES) await send(someParam, query, operator, mutating ? BODIES[9] : undefined);
        for (const auth of AUTHS) await send(someParam, "", auth, mutating ? BODIES[9] : undefined);
        if (mutating) {
          for (const body of BODIES) await send(someParam, "", operator, body);
          await send(someParam, "", operator, BODIES[9], "http://evil.example");
          await send(someParam, "", operator, BODIES[9], "null");
        }
      }
    }
    expect(calls).toBeGreaterThan(200);
    for (const n of nodes) {
      for (const [key, value] of sentinels) expect(await n.get(key), key).toBe(value);
    }
  });

  describe("over HTTP, against the production server", () => {
    let launcher: LauncherProcess;

    beforeAll(async () => {
      launcher = await startLauncher({
        REDIS_URLS: cluster.urls.join(","),
        LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN,
        LOCKSCOPE_VIEWER_TOKEN: VIEWER_TOKEN,
      });
      await until("the console ready", () => fetch(`${launcher.baseUrl}/api/ready`).then((res) => res.status === 200, () => false), 60_000);
    }, 240_000);
    afterAll(async () => {
      await launcher?.stop("SIGTERM");
    });

    const raw = (method: string, rawPath: string, headers: Record<string, string> = {}, body?: string) =>
      new Promise<{ status: number; text: string; type: string | undefined; allow: string | undefined }>((resolve, reject) => {
        // Node's client frames a DELETE or OPTIONS body with neither Content-Length nor chunking unless told.
        const length: Record<string, string> = body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) };
        // The operator's token unless told otherwise; an empty `authorization` sends none.
        const all: Record<string, string> = { authorization: `Bearer ${OPERATOR_TOKEN}`, ...length, ...headers };
        if (all.authorization === "") delete all.authorization;
        const req = http.request({ host: "127.0.0.1", port: launcher.port, method, path: rawPath, headers: all }, (res) => {
          const type = res.headers["content-type"];
          const allow = res.headers.allow;
          if ((type ?? "").startsWith("text/event-stream")) {
            res.destroy();
            resolve({ status: res.statusCode ?? 0, text: "", type, allow });
            return;
          }
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), type, allow }));
          res.on("error", reject);
        });
        req.setTimeout(10_000, () => req.destroy(new Error(`timeout: ${method} ${rawPath}`)));
        req.on("error", reject);
        if (body !== undefined) req.end(body);
        else req.end();
      });

    it("refuses broken paths, odd methods and bad bodies without a 5xx", async () => {
      const origin = launcher.baseUrl;
      // Collect every failure, so one run shows all of them.
      const failures: string[] = [];
      for (const route of routes) {
        for (const value of ["%E0%A4%A", "%ZZ", "lock%3A%FF", "%", "lock:ok", "x".repeat(3000)]) {
          const rawPath = fill(route.pattern, value);
          for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "PROPFIND", "TRACE"]) {
            const body = method === "GET" || method === "OPTIONS" || method === "TRACE" ? undefined : '{"reason":"fuzzing it",';
            const res = await raw(method, rawPath, { origin, "content-type": "application/json" }, body);
            try {
              assertSound(`${method} ${rawPath.slice(0, 60)}`, res.status, res.text, route.pattern);
            } catch {
              failures.push(`${method} ${rawPath.slice(0, 60)} → ${res.status}`);
            }
          }
        }
      }
      expect(failures).toEqual([]);
      const big = await raw("POST", "/api/locks/lock%3Aok/release", { origin, "content-type": "application/json" }, JSON.stringify({ reason: "r".repeat(40_000) }));
      expect(big.status).toBe(413);
    });

    /** The contract's error body: JSON with a code and a message a person can read. */
    const assertErrorShape = (where: string, status: number, text: string, type: string | undefined) => {
      expect(type ?? "", where).toMatch(/^application\/json/);
      const parsed = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
      expect(typeof parsed.error?.code, `${where}: ${text.slice(0, 200)}`).toBe("string");
      expect(typeof parsed.error?.message, where).toBe("string");
      expect(status, where).toBeGreaterThanOrEqual(400);
    };

    it("answers every route, unknown API paths and the target * with every method: JSON errors, never a 5xx", async () => {
      const origin = launcher.baseUrl;
      const failures: string[] = [];
      const paths = [...routes.map((r) => ({ path: fill(r.pattern, "lock%3Aok"), pattern: r.pattern })), ...["/api", "/api/nope", "/api/locks/a/b/c", "/api/session/x", "/metrics/x"].map((path) => ({ path, pattern: "" }))];
      let sent = 0;
      const auths: Array<Record<string, string>> = [{ authorization: "" }, { authorization: `Bearer ${VIEWER_TOKEN}` }, {}, { authorization: "Bearer wrong-token-for-fuzzing" }];
      for (const { path: rawPath, pattern } of paths) {
        for (const method of METHODS) {
          for (const auth of auths) {
            for (const body of method === "GET" || method === "HEAD" ? [undefined] : [undefined, '{"reason":"fuzzing it",']) {
              const headers: Record<string, string> = { origin, "content-type": "application/json", ...auth };
              const res = await raw(method, rawPath, headers, body);
              sent += 1;
              const where = `${method} ${rawPath} auth=${auth.authorization?.slice(0, 14) ?? "operator"} body=${body !== undefined}`;
              try {
                assertSound(where, res.status, res.text, pattern);
                if (res.status >= 400 && method !== "HEAD") assertErrorShape(where, res.status, res.text, res.type);
                if (method === "OPTIONS" && res.status === 204) expect(res.allow ?? "", where).toContain("OPTIONS");
              } catch {
                failures.push(`${where} → ${res.status} ${res.type ?? ""} ${res.text.slice(0, 80)}`);
              }
            }
          }
        }
      }
      expect(sent).toBeGreaterThan(500);
      for (const method of [...METHODS, "PROPFIND"]) {
        const answer = await rawSocket(`${method} * HTTP/1.1\r\nHost: 127.0.0.1:${launcher.port}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
        const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);
        // The body is chunked: the JSON is what lies between the first `{` and the last `}`.
        const body = answer.slice(answer.indexOf("\r\n\r\n") + 4);
        const text = body.includes("{") ? body.slice(body.indexOf("{"), body.lastIndexOf("}") + 1) : body;
        try {
          expect(status).toBeGreaterThan(0);
          assertSound(`${method} *`, status, text);
          if (status >= 400 && method !== "HEAD") assertErrorShape(`${method} *`, status, text, /content-type: ([^\r]+)/i.exec(answer)?.[1]);
        } catch {
          failures.push(`${method} * → ${status} ${text.slice(0, 80)}`);
        }
      }
      expect(failures).toEqual([]);
    });

    /** The request target `*` cannot be sent with Node's HTTP client: raw bytes on a socket. */
    const rawSocket = (bytes: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(launcher.port, "127.0.0.1", () => socket.write(bytes));
        let out = "";
        socket.setTimeout(10_000, () => socket.destroy(new Error(`timeout: ${bytes.split("\r\n")[0]}`)));
        socket.on("data", (c: Buffer) => (out += c.toString("utf8")));
        socket.on("close", () => resolve(out));
        socket.on("error", reject);
      });

    it("leaves every key it was not asked to touch", async () => {
      for (const n of nodes) {
        for (const [key, value] of sentinels) expect(await n.get(key), key).toBe(value);
      }
    });
  });
});
