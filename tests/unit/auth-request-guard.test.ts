import { describe, expect, it } from "vitest";
import { checkRequestLine } from "@/lib/request-guard";

describe("raw request line guard", () => {
  it("lets well-formed requests through", () => {
    for (const [method, url] of [
      ["GET", "/api/locks/lock%3Aorders%2F42"],
      ["POST", "/api/locks/lock%3A%C3%A9t%C3%A9/release"],
      ["GET", "/api/audit?resource=lock%3Aorders%2F42&actor=al+ice"],
      ["OPTIONS", "/"],
      ["HEAD", "/audit"],
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
});
