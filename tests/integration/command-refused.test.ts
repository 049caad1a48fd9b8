import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isCommandRefused } from "@/server/deployments/cluster";
import { startCluster, type TestCluster } from "../support/redis";

/**
 * What the console takes for a command refused for good (and then stops asking, or falls back: CLUSTER SLOTS for
 * CLUSTER SHARDS, no run id, no flush count) against what fails only for now and is asked again: the replies of a
 * real redis-server, not their texts copied.
 */
describe("a command refused for good, told from one that failed for now", () => {
  let cluster: TestCluster;
  let admin: Redis;
  let limited: Redis;
  const failure = (run: () => Promise<unknown>) =>
    run().then(
      () => {
        throw new Error("the command was expected to fail");
      },
      (error: unknown) => error,
    );

  beforeAll(async () => {
    // A user without INFO or CLUSTER on node 0; scripts answered BUSY after 100 ms.
    cluster = await startCluster(2, ["--busy-reply-threshold", "100"]);
    admin = cluster.client(0);
    await admin.call("ACL", "SETUSER", "limited", "on", ">limited-password-0123", "~*", "+@all", "-info", "-cluster");
    limited = new Redis(cluster.ports[0]!, "127.0.0.1", { username: "limited", password: "limited-password-0123", maxRetriesPerRequest: 0, enableReadyCheck: false });
  });
  afterAll(async () => {
    limited.disconnect();
    await cluster.close();
  });

  it("takes NOPERM, an unknown command and an unknown subcommand for refusals", async () => {
    const noperm = await failure(() => limited.info("server"));
    expect((noperm as Error).message).toMatch(/^NOPERM/);
    expect(isCommandRefused(noperm)).toBe(true);
    const renamed = new Redis(cluster.ports[1]!, "127.0.0.1", { maxRetriesPerRequest: 0 });
    try {
      const unknown = await failure(() => renamed.call("FLUSHCALLS-NOT-A-COMMAND"));
      expect((unknown as Error).message).toMatch(/unknown command/);
      expect(isCommandRefused(unknown)).toBe(true);
    } finally {
      renamed.disconnect();
    }
    const subcommand = await failure(() => admin.call("CLUSTER", "NOT-A-SUBCOMMAND"));
    expect((subcommand as Error).message).toMatch(/unknown subcommand/i);
    expect(isCommandRefused(subcommand)).toBe(true);
  });

  it("takes BUSY (a script running long), a closed connection and a node not in cluster mode for failures for now", async () => {
    const other = cluster.client(1);
    const running = other.eval("local t = redis.call('TIME'); while true do local n = redis.call('TIME'); if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 600000 then break end end return 1", 0);
    await new Promise((resolve) => setTimeout(resolve, 250));
    const asker = new Redis(cluster.ports[1]!, "127.0.0.1", { maxRetriesPerRequest: 0, enableReadyCheck: false });
    asker.on("error", () => undefined);
    try {
      const busy = await failure(() => asker.call("CLUSTER", "SHARDS"));
      expect((busy as Error).message).toMatch(/^BUSY/);
      expect(isCommandRefused(busy)).toBe(false);
    } finally {
      await running;
      asker.disconnect();
    }
    const closed = new Redis(cluster.ports[1]!, "127.0.0.1", { maxRetriesPerRequest: 0, lazyConnect: true, enableOfflineQueue: false });
    closed.on("error", () => undefined);
    const offline = await failure(() => closed.ping());
    expect(isCommandRefused(offline)).toBe(false);
    // A node without cluster support: not a refusal of the subcommand (the topology is read again later).
    const disabled = await failure(() => admin.call("CLUSTER", "SHARDS"));
    expect((disabled as Error).message).toMatch(/cluster support disabled/);
    expect(isCommandRefused(disabled)).toBe(false);
  });
});
