import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR_TOKEN, VIEWER_TOKEN } from "../support/console";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";

/**
 * A guesser with many addresses (a botnet, or one IPv6 host hopping between /64s) stays under the per-address limit
 * on each of them. The console started as in production, behind a proxy it trusts (here: the test itself, on
 * 127.0.0.1) that names each client in X-Forwarded-For: past the limit for everyone, every wrong token is refused
 * whatever address it comes from, and a right token still works from anywhere.
 */
describe("wrong tokens from many addresses", () => {
  let cluster: TestCluster;
  let launcher: LauncherProcess;

  beforeAll(async () => {
    cluster = await startCluster(1);
    launcher = await startLauncher({
      REDIS_URLS: cluster.urls.join(","),
      LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN,
      LOCKSCOPE_VIEWER_TOKEN: VIEWER_TOKEN,
      TRUSTED_PROXIES: "127.0.0.1",
    });
  }, 240_000);
  afterAll(async () => {
    await launcher?.stop("SIGTERM");
    await cluster?.close();
  });

  const read = (token: string, address: string) =>
    fetch(`${launcher.baseUrl}/api/locks`, { headers: { authorization: `Bearer ${token}`, "x-forwarded-for": address } });
  const signIn = (token: string, address: string) =>
    fetch(`${launcher.baseUrl}/api/session`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: launcher.baseUrl, "x-forwarded-for": address },
      body: JSON.stringify({ token }),
    });

  it("blocks one address past its limit while others' tokens, right or wrong, are answered as before", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) statuses.push((await read(`one-address-guess-${i}-0123456789`, "192.0.2.1")).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429]);
    expect((await read(VIEWER_TOKEN, "192.0.2.2")).status).toBe(200);
    expect((await read("someone-elses-stale-token-0123456789", "192.0.2.3")).status).toBe(401);
  });

  it("refuses every wrong token, from any address, once too many came from all of them in a minute, and still takes a right one", async () => {
    // Four different wrong tokens from each of 25 addresses: each address stays under its own limit of 5.
    const unlimited: string[] = [];
    let refused: Response | null = null;
    for (let a = 1; a <= 25 && !refused; a++) {
      for (let i = 0; i < 4; i++) {
        const res = await read(`spread-guess-${a}-${i}-0123456789`, `198.51.100.${a}`);
        if (res.status === 429) {
          refused = res;
          break;
        }
        unlimited.push(`${a}/${i}: ${res.status}`);
      }
    }
    // The console refused the spread guessing before it had answered all of its 100 guesses with 401.
    expect(refused, `every guess answered: ${unlimited.length}`).not.toBeNull();
    expect(Number(refused?.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await refused?.json()).toMatchObject({ error: { code: "rate_limited", message: expect.stringMatching(/many addresses/) as unknown } });

    // A wrong token from an address never seen before is refused too, as a bearer token and at sign-in.
    expect((await read("fresh-address-guess-0123456789", "203.0.113.9")).status).toBe(429);
    expect((await signIn("fresh-address-guess-0123456789", "203.0.113.10")).status).toBe(429);
    // A right token works from anywhere, the attacked addresses included.
    expect((await read(VIEWER_TOKEN, "203.0.113.11")).status).toBe(200);
    expect((await read(OPERATOR_TOKEN, "198.51.100.1")).status).toBe(200);
    expect((await signIn(OPERATOR_TOKEN, "203.0.113.12")).status).toBe(200);
    // The guessed tokens never reach the log.
    expect(launcher.output()).not.toContain("spread-guess");
  });
});
