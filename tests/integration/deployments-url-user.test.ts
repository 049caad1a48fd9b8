import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Deployment, DeploymentAuth } from "@/lib/deployment-config";
import { startCluster, type TestCluster } from "../support/redis";

const PASSWORD = "url-user-password-0123456789";

/**
 * A node URL that names the ACL user but carries no password (`redis://lockscope@host`), with the password in
 * REDIS_PASSWORD_FILE: the file's password goes with the URL's user.
 */
describe("a node URL with a user name and no password", () => {
  let cluster: TestCluster;
  let admin: Redis;
  let dir: string;
  let passwordFile: string;
  const opened: Redis[] = [];

  beforeAll(async () => {
    cluster = await startCluster(1);
    admin = cluster.client(0);
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-url-user-"));
    passwordFile = path.join(dir, "redis-password");
    writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
    await admin.call("ACL", "SETUSER", "lockscope", "on", `>${PASSWORD}`, "~*", "+@all");
    // Nobody gets in without credentials (this connection stays signed in as the default user).
    await admin.call("ACL", "SETUSER", "default", "resetpass", ">admin-password-0123456789");
  });
  afterAll(async () => {
    for (const c of opened) c.disconnect();
    await cluster?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const connectAs = async (deployment: Deployment): Promise<Redis> => {
    const { endpointsOf } = await import("@/server/deployments");
    const [endpoint] = endpointsOf(deployment);
    const client = endpoint!.connect({ lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null }) as Redis;
    client.on("error", () => {
      // A refused AUTH surfaces through the command below.
    });
    opened.push(client);
    return client;
  };
  const url = () => `redis://lockscope@127.0.0.1:${cluster.ports[0]}`;
  const auth = (username: string | null): DeploymentAuth => ({ username, passwordFile });

  it("signs in as the URL's user with the password file, for a standalone node and a Redlock node", async () => {
    const standalone = await connectAs({ name: "standalone", kind: "standalone", url: url(), tls: null, auth: auth(null) });
    await expect(standalone.call("ACL", "WHOAMI")).resolves.toBe("lockscope");
    await expect(standalone.set("lock:url-user/1", "token-1", "PX", 10_000)).resolves.toBe("OK");
    const redlock = await connectAs({ name: "redlock", kind: "redlock", urls: [url()], tls: null, auth: auth(null) });
    await expect(redlock.call("ACL", "WHOAMI")).resolves.toBe("lockscope");
  });

  it("keeps the URL's user over REDIS_USERNAME, and uses REDIS_USERNAME where the URL names none", async () => {
    const named = await connectAs({ name: "named", kind: "standalone", url: url(), tls: null, auth: auth("someone-else") });
    await expect(named.call("ACL", "WHOAMI")).resolves.toBe("lockscope");
    const bare = await connectAs({ name: "bare", kind: "standalone", url: `redis://127.0.0.1:${cluster.ports[0]}`, tls: null, auth: auth("lockscope") });
    await expect(bare.call("ACL", "WHOAMI")).resolves.toBe("lockscope");
  });

  it("keeps a password the URL carries over the password file", async () => {
    await admin.call("ACL", "SETUSER", "url-user", "on", ">url-own-password-0123", "~*", "+@all");
    const own = await connectAs({ name: "own", kind: "standalone", url: `redis://url-user:url-own-password-0123@127.0.0.1:${cluster.ports[0]}`, tls: null, auth: auth(null) });
    await expect(own.call("ACL", "WHOAMI")).resolves.toBe("url-user");
  });
});
