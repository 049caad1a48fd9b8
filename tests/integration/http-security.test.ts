import http from "node:http";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as SessionModule from "@/app/api/session/route";
import type { TestCluster } from "../support/redis";
import { call, OPERATOR_TOKEN, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { until } from "../support/wait";

/**
 * What a browser (or an attacker's page) sees of the real production server: host names, security headers,
 * the request target `*`, clients that hang up, and sign-out across two consoles over the same nodes.
 * Headers set by the proxy and answers Next.js gives before any route runs are only visible over HTTP.
 */

const SESSION_SECRET = "l8h0TsNoAdUM/3V/z+Z4RhNoVG7d0ny0mortMT0pxrU=";

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

describe("the production server's request handling", () => {
  let cluster: TestCluster;
  let launcher: LauncherProcess;
  let session: typeof SessionModule;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCKSCOPE_SESSION_SECRET: SESSION_SECRET } });
    session = await import("@/app/api/session/route");
    launcher = await startLauncher({
      REDIS_URLS: cluster.urls.join(","),
      LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN,
      LOCKSCOPE_VIEWER_TOKEN: VIEWER_TOKEN,
      LOCKSCOPE_SESSION_SECRET: SESSION_SECRET,
      LOG_LEVEL: "info",
    });
  }, 240_000);
  afterAll(async () => {
    await launcher?.stop("SIGTERM");
    await tearDownConsole(cluster);
  });

  const request = (method: string, path: string, headers: Record<string, string> = {}, body?: string) =>
    new Promise<RawResponse>((resolve, reject) => {
      const length: Record<string, string> = body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) };
      const req = http.request({ host: "127.0.0.1", port: launcher.port, method, path, headers: { ...length, ...headers } }, (res) => {
        if ((res.headers["content-type"] ?? "").startsWith("text/event-stream")) {
          // Wait for the first frame, so a stream the proxy buffered would time out here.
          res.once("data", (chunk: Buffer) => {
            res.destroy();
            resolve({ status: res.statusCode ?? 0, headers: res.headers, text: chunk.toString("utf8") });
          });
          return;
        }
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      });
      req.setTimeout(15_000, () => req.destroy(new Error(`timeout: ${method} ${path}`)));
      req.on("error", reject);
      req.end(body);
    });

  /** Sends raw bytes and returns what came back before the server closed or `idleMs` of silence. */
  const rawExchange = (bytes: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = net.connect(launcher.port, "127.0.0.1", () => socket.write(bytes));
      let out = "";
      socket.on("data", (c: Buffer) => {
        out += c.toString("utf8");
        // One complete response (headers, and a body when it has a length) is all these requests get.
        const end = out.indexOf("\r\n\r\n");
        const length = /content-length: (\d+)/i.exec(out.slice(0, end));
        if (end >= 0 && (!length || out.length >= end + 4 + Number(length[1]))) socket.end();
      });
      socket.on("end", () => resolve(out));
      socket.on("close", () => resolve(out));
      socket.on("error", reject);
    });

  const json = (res: RawResponse) => JSON.parse(res.text) as { error?: { code: string; message: string } };
  const host = () => `127.0.0.1:${launcher.port}`;

  it("refuses a host name it was not given (DNS rebinding) with a JSON 421, on pages, routes and bodies alike", async () => {
    const rebound = { host: `attacker.example:${launcher.port}` };
    for (const [method, path, body] of [
      ["GET", "/", undefined],
      ["GET", "/api/locks", undefined],
      ["GET", "/api/audit", undefined],
      ["GET", "/metrics", undefined],
      ["GET", "/api/health", undefined],
      ["POST", "/api/session", JSON.stringify({ token: OPERATOR_TOKEN })],
      ["POST", "/api/locks/lock%3Aa/release", JSON.stringify({ reason: "rebinding attempt" })],
      // Before anything else answers: the guard's own refusals, OPTIONS, a static file.
      ["OPTIONS", "/api/locks", undefined],
      ["DELETE", "/api/locks", undefined],
      ["GET", "/api/nope", undefined],
      ["GET", "/api/locks/%ZZ", undefined],
      ["GET", "/api/locks/", undefined],
      ["GET", "/icon.svg", undefined],
    ] as const) {
      const res = await request(method, path, { ...rebound, "content-type": "application/json", origin: `http://${rebound.host}`, authorization: `Bearer ${OPERATOR_TOKEN}` }, body);
      expect(res.status, `${method} ${path}`).toBe(421);
      expect(json(res).error?.code, `${method} ${path}`).toBe("misdirected_request");
      expect(res.headers["set-cookie"]).toBeUndefined();
    }
    for (const name of ["localhost", "127.0.0.1", "[::1]"]) {
      expect((await request("GET", "/api/health", { host: `${name}:${launcher.port}` })).status, name).toBe(200);
    }
  });

  it("answers the image optimizer's path, which the console has no use for, with 404 rather than blaming the host name", async () => {
    // The console shows no optimized image; Next.js's optimizer fetched its source with no Host, which the host
    // rules refused: a 421 that told a user sending the right host name that it was the wrong one.
    for (const path of ["/_next/image?url=%2Ficon.svg&w=64&q=75", "/_next/image?url=%2Fnot-there.png&w=64&q=75"]) {
      const res = await request("GET", path, { host: host() });
      expect([path, res.status]).toEqual([path, 404]);
    }
    expect(launcher.output()).not.toContain("internal image response failed");
    // The host rules still come first.
    const rebound = await request("GET", "/_next/image?url=%2Ficon.svg&w=64&q=75", { host: `attacker.example:${launcher.port}` });
    expect(rebound.status).toBe(421);
  });

  it("counts and logs the requests it refuses before any route runs, without their credentials", async () => {
    const refusedCount = async (code: string) => {
      const text = (await request("GET", "/metrics", { host: host() })).text;
      const line = text.split("\n").find((l) => l.startsWith(`lockscope_http_refused_total{code="${code}"}`));
      return line === undefined ? null : Number(line.split(" ").at(-1));
    };
    const before = { misdirected: await refusedCount("misdirected_request"), notFound: await refusedCount("not_found"), method: await refusedCount("method_not_allowed") };
    // Declared at 0 from the start, so the first refusal is a step rate() sees.
    expect(Object.values(before).every((n) => typeof n === "number")).toBe(true);
    const secret = `Bearer ${OPERATOR_TOKEN}`;
    // A proxy that forwards another host name (or a DNS rebinding page), an unknown API path, a method a route does not serve.
    expect((await request("GET", "/api/locks?cursor=abc", { host: `rebound.example:${launcher.port}`, authorization: secret })).status).toBe(421);
    expect((await request("GET", "/api/nope", { host: host(), authorization: secret })).status).toBe(404);
    expect((await request("PATCH", "/api/locks", { host: host(), authorization: secret })).status).toBe(405);
    expect(await refusedCount("misdirected_request")).toBe(before.misdirected! + 1);
    expect(await refusedCount("not_found")).toBe(before.notFound! + 1);
    expect(await refusedCount("method_not_allowed")).toBe(before.method! + 1);
    const lines = launcher.output().split("\n").filter((l) => l.includes("request refused before routing"));
    expect(lines.some((l) => l.includes('"status":421') && l.includes('"host":"rebound.example:') && l.includes('"code":"misdirected_request"'))).toBe(true);
    expect(lines.some((l) => l.includes('"status":405') && l.includes('"method":"PATCH"'))).toBe(true);
    expect(launcher.output()).not.toContain(OPERATOR_TOKEN);
  });

  it("grants no other origin a preflight, so no other page can send sign-out (or anything) with an Authorization header", async () => {
    // A browser sends Authorization, or DELETE, to another origin only after a preflight that origin allows. Sign-out
    // with an Authorization header is the one request that needs no Origin with the cookie: only a script can send it.
    for (const origin of ["http://attacker.example", `http://localhost:${launcher.port + 1}`]) {
      const preflight = await request("OPTIONS", "/api/session", {
        host: host(),
        origin,
        "access-control-request-method": "DELETE",
        "access-control-request-headers": "authorization",
      });
      expect([origin, preflight.headers["access-control-allow-origin"], preflight.headers["access-control-allow-headers"]]).toEqual([origin, undefined, undefined]);
    }
    // And a browser's DELETE always carries its Origin: from another origin it is refused, whatever else it carries.
    const signedIn = await request("POST", "/api/session", { host: host(), origin: `http://127.0.0.1:${launcher.port}`, "content-type": "application/json" }, JSON.stringify({ token: VIEWER_TOKEN }));
    const cookie = (signedIn.headers["set-cookie"]?.[0] ?? "").split(";")[0]!;
    const out = await request("DELETE", "/api/session", { host: host(), cookie, origin: "http://attacker.example", authorization: "Bearer anything" });
    expect(out.status).toBe(403);
  });

  it("checks Origin against the console's own origins, not against the Host header", async () => {
    const signIn = (origin: string, hostHeader = host()) =>
      request("POST", "/api/session", { host: hostHeader, origin, "content-type": "application/json" }, JSON.stringify({ token: VIEWER_TOKEN }));
    expect((await signIn(`http://127.0.0.1:${launcher.port}`)).status).toBe(200);
    expect((await signIn(`http://localhost:${launcher.port}`, `localhost:${launcher.port}`)).status).toBe(200);
    const otherApp = await signIn("http://localhost:9999");
    expect(otherApp.status).toBe(403);
    expect(json(otherApp).error?.code).toBe("forbidden");
  });

  it("puts the security headers on every page, route, error and static file, with a fresh nonce per page", async () => {
    const page = await request("GET", "/login", { host: host() });
    const policy = String(page.headers["content-security-policy"]);
    const nonce = /'nonce-([^']+)'/.exec(policy)?.[1];
    expect(nonce).toBeTruthy();
    expect(policy).toContain("frame-ancestors 'none'");
    expect(policy).not.toContain("unsafe-eval");
    expect(policy).not.toMatch(/script-src[^;]*'unsafe-inline'/);
    // Next.js puts the nonce on the scripts it renders, so the page still runs under the policy.
    const scripts = [...page.text.matchAll(/<script\b[^>]*>/g)].map((m) => m[0]);
    expect(scripts.length).toBeGreaterThan(0);
    for (const tag of scripts) expect(tag).toContain(`nonce="${nonce}"`);
    const again = await request("GET", "/login", { host: host() });
    expect(String(again.headers["content-security-policy"])).not.toContain(nonce!);

    const chunk = /src="(\/_next\/static\/[^"]+\.js)"/.exec(page.text)?.[1];
    expect(chunk).toBeTruthy();
    const answers: Array<[string, RawResponse]> = [];
    for (const path of ["/", "/audit", "/demo", "/locks/lock%3Aorders", "/login?next=/audit", "/no-such-page", chunk!, "/api/health", "/api/locks", "/metrics", "/api/nope", "/api/locks/stream"]) {
      answers.push([`GET ${path}`, await request("GET", path, { host: host(), authorization: `Bearer ${VIEWER_TOKEN}` })]);
    }
    answers.push(["PUT /api/locks", await request("PUT", "/api/locks", { host: host() })]);
    answers.push(["POST /api/session (a body)", await request("POST", "/api/session", { host: host(), "content-type": "application/json" }, JSON.stringify({ token: "wrong" }))]);
    answers.push(["POST /api/nope (a body)", await request("POST", "/api/nope", { host: host(), "content-type": "application/json" }, "{}")]);
    // A page asked for with a body would skip the proxy (its host check and headers): refused, with the headers.
    const pageWithBody = await request("GET", "/audit", { host: host(), "content-type": "text/plain" }, "x");
    expect(pageWithBody.status).toBe(400);
    expect(JSON.parse(pageWithBody.text)).toEqual({ error: { code: "bad_request", message: "A page request carries no body; send GET /audit without one." } });
    answers.push(["GET /audit (a body)", pageWithBody]);
    for (const [what, res] of answers) {
      expect(res.headers["x-content-type-options"], what).toBe("nosniff");
      expect(res.headers["referrer-policy"], what).toBe("no-referrer");
      expect(res.headers["x-frame-options"], what).toBe("DENY");
      expect(String(res.headers["content-security-policy"]), what).toContain("frame-ancestors 'none'");
      // The public origin is not https here: no HSTS (it would pin plain-http localhost to https).
      expect(res.headers["strict-transport-security"], what).toBeUndefined();
    }
    const stream = answers.find(([what]) => what === "GET /api/locks/stream")![1];
    expect(stream.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(stream.text.length).toBeGreaterThan(0);
  });

  it("answers OPTIONS * for the server and refuses GET * with JSON, never 500", async () => {
    const options = await rawExchange(`OPTIONS * HTTP/1.1\r\nHost: ${host()}\r\nConnection: close\r\n\r\n`);
    expect(options).toMatch(/^HTTP\/1\.1 204 /);
    expect(options).toMatch(/\r\nallow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n/i);
    for (const method of ["GET", "POST", "HEAD"]) {
      const res = await rawExchange(`${method} * HTTP/1.1\r\nHost: ${host()}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
      expect(res, method).toMatch(/^HTTP\/1\.1 400 /);
      if (method !== "HEAD") expect(res.slice(res.indexOf("\r\n\r\n") + 4)).toContain('"code":"bad_request"');
    }
    const absolute = await rawExchange(`GET http://attacker.example/api/locks HTTP/1.1\r\nHost: ${host()}\r\nConnection: close\r\n\r\n`);
    expect(absolute).toMatch(/^HTTP\/1\.1 400 /);
  });

  it("answers what Node.js's own parser refuses in JSON with the security headers, not a bare 400", async () => {
    const cases: Array<[string, string, number, string]> = [
      ["no Host", "GET /api/health HTTP/1.1\r\nConnection: close\r\n\r\n", 400, "bad_request"],
      ["raw non-ASCII in the path", "GET /api/locks/lock:\u00e9\u00ff HTTP/1.1\r\nHost: HOST\r\nConnection: close\r\n\r\n", 400, "bad_request"],
      ["not HTTP", "HELLO THERE\r\n\r\n", 400, "bad_request"],
      ["a method this server does not know", "FOO /api/health HTTP/1.1\r\nHost: HOST\r\nConnection: close\r\n\r\n", 405, "method_not_allowed"],
      // A proxy tunnel (this server is none): no request handler sees it.
      ["CONNECT", "CONNECT /api/locks HTTP/1.1\r\nHost: HOST\r\n\r\n", 405, "method_not_allowed"],
      ["headers over the limit", `GET /api/health HTTP/1.1\r\nHost: HOST\r\nX-Big: ${"x".repeat(20_000)}\r\n\r\n`, 431, "headers_too_large"],
      // Only the first of two would be checked.
      ["two Host headers", "GET /api/health HTTP/1.1\r\nHost: HOST\r\nHost: attacker.example\r\nConnection: close\r\n\r\n", 400, "bad_request"],
      ["HTTP/1.0 without Host", "GET /api/health HTTP/1.0\r\n\r\n", 400, "bad_request"],
      ["a Content-Length that is no number", "POST /api/session HTTP/1.1\r\nHost: HOST\r\nContent-Length: abc\r\n\r\n", 400, "bad_request"],
      ["Content-Length twice", "POST /api/session HTTP/1.1\r\nHost: HOST\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nabcde", 400, "bad_request"],
      ["Content-Length and Transfer-Encoding", "POST /api/session HTTP/1.1\r\nHost: HOST\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "bad_request"],
      // Paths Next.js would redirect or resolve into another route, or another lock's name.
      ["a backslash in the path", "POST /api/locks/lock:q\\..\\lock:v/release HTTP/1.1\r\nHost: HOST\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 400, "bad_request"],
      ["an encoded dot segment", "GET /api/locks/%2E%2E/history HTTP/1.1\r\nHost: HOST\r\nConnection: close\r\n\r\n", 400, "bad_request"],
      ["a tab in the path (read as nothing by URL parsers: `.\t.` would become `..`)", "GET /api/locks/.\t./health HTTP/1.1\r\nHost: HOST\r\nConnection: close\r\n\r\n", 400, "bad_request"],
      ["a double slash", "POST /api/locks/lock:q//release HTTP/1.1\r\nHost: HOST\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", 400, "bad_request"],
      ["a trailing slash", "GET /api/locks/ HTTP/1.1\r\nHost: HOST\r\nConnection: close\r\n\r\n", 404, "not_found"],
    ];
    for (const [what, bytes, status, code] of cases) {
      const res = await rawExchange(bytes.replaceAll("HOST", host()));
      expect(res.slice(0, 12), what).toBe(`HTTP/1.1 ${status}`);
      const head = res.slice(0, res.indexOf("\r\n\r\n"));
      expect(head, what).toMatch(/\r\ncontent-type: application\/json\r\n/i);
      expect(head, what).toMatch(/\r\nx-content-type-options: nosniff\r\n/i);
      expect(head, what).toMatch(/\r\ncontent-security-policy: default-src 'none'/i);
      const error = (JSON.parse(res.slice(head.length + 4)) as { error: { code: string; message: string } }).error;
      expect(error.code, what).toBe(code);
      expect(error.message.length, what).toBeGreaterThan(10);
      if (what.includes("Content-Length")) expect(error.message, what).toMatch(/Content-Length/);
      if (what.includes("Transfer-Encoding")) expect(error.message, what).toMatch(/Transfer-Encoding/);
    }
    // OPTIONS on a page or a static file says what pages answer (Next.js: 400 on a page, 500 on a file).
    for (const path of ["/", "/login", "/icon.svg"]) {
      const res = await rawExchange(`OPTIONS ${path} HTTP/1.1\r\nHost: ${host()}\r\nConnection: close\r\n\r\n`);
      expect(res.slice(0, 12), path).toBe("HTTP/1.1 204");
      expect(res, path).toMatch(/\r\nallow: GET, HEAD, OPTIONS\r\n/i);
    }
  });

  it("serves a request that asks to switch protocols (h2c, WebSocket) as the HTTP/1.1 request it is, and refuses broken query strings", async () => {
    for (const upgrade of ["h2c", "websocket"]) {
      // (After another request: the server's first request is where Next.js would start listening for upgrades.)
      await request("GET", "/api/health", { host: host() });
      const res = await rawExchange(`GET /api/health HTTP/1.1\r\nHost: ${host()}\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: ${upgrade}\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n`);
      expect(res.slice(0, 12), upgrade).toBe("HTTP/1.1 200");
      expect(res).toContain('"status"');
    }
    for (const [target, message] of [
      ["/api/locks?q=%ZZ", /query string is not valid URL encoding: `%ZZ`/],
      ["/api/locks?q=%ED%A0%80", /query string is not valid URL encoding: its %XX escapes do not form UTF-8 text/],
      ["/api/locks?limit=0x10", /limit: must be a whole number, in decimal digits/],
      ["/api/locks/groups?limit=1e3", /limit: must be a whole number, in decimal digits/],
      ["/api/locks?group=a&offset=%2B5", /offset: must be a whole number, in decimal digits/],
    ] as const) {
      const res = await request("GET", target, { host: host(), authorization: `Bearer ${VIEWER_TOKEN}` });
      expect([target, res.status]).toEqual([target, 400]);
      expect(res.text, target).toMatch(message);
    }
  });

  it("counts a client that hangs up mid-body as 499, not as a server error, and logs no error", async () => {
    const metric = async () => {
      const text = (await request("GET", "/metrics", { host: host() })).text;
      return text.split("\n").filter((line) => line.startsWith('lockscope_http_requests_total{route="POST /api/session"'));
    };
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect(launcher.port, "127.0.0.1", () => {
        socket.write(`POST /api/session HTTP/1.1\r\nHost: ${host()}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"token":"abc`);
      });
      socket.on("error", reject);
      // The server has the headers and part of the body once the route has started reading: then hang up.
      void until("the partial body reached the server", () => socket.bytesWritten > 0 && socket.writableLength === 0).then(() => {
        socket.destroy();
        resolve();
      });
    });
    const lines = await until("the abandoned request is counted", async () => {
      const found = await metric();
      return found.some((line) => line.includes('status="499"')) ? found : null;
    });
    expect(lines.filter((line) => /status="5\d\d"/.test(line))).toEqual([]);
    expect(launcher.output()).not.toMatch(/Error: aborted|unhandled error/);
  });

  it("signs a session out on every console over the same nodes", async () => {
    const signedIn = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name: "dana" } });
    const cookie = (signedIn.headers.get("set-cookie") ?? "").split(";")[0]!;
    const onOther = () => request("GET", "/api/session", { host: host(), cookie });
    expect((await onOther()).status).toBe(200);
    expect((await call(session.DELETE, "DELETE", "/api/session", { token: null, headers: { cookie } })).status).toBe(204);
    // The other console trusts a "not signed out" answer for a moment, then asks the nodes again.
    await until("the other console refuses the signed-out session", async () => (await onOther()).status === 401);
  });
});
