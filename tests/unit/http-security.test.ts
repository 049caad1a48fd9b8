import { describe, expect, it } from "vitest";
import { API_ROUTES, matchApiRoute, refuseBeforeRouting } from "@/lib/api-routes";
import { hostRules, isAllowedHost, isAllowedOrigin } from "@/lib/host-rules";
import { sameOriginPath } from "@/lib/safe-redirect";
import { pageContentSecurityPolicy, setSecurityHeaders } from "@/lib/security-headers";

describe("the sign-in redirect", () => {
  const origin = "http://127.0.0.1:3000";

  it("keeps a path of the console, with its query and fragment", () => {
    expect(sameOriginPath("/audit?resource=orders#top", origin)).toBe("/audit?resource=orders#top");
    expect(sameOriginPath("/locks/lock%3Aorders%2F42", origin)).toBe("/locks/lock%3Aorders%2F42");
  });

  it("falls back to / for anything a browser would take to another host", () => {
    for (const next of ["/\\evil.example", "/\t/evil.example", "//evil.example", "/.//evil.example", "/a/../..//evil.example", "\\\\evil.example", "https://evil.example/", "javascript:alert(1)", "", null, undefined, "evil.example"]) {
      expect(sameOriginPath(next, origin), JSON.stringify(next)).toBe("/");
    }
  });
});

describe("host rules", () => {
  const rules = hostRules({ bindHost: "127.0.0.1", port: 3000, publicOrigin: null, allowedHosts: ["lockscope.internal"] });

  it("answers to localhost, the loopback addresses, the bind address and ALLOWED_HOSTS, on any port", () => {
    for (const host of ["localhost:3000", "127.0.0.1:3000", "[::1]:3000", "LOCALHOST", "lockscope.internal:8080", "localhost.:3000", "lockscope.internal."]) expect(isAllowedHost(rules, host), host).toBe(true);
    for (const host of ["attacker.example:3000", "localhost.attacker.example", "evil@localhost", "localhost/x", "", null, "127.0.0.1:3000, evil", "localhost..", "attacker.example."]) {
      expect(isAllowedHost(rules, host), String(host)).toBe(false);
    }
  });

  it("accepts as Origin only the console's own origins, never one a Host header makes up", () => {
    expect(isAllowedOrigin(rules, "http://127.0.0.1:3000")).toBe(true);
    expect(isAllowedOrigin(rules, "http://localhost:3000")).toBe(true);
    expect(isAllowedOrigin(rules, "http://lockscope.internal:3000")).toBe(true);
    for (const origin of ["http://localhost:9999", "https://127.0.0.1:3000", "http://attacker.example:3000", "null", "http://127.0.0.1:3000/", "http://u@127.0.0.1:3000"]) {
      expect(isAllowedOrigin(rules, origin), origin).toBe(false);
    }
  });

  it("adds the public origin, and the machine's addresses when bound to a wildcard", () => {
    const proxied = hostRules({ bindHost: "0.0.0.0", port: 3000, publicOrigin: "https://lockscope.example.com", allowedHosts: [], interfaceAddresses: ["10.0.0.5", "fe80::1%eth0"] });
    expect(isAllowedHost(proxied, "lockscope.example.com")).toBe(true);
    expect(isAllowedHost(proxied, "10.0.0.5:3000")).toBe(true);
    expect(isAllowedHost(proxied, "[fe80::1]:3000")).toBe(true);
    expect(isAllowedHost(proxied, "0.0.0.0:3000")).toBe(false);
    expect(isAllowedOrigin(proxied, "https://lockscope.example.com")).toBe(true);
    expect(isAllowedOrigin(proxied, "http://lockscope.example.com")).toBe(false);
  });
});

describe("routing before the routes", () => {
  it("names each route once and prefers a literal segment over a parameter", () => {
    expect(new Set(API_ROUTES.map((r) => r.pattern)).size).toBe(API_ROUTES.length);
    expect(matchApiRoute("/api/locks/stream")?.pattern).toBe("/api/locks/stream");
    expect(matchApiRoute("/api/locks/lock%3Aa")?.pattern).toBe("/api/locks/[resource]");
    expect(matchApiRoute("/api/locks/lock%3Aa/release/")?.pattern).toBe("/api/locks/[resource]/release");
    expect(matchApiRoute("/api/locks/a/b")).toBeNull();
  });

  it("answers OPTIONS, unknown paths and unserved methods, and lets the rest through", () => {
    expect(refuseBeforeRouting("OPTIONS", "/api/session")).toMatchObject({ status: 204, allow: "GET, POST, DELETE, HEAD, OPTIONS" });
    expect(refuseBeforeRouting("GET", "/api/nope")).toMatchObject({ status: 404, code: "not_found" });
    expect(refuseBeforeRouting("PUT", "/api/locks")).toMatchObject({ status: 405, code: "method_not_allowed", allow: "GET, HEAD, OPTIONS" });
    expect(refuseBeforeRouting("POST", "/")).toMatchObject({ status: 405 });
    expect(refuseBeforeRouting("HEAD", "/metrics")).toBeNull();
    expect(refuseBeforeRouting("GET", "/locks/lock%3Aa")).toBeNull();
    expect(refuseBeforeRouting("POST", "/api/locks/lock%3Aa/release")).toBeNull();
  });
});

describe("the page policy", () => {
  it("allows scripts from the console or with the nonce, never eval outside development", () => {
    const production = pageContentSecurityPolicy({ nonce: "abc", development: false, https: false });
    expect(production).toContain("script-src 'self' 'nonce-abc'");
    expect(production).toContain("frame-ancestors 'none'");
    expect(production).not.toContain("unsafe-eval");
    expect(production).not.toContain("upgrade-insecure-requests");
    expect(pageContentSecurityPolicy({ nonce: "abc", development: true, https: false })).toContain("'unsafe-eval'");
    expect(pageContentSecurityPolicy({ nonce: "abc", development: false, https: true })).toContain("upgrade-insecure-requests");
  });

  it("adds HSTS only when the public origin is https", () => {
    const plain = new Headers();
    setSecurityHeaders(plain, { https: false });
    expect(plain.get("strict-transport-security")).toBeNull();
    expect(plain.get("content-security-policy")).toContain("default-src 'none'");
    const secure = new Headers();
    setSecurityHeaders(secure, { https: true, pagePolicy: "default-src 'self'" });
    expect(secure.get("strict-transport-security")).toBe("max-age=31536000");
    expect(secure.get("content-security-policy")).toBe("default-src 'self'");
  });
});
