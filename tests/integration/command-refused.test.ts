import Redis, { type Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readLockKeys } from "@/lib/locks/formats";
import { isCommandRefused } from "@/server/deployments/cluster";
import { nodeFailureText, refusesKey } from "@/server/errors";
import { probeRefusal } from "@/server/live/watcher";
import { startCluster, type TestCluster } from "../support/redis";
import { startRedisCluster, type RedisClusterSet } from "../support/redis-cluster";

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
    // The script runs until it is killed (60 s at most): however late the question comes, it finds the node busy.
    const running = other
      .eval("local t = redis.call('TIME'); while true do local n = redis.call('TIME'); if n[1] - t[1] > 60 then break end end return 1", 0)
      .catch((error: unknown) => error);
    // (Sent first: the question below comes after it on the node.)
    await new Promise((resolve) => setTimeout(resolve, 250));
    const asker = new Redis(cluster.ports[1]!, "127.0.0.1", { maxRetriesPerRequest: 0, enableReadyCheck: false });
    asker.on("error", () => undefined);
    try {
      const busy = await failure(() => asker.call("CLUSTER", "SHARDS"));
      expect((busy as Error).message).toMatch(/^BUSY/);
      expect(isCommandRefused(busy)).toBe(false);
    } finally {
      await asker.call("SCRIPT", "KILL").catch(() => undefined);
      expect(String(await running)).toMatch(/killed/i);
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

/**
 * ioredis's cluster client tries a command again after MOVED, CLUSTERDOWN or a dropped connection, and once it has
 * tried `maxRedirections` times it rejects with its own error, the last reply in its text (`Too many Cluster
 * redirections. Last error: ReplyError: NOPERM …`): a refusal all the same. Here a cluster client out of tries at its
 * first error, so that every reply error comes wrapped, as after the last try.
 */
describe("a refusal as a Redis Cluster client reports it after its tries", () => {
  let set: RedisClusterSet;
  let client: Cluster;
  const failure = (run: () => Promise<unknown>) =>
    run().then(
      () => {
        throw new Error("the command was expected to fail");
      },
      (error: unknown) => error as Error,
    );
  const wrapped = /^Too many Cluster redirections\. Last error: ReplyError: /;

  beforeAll(async () => {
    set = await startRedisCluster();
    // A user without CLUSTER SHARDS or CLUSTER INFO, whose keys are `lock:allowed:*` only.
    for (const node of set.nodes) {
      await set.direct(node.port).call("ACL", "SETUSER", "limited", "on", ">limited-password-0123", "~lock:allowed:*", "+@all", "-cluster|shards", "-cluster|info");
    }
    client = new Redis.Cluster(
      set.nodes.map((n) => ({ host: "127.0.0.1", port: n.port })),
      // (No ready check: it asks CLUSTER INFO, which this user may not run.)
      { maxRedirections: 0, enableReadyCheck: false, redisOptions: { username: "limited", password: "limited-password-0123", maxRetriesPerRequest: 1 } },
    );
    client.on("error", () => undefined);
  }, 60_000);
  afterAll(async () => {
    client?.disconnect();
    await set?.close();
  });

  it("takes a wrapped NOPERM or unknown subcommand for a command refused for good", async () => {
    const shards = await failure(() => client.call("CLUSTER", "SHARDS"));
    expect(shards.message).toMatch(/^Too many Cluster redirections\. Last error: ReplyError: NOPERM /);
    expect(isCommandRefused(shards)).toBe(true);
    const subcommand = await failure(() => client.call("CLUSTER", "NOT-A-SUBCOMMAND"));
    expect(subcommand.message).toMatch(/^Too many Cluster redirections\. Last error: ReplyError: ERR unknown subcommand/);
    expect(isCommandRefused(subcommand)).toBe(true);
  });

  it("takes a wrapped NOPERM on the lock's key for the ACL refusing the key, and a wrapped WRONGPASS for the credentials", async () => {
    // The console's own read of a lock, as a force release reads each node first.
    const read = await failure(() => readLockKeys(client, ["lock:refused"]));
    expect(read.message).toMatch(wrapped);
    expect(refusesKey(read.message)).toBe(true);
    expect(nodeFailureText(read.message)).toBe("refused by its ACL: the console's Redis user may not run this command or use this key there");
    const auth = await failure(() => client.call("AUTH", "limited", "not-the-password"));
    expect(auth.message).toMatch(/^Too many Cluster redirections\. Last error: ReplyError: WRONGPASS /);
    expect(nodeFailureText(auth.message)).toBe("refused the console's credentials");
  });

  it("takes a wrapped refusal of the notification probe's write for a refusal: notifications unknown, not the node failing", async () => {
    // The watcher's probe (CONFIG refused) writes keys of its own; an ACL without them refuses the write.
    const write = await failure(() => client.set("lockscope:probe:it{a}:s", "1", "PX", 20));
    expect(write.message).toMatch(wrapped);
    expect(probeRefusal(write)).toMatch(/^NOPERM /);
    const closed = new Redis.Cluster([{ host: "127.0.0.1", port: set.nodes[0]!.port }], { lazyConnect: true, enableOfflineQueue: false });
    try {
      expect(probeRefusal(await failure(() => closed.set("lockscope:probe:it{a}:s", "1")))).toBeNull();
    } finally {
      closed.disconnect();
    }
    // A cluster still failing over when the client's tries ran out says nothing of the flags either.
    expect(probeRefusal(new Error("Too many Cluster redirections. Last error: ReplyError: CLUSTERDOWN The cluster is down"))).toBeNull();
  });

  it("does not take any other error the client wraps, nor a text that merely mentions a refusal, for one", async () => {
    const own = await failure(() => client.eval("return redis.error_reply('ERR the script refused: NOPERM keys')", 1, "lock:allowed:x"));
    expect(own.message).toBe("Too many Cluster redirections. Last error: ReplyError: ERR the script refused: NOPERM keys");
    expect(isCommandRefused(own)).toBe(false);
    expect(refusesKey(own.message)).toBe(false);
    expect(nodeFailureText(own.message)).toBeNull();
    for (const text of [
      // ioredis's own errors after its tries are not replies.
      "Too many Cluster redirections. Last error: Error: NOPERM this user has no permissions to access one of the keys used as arguments",
      "Too many Cluster redirections. Last error: ReplyError: CLUSTERDOWN The cluster is down",
      // The prefix anywhere but at the start.
      "lockscope: Too many Cluster redirections. Last error: ReplyError: NOPERM this user has no permissions to access one of the keys used as arguments",
      "Last error: ReplyError: WRONGPASS invalid username-password pair or user is disabled.",
    ]) {
      const error = new Error(text);
      expect([text, isCommandRefused(error), refusesKey(text), nodeFailureText(text)]).toEqual([text, false, false, null]);
    }
  });
});
