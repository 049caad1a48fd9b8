import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR_TOKEN, VIEWER_TOKEN } from "../support/console";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";

/**
 * The production server counts wrong tokens by the connection's peer (no TRUSTED_PROXIES here): a client that
 * writes its own address into a header, whichever one, is still counted as itself, and past the limit it waits.
 */
describe("wrong tokens from a client that names its own address", () => {
  let cluster: TestCluster;
  let launcher: LauncherProcess;

  beforeAll(async () => {
    cluster = await startCluster(1);
    launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN, LOCKSCOPE_VIEWER_TOKEN: VIEWER_TOKEN });
  }, 240_000);
  afterAll(async () => {
    await launcher?.stop("SIGTERM");
    await cluster?.close();
  });

  it("counts them against the peer's address whatever address the headers give, and still takes the right token", async () => {
    const read = (token: string, i: number) =>
      fetch(`${launcher.baseUrl}/api/locks`, {
        headers: {
          authorization: `Bearer ${token}`,
          // The header the server itself fills in, the proxies' one, and Next.js's own way of rewriting request headers.
          "x-lockscope-client-ip": `203.0.113.${i}`,
          "x-forwarded-for": `198.51.100.${i}`,
          "x-middleware-override-headers": "x-lockscope-client-ip",
          "x-middleware-request-x-lockscope-client-ip": `192.0.2.${i}`,
        },
      });
    const statuses: number[] = [];
    for (let i = 1; i <= 6; i++) statuses.push((await read(`forged-address-guess-${i}-0123456789`, i)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    expect((await read(VIEWER_TOKEN, 7)).status).toBe(200);
    expect(launcher.output()).not.toContain("forged-address-guess");
  });
});
