import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type Redis from "ioredis";
import { afterAll, beforeAll, describe, it } from "vitest";
import { call, setUpConsole, tearDownConsole } from "../support/console";
import type { TestCluster } from "../support/redis";
import { until } from "../support/wait";

const OLD_PASSWORD = "rotation-old-password-0123456789";
const NEW_PASSWORD = "rotation-new-password-0123456789";
type HealthBody = { nodes: Array<{ up: boolean }> };

/**
 * The console's ACL password rotated the usual way: a second password added to the user, the password file
 * rewritten, the old password removed and the user's connections dropped. The console reconnects, and must sign
 * in with the password the file holds now, not the one it read when it started.
 */
describe("a node whose ACL password is rotated through the password file", () => {
  let cluster: TestCluster;
  let admin: Redis;
  let dir: string;
  let passwordFile: string;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "500" } });
    admin = cluster.client(0);
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-password-rotation-"));
    passwordFile = path.join(dir, "redis-password");
    writeFileSync(passwordFile, `${OLD_PASSWORD}\n`, { mode: 0o600 });
    await admin.call("ACL", "SETUSER", "lockscope", "on", `>${OLD_PASSWORD}`, "~*", "&*", "+@all");
    // Nobody gets in without credentials (this connection stays signed in as the default user).
    await admin.call("ACL", "SETUSER", "default", "resetpass", ">admin-password-0123456789");
    delete process.env.REDIS_URLS;
    Object.assign(process.env, { REDIS_URL: cluster.urls[0]!, REDIS_USERNAME: "lockscope", REDIS_PASSWORD_FILE: passwordFile });
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("signs in again with the file's new password after its connections are dropped", async () => {
    const health = await import("@/app/api/health/route");
    const up = async () => ((await call(health.GET, "GET", "/api/health", { token: null })).body as HealthBody).nodes[0]?.up === true;
    await until("the node up as lockscope", up, 20_000);

    await admin.call("ACL", "SETUSER", "lockscope", `>${NEW_PASSWORD}`);
    writeFileSync(passwordFile, `${NEW_PASSWORD}\n`);
    await admin.call("ACL", "SETUSER", "lockscope", `<${OLD_PASSWORD}`);
    await admin.call("CLIENT", "KILL", "USER", "lockscope");
    // (A connection signed in as lockscope again: the console's, with the file's new password.)
    await until("the node up again, signed in with the new password", async () => /user=lockscope/.test(String(await admin.call("CLIENT", "LIST"))) && (await up()), 20_000);
  }, 60_000);
});
