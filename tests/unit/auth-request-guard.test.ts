import { describe, expect, it } from "vitest";
import { hostRules } from "@/lib/host-rules";
import { checkHost, checkRequestLine, hostHeaders } from "@/lib/request-guard";

describe("raw request line guard", () => {
  it("lets well-formed requests through", () => {
    for (const [method, url] of [
      ["GET", "/api/locks/lock%3Aorders%2F42"],
      ["POST", "/api/locks/lock%3A%C3%A9t%C3%A9/release"],
      ["GET", "/api/audit?resource=lock%3Aorders%2F42&actor=al+ice"],
      ["HEAD", "/audit"],
      // Dots inside a name are no dot segment.
      ["GET", "/api/locks/lock%3A..%2Fx"],
      ["GET", "/api/locks/.lock"],
    ] as const) {
      expect(checkRequestLine(method, url), `${method} ${url}`).toBeNull();
    }
  });

  it("refuses broken percent-encoding in the path with a 400 that says so", () => {
    for (const url of ["/api/locks/%E0%A4%A/release", "/api/locks/%ZZ/release", "/api/locks/%/release", "/api/locks/lock%3A%FF", "/%C3"]) {
      const refused = checkRequestLine("POST", url);
      expect(refused?.status, url).toBe(400);
      expect(refused?.body?.error.message, url).toMatch(/not valid URL encoding/);
    }
  });

  it("refuses broken percent-encoding in the query string with a 400 that says so", () => {
    for (const url of ["/api/audit?resource=%ZZ", "/api/locks?q=%", "/api/locks?q=%ED%A0%80", "/api/locks?q=a%C3#frag"]) {
      const refused = checkRequestLine("GET", url);
      expect(refused?.status, url).toBe(400);
      expect(refused?.body?.error.message, url).toMatch(/query string is not valid URL encoding/);
    }
  });

  it("refuses methods nobody serves with 405 and an Allow header", () => {
    for (const method of ["TRACE", "PROPFIND", "CONNECT", "get", undefined]) {
      const refused = checkRequestLine(method, "/api/audit");
      expect(refused?.status).toBe(405);
      expect(refused?.headers.Allow).toBe("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
    }
  });

  it("answers OPTIONS * for the whole server and refuses * and absolute targets for anything else", () => {
    const options = checkRequestLine("OPTIONS", "*");
    expect(options?.status).toBe(204);
    expect(options?.headers.Allow).toBe("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS");
    for (const [method, url] of [["GET", "*"], ["POST", "*"], ["HEAD", "*"], ["GET", "http://evil.example/api/locks"], ["GET", "api/health"]] as const) {
      const refused = checkRequestLine(method, url);
      expect(refused?.status, `${method} ${url}`).toBe(400);
      expect(refused?.body?.error.code).toBe("bad_request");
      expect(refused?.headers["X-Content-Type-Options"]).toBe("nosniff");
    }
  });

  it("refuses a page or static file asked for with a body (it would skip the proxy's host check and headers), not an API request", () => {
    for (const [method, url] of [["GET", "/audit"], ["HEAD", "/"], ["GET", "/_next/static/chunks/app.js"]] as const) {
      const refused = checkRequestLine(method, url, true);
      expect(refused?.status, `${method} ${url}`).toBe(400);
      expect(refused?.body?.error.message).toBe(`A page request carries no body; send ${method} ${url} without one.`);
      expect(refused?.headers["X-Frame-Options"]).toBe("DENY");
      expect(checkRequestLine(method, url, false), `${method} ${url} without a body`).toBeNull();
    }
    expect(checkRequestLine("POST", "/api/session", true)).toBeNull();
    expect(checkRequestLine("GET", "/metrics", true)).toBeNull();
  });

  it("refuses, as sent, a path that Next.js or a client would turn into another (another route, another lock's name)", () => {
    for (const url of ["/api/locks/lock:q\\..\\lock:v/release", "/api/locks/%2e%2e/release", "/api/locks/%2E/history", "/api/locks/../health", "/api/locks/lock%3Ax/./release", "/audit/..", "/api/locks/lock:q//release", "//api/health"]) {
      const refused = checkRequestLine("POST", url);
      expect(refused?.status, url).toBe(400);
      expect(refused?.body?.error.code, url).toBe("bad_request");
      expect(refused?.body?.error.message, url).toMatch(/backslash|segment|`\/\/`/);
    }
    for (const url of ["/api/locks/", "/api/locks/lock%3Ax/release/", "/metrics/"]) {
      const refused = checkRequestLine("GET", url);
      expect(refused?.status, url).toBe(404);
      expect(refused?.body?.error.message, url).toMatch(/drop the trailing slash/);
    }
  });

  it("answers OPTIONS on a page or a static file with what pages answer", () => {
    for (const url of ["/", "/login", "/_next/static/chunks/app.js"]) {
      const options = checkRequestLine("OPTIONS", url);
      expect(options?.status, url).toBe(204);
      expect(options?.headers.Allow, url).toBe("GET, HEAD, OPTIONS");
    }
  });

  it("checks the Host first: one, naming this console (421 otherwise)", () => {
    const rules = hostRules({ bindHost: "127.0.0.1", port: 3000, publicOrigin: null, allowedHosts: ["console.example"] });
    expect(checkHost(rules, ["localhost:3000"])).toBeNull();
    expect(checkHost(rules, ["console.example"])).toBeNull();
    const foreign = checkHost(rules, ["evil.example"]);
    expect(foreign?.status).toBe(421);
    expect(foreign?.body?.error).toMatchObject({ code: "misdirected_request" });
    expect(foreign?.body?.error.message).toContain('"evil.example"');
    expect(checkHost(rules, [])?.body?.error.message).toBe("The request needs a Host header.");
    // Two Host headers: only the first would be checked by what follows.
    expect(checkHost(rules, hostHeaders(["Host", "localhost", "Accept", "*/*", "host", "evil.example"]))?.body?.error.message).toBe("The request has 2 Host headers; send one.");
  });
});
