import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as HealthModule from "@/app/api/health/route";
import type * as LocksModule from "@/app/api/locks/route";
import type * as SessionModule from "@/app/api/session/route";
import type { TestCluster } from "../support/redis";
import { call, OPERATOR_TOKEN, ORIGIN, setUpConsole, startLiveReconciled, tearDownConsole, VIEWER_TOKEN } from "../support/console";

const METRICS_TOKEN = "it-session-metrics-token-0123456789abcdef";

type SessionRoute = typeof SessionModule;
type HealthRoute = typeof HealthModule;
type LocksRoute = typeof LocksModule;

describe("sign-in, sessions and health", () => {
  let cluster: TestCluster;
  let session: SessionRoute;
  let health: HealthRoute;
  let locks: LocksRoute;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { METRICS_TOKEN } });
    session = await import("@/app/api/session/route");
    health = await import("@/app/api/health/route");
    locks = await import("@/app/api/locks/route");
    // The nodes' watchers have read the nodes (health says "degraded" while a node is still being read).
    await startLiveReconciled();
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("signs in with the operator token and the cookie then identifies the operator", async () => {
    const res = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name: "alice" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ role: "operator", actor: "alice" });
    const cookie = res.headers.get("set-cookie") ?? "";
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    expect(cookie).toMatch(/Max-Age=\d+/);
    const who = await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: cookie.split(";")[0]! } });
    expect(who.body).toMatchObject({ role: "operator", actor: "alice", via: "session" });
  });

  it("signs in with a token pasted with spaces or a line break around it (no token has any), and still refuses one with a space inside", async () => {
    const headers = { "x-lockscope-client-ip": "192.0.2.77" };
    for (const pasted of [`${OPERATOR_TOKEN} `, ` ${OPERATOR_TOKEN}`, `${OPERATOR_TOKEN}\n`, `\t${OPERATOR_TOKEN}\r\n`]) {
      const res = await call(session.POST, "POST", "/api/session", { token: null, headers, body: { token: pasted, name: "alice" } });
      expect([JSON.stringify(pasted), res.status]).toEqual([JSON.stringify(pasted), 200]);
      expect(res.body).toEqual({ role: "operator", actor: "alice" });
    }
    const inside = await call(session.POST, "POST", "/api/session", { token: null, headers, body: { token: `${OPERATOR_TOKEN.slice(0, 8)} ${OPERATOR_TOKEN.slice(8)}` } });
    expect(inside.status).toBe(401);
    const blank = await call(session.POST, "POST", "/api/session", { token: null, headers, body: { token: "   " } });
    expect(blank.status).toBe(422);
    expect(blank.body).toMatchObject({ error: { code: "unprocessable", message: expect.stringContaining("the token is required") as unknown } });
  });

  it("refuses a forged or tampered cookie", async () => {
    const res = await call(session.POST, "POST", "/api/session", { token: null, body: { token: VIEWER_TOKEN } });
    const value = (res.headers.get("set-cookie") ?? "").split(";")[0]!.split("=")[1]!;
    const [header, data, mac] = value.split(".");
    const forged = Buffer.from(JSON.stringify({ r: "operator", a: "mallory", exp: 9999999999, f: "x", jti: "A".repeat(22) })).toString("base64url");
    const who = await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: `lockscope_session=${header}.${forged}.${mac}` } });
    expect(who.status).toBe(401);
    expect(who.headers.get("www-authenticate")).toBe('Bearer realm="lockscope"');
    const viewer = await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: `lockscope_session=${header}.${data}.${mac}` } });
    expect(viewer.body).toMatchObject({ role: "viewer" });
  });

  it("refuses a name the audit log cannot carry with 422, rather than signing in as the role", async () => {
    for (const name of ["bell\u0007", "<script>", "tab\tname"]) {
      const res = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name } });
      expect([name, res.status]).toEqual([name, 422]);
      expect((res.body as { error: { message: string } }).error.message).toMatch(/letters, digits, spaces and \. _ @ - only/);
      expect(res.headers.get("set-cookie")).toBeNull();
    }
    // Too long is said as such (its letters are fine).
    const long = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name: "a".repeat(65) } });
    expect(long.status).toBe(422);
    expect((long.body as { error: { message: string } }).error.message).toMatch(/at most 64 characters/);
    expect((long.body as { error: { message: string } }).error.message).not.toMatch(/letters, digits/);
    // A blank name is no name: the actor is the role.
    const blank = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name: "  " } });
    expect(blank.body).toEqual({ role: "operator", actor: "operator" });
  });

  it("refuses a sign-in from another origin", async () => {
    const res = await call(session.POST, "POST", "/api/session", { token: null, origin: "http://evil.example", body: { token: OPERATOR_TOKEN } });
    expect(res.status).toBe(403);
    expect(res.headers.get("set-cookie")).toBeNull();
  });

  it("limits wrong tokens per client address with Retry-After, and never refuses the right token", async () => {
    const headers = { "x-lockscope-client-ip": "10.9.9.9" };
    for (let i = 0; i < 5; i++) {
      const res = await call(session.POST, "POST", "/api/session", { token: null, headers, body: { token: `wrong-token-number-${i}` } });
      expect(res.status).toBe(401);
    }
    const limited = await call(session.POST, "POST", "/api/session", { token: null, headers, body: { token: "wrong-token-number-5" } });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    // Whoever guesses from an address (or from behind the same proxy) cannot lock the operator out.
    const right = await call(session.POST, "POST", "/api/session", { token: null, headers, body: { token: OPERATOR_TOKEN } });
    expect(right.status).toBe(200);
    const other = await call(session.POST, "POST", "/api/session", { token: null, headers: { "x-lockscope-client-ip": "10.9.9.10" }, body: { token: "wrong-token-number-6" } });
    expect([other.status, other.headers.get("www-authenticate")]).toEqual([401, 'Bearer realm="lockscope"']);
  });

  it("names the scheme on every 401: a malformed Authorization header, the scrape token used elsewhere", async () => {
    for (const authorization of ["Basic Zm9vOmJhcg==", "Bearer", "Bearer a b"]) {
      const res = await call(locks.GET, "GET", "/api/locks", { token: null, headers: { authorization, "x-lockscope-client-ip": "10.9.9.12" } });
      expect([res.status, res.headers.get("www-authenticate")], authorization).toEqual([401, 'Bearer realm="lockscope"']);
    }
    const scrape = await call(locks.GET, "GET", "/api/locks", { token: METRICS_TOKEN, headers: { "x-lockscope-client-ip": "10.9.9.12" } });
    expect([scrape.status, scrape.headers.get("www-authenticate")]).toEqual([401, 'Bearer realm="lockscope"']);
  });

  it("counts wrong scrape tokens and the scrape token used to sign in against the same per-address limit", async () => {
    const metrics = await import("@/app/metrics/route");
    const headers = { "x-lockscope-client-ip": "10.9.9.13" };
    const signIn = (token: string) => call(session.POST, "POST", "/api/session", { token: null, headers, body: { token } });
    // The scrape token at sign-in is refused with a message of its own, and is one more token tried from here.
    const scrapeToken = await signIn(METRICS_TOKEN);
    expect(scrapeToken.status).toBe(401);
    expect(scrapeToken.body).toMatchObject({ error: { message: expect.stringContaining("METRICS_TOKEN") as unknown } });
    for (let i = 0; i < 2; i++) expect((await call(metrics.GET, "GET", "/metrics", { token: `guessed-scrape-${i}`, headers })).status).toBe(401);
    for (let i = 0; i < 2; i++) expect((await signIn(`guessed-sign-in-${i}`)).status).toBe(401);
    const limited = await signIn("guessed-sign-in-2");
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await call(metrics.GET, "GET", "/metrics", { token: "guessed-scrape-2", headers })).status).toBe(429);
    expect((await call(metrics.GET, "GET", "/metrics", { token: METRICS_TOKEN, headers })).status).toBe(200);
    expect((await signIn(OPERATOR_TOKEN)).status).toBe(200);
  });

  it("limits wrong bearer tokens too, and still accepts the right one", async () => {
    const from = (token: string) => ({ token, headers: { "x-lockscope-client-ip": "10.9.9.11" } });
    for (let i = 0; i < 5; i++) {
      const res = await call(locks.GET, "GET", "/api/locks", from(`guessed-bearer-${i}`));
      expect([res.status, res.headers.get("www-authenticate")]).toEqual([401, 'Bearer realm="lockscope"']);
    }
    const limited = await call(locks.GET, "GET", "/api/locks", from("guessed-bearer-5"));
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ error: { code: "rate_limited" } });
    expect((await call(locks.GET, "GET", "/api/locks", from(VIEWER_TOKEN))).status).toBe(200);
    // A health probe from that address, carrying a wrong token, is still answered: it reads no credentials.
    expect((await call(health.GET, "GET", "/api/health", from("guessed-bearer-6"))).status).toBe(200);
  });

  it("revokes the session on sign-out: a copy of the cookie no longer works, even after the nodes lose it", async () => {
    const signedIn = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name: "carol" } });
    const cookie = (signedIn.headers.get("set-cookie") ?? "").split(";")[0]!;
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie } })).status).toBe(200);
    const out = await call(session.DELETE, "DELETE", "/api/session", { token: null, headers: { cookie } });
    expect(out.status).toBe(204);
    expect(out.headers.get("set-cookie")).toMatch(/Max-Age=0/);
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie } })).status).toBe(401);
    const release = await call(locks.GET, "GET", "/api/locks", { token: null, headers: { cookie } });
    expect(release.status).toBe(401);
    // Every node holds the revocation until the session would have expired.
    for (const node of cluster.clients()) {
      const [, keys] = await node.scan("0", "MATCH", "lockscope:revoked-session:*", "COUNT", 1000);
      expect(keys.length).toBeGreaterThan(0);
      const ttl = await node.pttl(keys[0]!);
      expect(ttl).toBeGreaterThan(11 * 60 * 60 * 1000);
    }
    await cluster.flushAll();
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie } })).status).toBe(401);
  });

  it("signs the cookie's session out whatever other credentials come along: a bearer token, right or wrong", async () => {
    for (const bearer of [OPERATOR_TOKEN, VIEWER_TOKEN, "not-a-token-of-this-console"]) {
      const signedIn = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name: "dave" } });
      const cookie = (signedIn.headers.get("set-cookie") ?? "").split(";")[0]!;
      expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie } })).status).toBe(200);
      // A script's request (no Origin: only browsers send one, and none can add Authorization to another site's request unasked).
      const out = await call(session.DELETE, "DELETE", "/api/session", { token: bearer, origin: null, headers: { cookie, "x-lockscope-client-ip": "10.9.9.20" } });
      expect(out.status).toBe(204);
      expect(out.headers.get("set-cookie")).toMatch(/^lockscope_session=;.*Max-Age=0/);
      const after = await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie } });
      expect([bearer.slice(0, 12), after.status]).toEqual([bearer.slice(0, 12), 401]);
    }
  });

  it("signs out from an address past the wrong-token limit too: the bearer token beside the cookie is not read", async () => {
    const ip = "10.9.9.22";
    const signedIn = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name: "frank" } });
    const cookie = (signedIn.headers.get("set-cookie") ?? "").split(";")[0]!;
    for (let i = 0; i < 5; i++) await call(locks.GET, "GET", "/api/locks", { token: `guessed-before-sign-out-${i}`, headers: { "x-lockscope-client-ip": ip } });
    expect((await call(locks.GET, "GET", "/api/locks", { token: "guessed-before-sign-out-5", headers: { "x-lockscope-client-ip": ip } })).status).toBe(429);
    const out = await call(session.DELETE, "DELETE", "/api/session", { token: "guessed-before-sign-out-6", headers: { cookie, "x-lockscope-client-ip": ip } });
    expect(out.status).toBe(204);
    expect(out.headers.get("set-cookie")).toMatch(/Max-Age=0/);
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie } })).status).toBe(401);
    // A cookie alone still needs this console's Origin to sign out (a browser's request always carries it).
    const again = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name: "frank" } });
    const second = (again.headers.get("set-cookie") ?? "").split(";")[0]!;
    expect((await call(session.DELETE, "DELETE", "/api/session", { token: null, origin: null, headers: { cookie: second } })).status).toBe(403);
    expect((await call(session.DELETE, "DELETE", "/api/session", { token: null, origin: "http://evil.example", headers: { cookie: second } })).status).toBe(403);
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: second } })).status).toBe(200);
  });

  it("revokes the session a new sign-in replaces: the old cookie no longer works, the new one does", async () => {
    const first = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name: "erin" } });
    const old = (first.headers.get("set-cookie") ?? "").split(";")[0]!;
    // A failed sign-in changes nothing: the session it came with goes on.
    const wrong = await call(session.POST, "POST", "/api/session", { token: null, headers: { cookie: old, "x-lockscope-client-ip": "10.9.9.21" }, body: { token: "not-a-token-of-this-console" } });
    expect(wrong.status).toBe(401);
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: old } })).status).toBe(200);
    const again = await call(session.POST, "POST", "/api/session", { token: null, headers: { cookie: old }, body: { token: VIEWER_TOKEN, name: "erin" } });
    expect(again.status).toBe(200);
    const fresh = (again.headers.get("set-cookie") ?? "").split(";")[0]!;
    expect(fresh).not.toBe(old);
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: old } })).status).toBe(401);
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: fresh } })).body).toMatchObject({ role: "viewer", actor: "erin" });
  });

  it("with two session cookies (one set for a parent domain by a sibling site), signs both out and is signed in by the one still valid", async () => {
    const signIn = async (token: string, name: string, cookie?: string) => {
      const res = await call(session.POST, "POST", "/api/session", { token: null, ...(cookie ? { headers: { cookie } } : {}), body: { token, name } });
      expect(res.status).toBe(200);
      return (res.headers.get("set-cookie") ?? "").split(";")[0]!;
    };
    const whoIs = async (cookie: string) => (await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie } })).body;
    const planted = await signIn(VIEWER_TOKEN, "planted");
    const own = await signIn(OPERATOR_TOKEN, "gina");
    // The browser sends the older cookie first.
    const out = await call(session.DELETE, "DELETE", "/api/session", { token: null, headers: { cookie: `${planted}; ${own}` } });
    expect(out.status).toBe(204);
    expect([await whoIs(planted), await whoIs(own)]).toMatchObject([{ error: { code: "unauthorized" } }, { error: { code: "unauthorized" } }]);
    // Signing in while carrying the planted cookie revokes it; the browser then sends it (revoked) before the new one.
    const plantedAgain = await signIn(VIEWER_TOKEN, "planted");
    const fresh = await signIn(OPERATOR_TOKEN, "gina", plantedAgain);
    expect(await whoIs(`${plantedAgain}; ${fresh}`)).toMatchObject({ role: "operator", actor: "gina", via: "session" });
  });

  it("refuses a request carrying two different live sessions (one planted for the parent domain over http) rather than acting as either", async () => {
    const signIn = async (token: string, name: string, cookie?: string) => {
      const res = await call(session.POST, "POST", "/api/session", { token: null, ...(cookie ? { headers: { cookie } } : {}), body: { token, name } });
      expect(res.status).toBe(200);
      return (res.headers.get("set-cookie") ?? "").split(";")[0]!;
    };
    // The operator signs in; afterwards another site of the parent domain plants a session of its own (signed in
    // with a viewer token it holds) for the whole domain with a longer path, which the browser sends first.
    const own = await signIn(OPERATOR_TOKEN, "ivan");
    const planted = await signIn(VIEWER_TOKEN, "mallory");
    const both = `${planted}; ${own}`;
    const listed = await call(locks.GET, "GET", "/api/locks", { token: null, headers: { cookie: both } });
    expect([listed.status, listed.headers.get("www-authenticate")]).toEqual([401, 'Bearer realm="lockscope"']);
    expect(listed.body).toMatchObject({ error: { code: "unauthorized", message: expect.stringMatching(/two different sessions.*[Ss]ign in again/) as unknown } });
    // The pages ask who is signed in: no one, so the browser goes to sign-in.
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: both } })).status).toBe(401);
    // Each alone is what it was; one sent twice is one session.
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: own } })).body).toMatchObject({ role: "operator", actor: "ivan" });
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: `${own}; ${own}` } })).body).toMatchObject({ role: "operator", actor: "ivan" });
    // Signing in again ends both; the planted one, still sent first, is then passed over.
    const fresh = await signIn(OPERATOR_TOKEN, "ivan", both);
    expect((await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie: `${planted}; ${fresh}` } })).body).toMatchObject({ role: "operator", actor: "ivan", via: "session" });
  });

  it("keeps a browser signed in behind a proxy that checks Basic credentials and passes its Authorization header on", async () => {
    // nginx's auth_basic in front: the browser then sends `Authorization: Basic …` with every request, the console's too.
    const basic = `Basic ${Buffer.from("ops:proxy-password").toString("base64")}`;
    const signIn = await call(session.POST, "POST", "/api/session", { token: null, headers: { authorization: basic }, body: { token: OPERATOR_TOKEN, name: "hana" } });
    expect(signIn.status).toBe(200);
    const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0]!;
    const who = await call(session.GET, "GET", "/api/session", { token: null, headers: { cookie, authorization: basic } });
    expect([who.status, who.body]).toMatchObject([200, { role: "operator", actor: "hana", via: "session" }]);
    const listed = await call(locks.GET, "GET", "/api/locks", { token: null, headers: { cookie, authorization: basic } });
    expect(listed.status).toBe(200);
    // Without the cookie, the proxy's credentials are no credentials of the console's: signing in is still needed.
    const none = await call(locks.GET, "GET", "/api/locks", { token: null, headers: { authorization: basic, "x-lockscope-client-ip": "10.9.9.30" } });
    expect([none.status, none.headers.get("www-authenticate")]).toEqual([401, 'Bearer realm="lockscope"']);
  });

  it("answers bad bodies with a 4xx that says what was wrong", async () => {
    const unknown = await call(session.POST, "POST", "/api/session", { token: null, body: { token: "x", admin: true } });
    expect(unknown.status).toBe(422);
    expect(JSON.stringify(unknown.body)).toContain("admin");
    const broken = await call(session.POST, "POST", "/api/session", { token: null, rawBody: "{not json" });
    expect(broken.status).toBe(400);
    expect(broken.body).toMatchObject({ error: { code: "bad_request" } });
    const big = await call(session.POST, "POST", "/api/session", { token: null, rawBody: JSON.stringify({ token: "x".repeat(20_000) }) });
    expect(big.status).toBe(413);
  });

  it("reports three nodes up, then one down with the quorum still held", async () => {
    const before = await call(health.GET, "GET", "/api/health", { token: null });
    expect(before.body).toMatchObject({ status: "ok", quorum: { size: 2, up: 3, ok: true } });
    await cluster.kill(2);
    const after = await call(health.GET, "GET", "/api/health", { token: null });
    expect(after.body).toMatchObject({ status: "degraded", quorum: { size: 2, up: 2, ok: true } });
    expect((after.body as { nodes: Array<{ up: boolean }> }).nodes.map((n) => n.up)).toEqual([true, true, false]);
    expect(ORIGIN).toMatch(/^http/);
  });
});
