import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type * as AuthModule from "@/server/auth";
import type { ApiError } from "@/server/errors";

const OPERATOR = "unit-operator-token-0123456789";
const VIEWER = "unit-viewer-token-0123456789ab";

/** Drops what a previous test file may have left on globalThis, so the configuration is read afresh. */
function resetGlobals(): void {
  const store = globalThis as unknown as Record<symbol, unknown>;
  for (const name of ["config", "secrets", "wrong-token-limiter", "host-rules", "launcher-config"]) delete store[Symbol.for(`lockscope.${name}`)];
}

function thrown(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (error) {
    return error as ApiError;
  }
  throw new Error("expected a throw");
}

async function rejected(promise: Promise<unknown>): Promise<ApiError> {
  try {
    await promise;
  } catch (error) {
    return error as ApiError;
  }
  throw new Error("expected a rejection");
}

describe("authentication", () => {
  let auth: typeof AuthModule;

  beforeAll(async () => {
    resetGlobals();
    Object.assign(process.env, {
      LOCKSCOPE_OPERATOR_TOKEN: OPERATOR,
      LOCKSCOPE_VIEWER_TOKEN: VIEWER,
      LOCKSCOPE_SESSION_SECRET: "klmUoDxjEdsEPAsnnhpwNmCzGMpBZ2QKyxz4aGHF4uk=",
      LOCKSCOPE_DATA_DIR: mkdtempSync(path.join(os.tmpdir(), "lockscope-auth-")),
    });
    delete process.env.LOCKSCOPE_PUBLIC_ORIGIN;
    auth = await import("@/server/auth");
  });

  it("compares tokens exactly, whatever their lengths", () => {
    expect(auth.tokensEqual(OPERATOR, OPERATOR)).toBe(true);
    expect(auth.tokensEqual(`${OPERATOR}x`, OPERATOR)).toBe(false);
    expect(auth.tokensEqual(OPERATOR.slice(0, -1), OPERATOR)).toBe(false);
    expect(auth.tokensEqual("", OPERATOR)).toBe(false);
    expect(auth.roleForToken(OPERATOR)).toBe("operator");
    expect(auth.roleForToken(VIEWER)).toBe("viewer");
    expect(auth.roleForToken("guess")).toBeNull();
  });

  it("authenticates bearer tokens, refuses a wrong one with 401 and never falls back to open reading", async () => {
    const bearer = (token: string) => new Headers({ authorization: `Bearer ${token}`, "x-lockscope-client-ip": "10.7.0.1" });
    await expect(auth.authenticate(bearer(OPERATOR))).resolves.toMatchObject({ role: "operator", via: "bearer" });
    await expect(auth.authenticate(new Headers({ authorization: `Bearer ${VIEWER}`, "x-lockscope-actor": "dana" }))).resolves.toMatchObject({ role: "viewer", actor: "dana" });
    expect((await rejected(auth.authenticate(bearer("wrong-token")))).status).toBe(401);
    expect((await rejected(auth.authenticate(new Headers({ authorization: "Bearer" })))).status).toBe(401);
    // Another scheme is not the console's (a proxy's Basic credentials passed on): no credentials, never a role.
    await expect(auth.authenticate(new Headers({ authorization: "Basic abc" }))).resolves.toBeNull();
    // A viewer token is configured: no credentials means nobody.
    await expect(auth.authenticate(new Headers())).resolves.toBeNull();
  });

  it("limits wrong bearer tokens per address, and never refuses the right one", async () => {
    const from = (ip: string, token: string) => new Headers({ authorization: `Bearer ${token}`, "x-lockscope-client-ip": ip });
    for (let i = 0; i < 5; i++) expect((await rejected(auth.authenticate(from("10.7.0.2", `guess-number-${i}`)))).status).toBe(401);
    const limited = await rejected(auth.authenticate(from("10.7.0.2", "guess-number-5")));
    expect(limited.status).toBe(429);
    expect(Number(limited.headers?.["Retry-After"])).toBeGreaterThan(0);
    await expect(auth.authenticate(from("10.7.0.2", OPERATOR))).resolves.toMatchObject({ role: "operator" });
    expect((await rejected(auth.authenticate(from("10.7.0.3", "guess-number-6")))).status).toBe(401);
  });

  it("counts an IPv6 client's wrong tokens by its /64 network, however it rotates or writes its address", async () => {
    const from = (ip: string, token: string) => new Headers({ authorization: `Bearer ${token}`, "x-lockscope-client-ip": ip });
    // One host on one network holds the whole /64: a new address for each guess is still the same guesser.
    const rotating = ["2001:db8:7:1::1", "2001:db8:7:1::2", "2001:DB8:7:1:0:0:0:3", "2001:db8:7:1:ffff:ffff:ffff:ffff", "2001:0db8:0007:0001::abcd"];
    for (const [i, ip] of rotating.entries()) expect((await rejected(auth.authenticate(from(ip, `v6-guess-${i}`)))).status, ip).toBe(401);
    expect((await rejected(auth.authenticate(from("2001:db8:7:1::99", "v6-guess-5")))).status).toBe(429);
    // The right token is still accepted from that network, and another network is not held to its count.
    await expect(auth.authenticate(from("2001:db8:7:1::99", OPERATOR))).resolves.toMatchObject({ role: "operator" });
    expect((await rejected(auth.authenticate(from("2001:db8:7:2::1", "v6-guess-6")))).status).toBe(401);
  });

  it("checks roles: 401 without a principal, 403 for a viewer acting as operator", () => {
    expect(thrown(() => auth.requireRole(null, "viewer")).status).toBe(401);
    expect(thrown(() => auth.requireRole({ role: "viewer", actor: "v", via: "bearer" }, "operator")).status).toBe(403);
    expect(thrown(() => auth.requireRole({ role: "viewer", actor: "anonymous", via: "open" }, "operator")).status).toBe(401);
    expect(auth.requireRole({ role: "operator", actor: "o", via: "session" }, "operator").role).toBe("operator");
  });

  it("signs session cookies that expire and cannot be altered", async () => {
    const now = Date.UTC(2025, 0, 1);
    const value = await auth.createSessionCookieValue("viewer", "erin", now);
    const verified = await auth.verifySessionCookieValue(value, now);
    expect(verified).toMatchObject({ role: "viewer", actor: "erin", via: "session" });
    expect(verified?.session?.expiresAtMs).toBe(now + auth.SESSION_TTL_SECONDS * 1000);
    const other = await auth.verifySessionCookieValue(await auth.createSessionCookieValue("viewer", "erin", now), now);
    expect(other?.session?.id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(other?.session?.id).not.toBe(verified?.session?.id);
    expect(await auth.verifySessionCookieValue(value, now + auth.SESSION_TTL_SECONDS * 1000 + 1000)).toBeNull();
    const [header64, data, mac] = value.split(".") as [string, string, string];
    const promoted = Buffer.from(Buffer.from(data, "base64url").toString("utf8").replace('"r":"viewer"', '"r":"operator"')).toString("base64url");
    expect(promoted).not.toBe(data);
    expect(await auth.verifySessionCookieValue(`${header64}.${promoted}.${mac}`, now)).toBeNull();
    expect(await auth.verifySessionCookieValue(`${header64}.${data}.${mac.slice(0, -2)}AA`, now)).toBeNull();
    // An unsigned token (`alg: none`) carrying a valid payload is refused.
    const none = Buffer.from(JSON.stringify({ alg: "none" })).toString("base64url");
    expect(await auth.verifySessionCookieValue(`${none}.${data}.`, now)).toBeNull();
    expect(await auth.verifySessionCookieValue("garbage", now)).toBeNull();
    const header = auth.sessionCookieHeader(value, false);
    expect(header).toMatch(/HttpOnly/);
    expect(header).toMatch(/SameSite=Strict/);
    expect(header).not.toMatch(/Secure/);
    expect(auth.sessionCookieHeader(value, true)).toMatch(/; Secure$/);
    expect(auth.clearSessionCookieHeaders(false)).toEqual([expect.stringMatching(/^lockscope_session=; .*Max-Age=0/)]);
  });

  it("puts nothing in a session cookie that would let whoever reads it check a guess of the token offline", async () => {
    const tokenMark = async () => {
      const value = await auth.createSessionCookieValue("operator", "erin");
      const payload = JSON.parse(Buffer.from(value.split(".")[1]!, "base64url").toString("utf8")) as { f: string };
      return payload.f;
    };
    const before = await tokenMark();
    // The same operator token on a console with another session key: what the cookie carries of the token differs,
    // so the token alone (a guess) cannot reproduce it.
    const secret = process.env.LOCKSCOPE_SESSION_SECRET;
    try {
      resetGlobals();
      process.env.LOCKSCOPE_SESSION_SECRET = "ZE1GAa7aIySZbmlr1d1gQaJBZdpHXkdk6GGlCW9l48g=";
      expect(await tokenMark()).not.toBe(before);
    } finally {
      resetGlobals();
      process.env.LOCKSCOPE_SESSION_SECRET = secret;
    }
    expect(await tokenMark()).toBe(before);
  });

  it("keeps actor names printable and short", () => {
    expect(auth.cleanActor("alice", "operator")).toBe("alice");
    expect(auth.cleanActor("  Zoë O. ", "operator")).toBe("Zoë O.");
    expect(auth.cleanActor("<script>", "operator")).toBe("operator");
    expect(auth.cleanActor("x".repeat(65), "viewer")).toBe("viewer");
    expect(auth.cleanActor("line\nbreak", "viewer")).toBe("viewer");
    expect(auth.cleanActor(null, "viewer")).toBe("viewer");
  });

  it("accepts only this console's Origin on mutating requests, and a cookie only with an Origin", () => {
    const headers = (h: Record<string, string>) => new Headers({ host: "127.0.0.1:3000", ...h });
    expect(() => auth.checkOrigin(headers({ origin: "http://127.0.0.1:3000" }), "session")).not.toThrow();
    expect(() => auth.checkOrigin(headers({ origin: "http://localhost:3000" }), "session")).not.toThrow();
    expect(thrown(() => auth.checkOrigin(headers({ origin: "http://evil.example" }), "bearer")).status).toBe(403);
    // DNS rebinding: Host and Origin both name the attacker's domain; they agree, and it is still refused.
    expect(thrown(() => auth.checkOrigin(new Headers({ host: "attacker.example:3000", origin: "http://attacker.example:3000" }), "session")).status).toBe(403);
    // Another local app on another port is another origin.
    expect(thrown(() => auth.checkOrigin(headers({ origin: "http://localhost:9999" }), "session")).status).toBe(403);
    expect(thrown(() => auth.checkOrigin(headers({ origin: "null" }), "session")).status).toBe(403);
    expect(thrown(() => auth.checkOrigin(headers({}), "session")).status).toBe(403);
    expect(() => auth.checkOrigin(headers({}), "bearer")).not.toThrow();
  });

  it("limits distinct wrong tokens per address and says how long to wait (in memory without lock nodes)", async () => {
    const { WrongTokenLimiter } = await import("@/server/wrong-token-limiter");
    const limiter = new WrongTokenLimiter(null, 3, 60);
    for (let i = 0; i < 3; i++) expect(await limiter.fail("10.0.0.1", `fp${i}`)).toEqual({ retryAfterSeconds: 0, limit: null, crossed: i === 2 ? "address" : null });
    const limited = await limiter.fail("10.0.0.1", "fp3");
    expect(limited.retryAfterSeconds).toBeGreaterThan(0);
    expect(limited.retryAfterSeconds).toBeLessThanOrEqual(60);
    expect([limited.limit, limited.crossed]).toEqual(["address", null]);
    expect((await limiter.fail("10.0.0.2", "fp0")).retryAfterSeconds).toBe(0);
    // One stale token sent again and again is one wrong token, not a guesser.
    for (let i = 0; i < 10; i++) await limiter.fail("10.0.0.3", "stale");
    expect((await limiter.fail("10.0.0.3", "another")).retryAfterSeconds).toBe(0);
  });

  it("limits distinct wrong tokens from all addresses together, each address staying under its own limit", async () => {
    const { WrongTokenLimiter } = await import("@/server/wrong-token-limiter");
    const limiter = new WrongTokenLimiter(null, 3, 60, 6);
    const verdicts = [];
    for (let a = 0; a < 3; a++) for (let i = 0; i < 2; i++) verdicts.push(await limiter.fail(`10.1.0.${a}`, `fp${a}-${i}`));
    expect(verdicts.map((v) => [v.retryAfterSeconds, v.crossed])).toEqual([[0, null], [0, null], [0, null], [0, null], [0, null], [0, "everyone"]]);
    // A new address's first wrong token waits for everyone's window to end.
    const limited = await limiter.fail("10.1.0.9", "fresh");
    expect(limited.limit).toBe("everyone");
    expect(limited.retryAfterSeconds).toBeGreaterThan(0);
    expect(limited.retryAfterSeconds).toBeLessThanOrEqual(60);
  });
});
