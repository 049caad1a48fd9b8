import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatByName } from "@/lib/locks/formats";
import { startRedisCluster, type RedisClusterSet } from "../../support/redis-cluster";
import { fairWaiterChannel, lockChannel, RedissonWriter, readWriteChannel } from "../../support/redisson";
import { until } from "../../support/wait";

/**
 * Redisson on a Redis Cluster of Redis 7 or later: its waiters listen with SSUBSCRIBE (sharded pub/sub, on the
 * node that serves the lock's slot) and its unlock sends the unlock message with SPUBLISH, which a PUBLISH does
 * not reach. A force release must wake them the same way.
 */
describe("Redisson locks on a Redis Cluster, waiters on sharded pub/sub", () => {
  let set: RedisClusterSet;
  let cluster: InstanceType<typeof Redis.Cluster>;
  const opts = { nodeTimeoutMs: 2_000 };

  beforeAll(async () => {
    set = await startRedisCluster();
    cluster = set.client();
  });
  afterAll(async () => {
    await set.close();
  });

  /** A waiter as Redisson's sharded subscription has it: SSUBSCRIBE on the primary serving the channel's slot. */
  async function shardedWaiter(channel: string): Promise<{ message: Promise<string>; connection: Redis }> {
    const slot = Number(await cluster.call("CLUSTER", "KEYSLOT", channel));
    const { primary } = await set.shardOf(slot);
    const connection = set.direct(primary).duplicate();
    let resolve: (message: string) => void = () => {};
    const message = new Promise<string>((r) => (resolve = r));
    connection.on("smessage", (ch: string, text: string) => {
      if (ch === channel) resolve(text);
    });
    await connection.ssubscribe(channel);
    await until(`the node counts the sharded subscriber on ${channel}`, async () => {
      const reply = (await set.direct(primary).call("PUBSUB", "SHARDNUMSUB", channel)) as [string, number];
      return Number(reply[1]) >= 1;
    });
    return { message, connection };
  }

  it("RLock: the waiter hears Redisson's unlock message, and the answer says it was woken", async () => {
    const app = new RedissonWriter(cluster as unknown as Redis);
    expect(await app.lock("orders-lock", 57)).toBeNull();
    const waiter = await shardedWaiter(lockChannel("orders-lock"));
    const done = await formatByName("redisson").release!([cluster], "orders-lock", app.holder(57), opts);
    expect(done.nodes[0]).toMatchObject({ result: "deleted" });
    expect(done.notified).toEqual({ holder: false, waiters: true });
    expect(await waiter.message).toBe("0");
    waiter.connection.disconnect();
  });

  it("fair lock: the first live waiter hears it on its own channel", async () => {
    const app = new RedissonWriter(cluster as unknown as Redis);
    const other = new RedissonWriter(cluster as unknown as Redis);
    expect(await app.fairLock("payouts", 1)).toBeNull();
    expect(await other.fairLock("payouts", 2)).toBeGreaterThan(0);
    const waiter = await shardedWaiter(fairWaiterChannel("payouts", other.holder(2)));
    const done = await formatByName("redisson").release!([cluster], "payouts", app.holder(1), opts);
    expect(done.notified.waiters).toBe(true);
    expect(await waiter.message).toBe("0");
    waiter.connection.disconnect();
  });

  it("read-write lock's writer: the waiters hear the message that wakes them all", async () => {
    const app = new RedissonWriter(cluster as unknown as Redis);
    expect(await app.writeLock("ledger", 4)).toBeNull();
    const waiter = await shardedWaiter(readWriteChannel("ledger"));
    const done = await formatByName("redisson-rw").release!([cluster], "ledger", `${app.holder(4)}:write`, opts);
    expect(done.notified.waiters).toBe(true);
    expect(await waiter.message).toBe("1");
    waiter.connection.disconnect();
  });
});
