import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as SessionModule from "@/app/api/session/route";
import type { TestCluster } from "../support/redis";
import { call, OPERATOR_TOKEN, setUpConsole, VIEWER_TOKEN, tearDownConsole } from "../support/console";

const PUBLIC = "https://locks.example.com";

/**
 * Behind a TLS proxy (`LOCKSCOPE_PUBLIC_ORIGIN=https://…`) the session cookie is a `__Host-` cookie: a browser
 * takes it only from this host, over https, for the whole site and no wider. Another site of the parent domain
 * (a sibling subdomain) can set `lockscope_session` for the whole domain, but never `__Host-lockscope_session`:
 * it cannot slip its own session (signed in with a token of its own) into an operator's browser.
 */
describe("the session cookie behind https", () => {
  let cluster: TestCluster;
  let session: typeof SessionModule;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1, env: { LOCKSCOPE_PUBLIC_ORIGIN: PUBLIC } });
    session = await import("@/app/api/session/route");
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  const signIn = async (token: string, name: string) => {
    const res = await call(session.POST, "POST", "/api/session", { token: null, origin: PUBLIC, headers: { host: "locks.example.com" }, body: { token, name } });
    expect(res.status).toBe(200);
    return res.headers.get("set-cookie") ?? "";
  };
  const who = (cookie: string) => call(session.GET, "GET", "/api/session", { token: null, headers: { host: "locks.example.com", cookie } });

  it("is set as __Host-lockscope_session: Secure, for the whole site, no Domain", async () => {
    const cookie = await signIn(OPERATOR_TOKEN, "alice");
    expect(cookie).toMatch(/^__Host-lockscope_session=[^;]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+; Secure$/);
    expect(cookie).not.toMatch(/Domain=/i);
    expect((await who(cookie.split(";")[0]!)).body).toMatchObject({ role: "operator", actor: "alice", via: "session" });
  });

  it("ignores a session cookie of the plain name, as a sibling site could plant it", async () => {
    // The attacker signs in with a token of its own, then plants that session under the plain name.
    const planted = (await signIn(VIEWER_TOKEN, "mallory")).split(";")[0]!.replace(/^__Host-/, "");
    expect(planted).toMatch(/^lockscope_session=/);
    const res = await who(planted);
    expect(res.status).toBe(401);
    // Beside the operator's own cookie, it changes nothing either.
    const own = (await signIn(OPERATOR_TOKEN, "alice")).split(";")[0]!;
    expect((await who(`${planted}; ${own}`)).body).toMatchObject({ role: "operator", actor: "alice" });
  });

  it("clears the cookie on sign-out, and the plain-named one an earlier version set", async () => {
    const own = (await signIn(OPERATOR_TOKEN, "alice")).split(";")[0]!;
    const res = await call(session.DELETE, "DELETE", "/api/session", { token: null, origin: PUBLIC, headers: { host: "locks.example.com", cookie: own } });
    expect(res.status).toBe(204);
    const cleared = res.headers.getSetCookie();
    expect(cleared).toContainEqual(expect.stringMatching(/^__Host-lockscope_session=; Path=\/; .*Max-Age=0.*; Secure$/));
    expect(cleared).toContainEqual(expect.stringMatching(/^lockscope_session=; Path=\/; .*Max-Age=0/));
    expect((await who(own)).status).toBe(401);
  });
});
