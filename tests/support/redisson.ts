import { randomUUID } from "node:crypto";
import type Redis from "ioredis";
import { redissonPrefixName } from "@/lib/locks/formats/redisson";

/**
 * Redisson is a JVM library (not on npm), so the tests lay its locks out with this writer instead: it sends
 * the commands Redisson's lock scripts send, in the same order and atomically (one script per operation, as
 * Redisson does), written from the facts of the layout (see lib/locks/formats/redisson.ts and redisson-rw.ts),
 * not from Redisson's source:
 * - RLock acquire: existence check of the key and of the holder field, HINCRBY of `<client id>:<thread id>`,
 *   PEXPIRE to the lease; otherwise the PTTL is answered. Unlock: HINCRBY -1, then DEL and PUBLISH `0` on
 *   `redisson_lock__channel:{name}` at zero.
 * - Fair lock: the same, plus a waiter that cannot take it is RPUSHed on `redisson_lock_queue:{name}` and
 *   ZADDed to `redisson_lock_timeout:{name}` with the epoch ms when it stops waiting; it listens on
 *   `redisson_lock__channel:{name}:<client id>:<thread id>`.
 * - Read-write lock: HSET `mode` read/write with the first holder, readers' HINCRBY of `<client>:<thread>` plus
 *   one `{name}:<client>:<thread>:rwlock_timeout:<n>` string per hold, writers' `<client>:<thread>:write`.
 */
/** A Java long: a number, or a bigint where it is past 2^53. */
export type ThreadId = number | bigint;

export class RedissonWriter {
  /** The Redisson instance id (`ServiceManager.getId()`): one UUID per client. */
  readonly clientId: string;

  constructor(
    private readonly redis: Redis,
    clientId: string = randomUUID(),
  ) {
    this.clientId = clientId;
  }

  /**
   * The holder field of a thread: any Java long, as a bigint where it is past 2^53 (reactive and coroutine code
   * passes Redisson `ThreadLocalRandom.current().nextLong()` as the thread id, negative half the time).
   */
  holder(threadId: ThreadId): string {
    return `${this.clientId}:${threadId}`;
  }

  /** RLock.tryLock: null when acquired (or re-entered), else the holder's TTL left. */
  async lock(name: string, threadId: ThreadId, leaseMs = 30_000): Promise<number | null> {
    const reply = await this.redis.eval(
      `local taken = redis.call('exists', KEYS[1]) == 1
       if taken and redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return redis.call('pttl', KEYS[1]) end
       redis.call('hincrby', KEYS[1], ARGV[2], 1)
       redis.call('pexpire', KEYS[1], ARGV[1])
       return false`,
      1,
      name,
      leaseMs,
      this.holder(threadId),
    );
    return typeof reply === "number" ? reply : null;
  }

  /** RLock.unlock: true when the last hold went and the waiters were told. */
  async unlock(name: string, threadId: ThreadId, leaseMs = 30_000): Promise<boolean | null> {
    const reply = await this.redis.eval(
      `if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return -1 end
       if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then redis.call('pexpire', KEYS[1], ARGV[2]) return 0 end
       redis.call('del', KEYS[1])
       redis.call('publish', KEYS[2], ARGV[1])
       return 1`,
      2,
      name,
      redissonPrefixName("redisson_lock__channel", name),
      "0",
      leaseMs,
      this.holder(threadId),
    );
    return reply === -1 ? null : reply === 1;
  }

  /**
   * RFencedLock.tryLockAndGetToken (RedissonFencedLock.tryLockInnerAsync, sent as Redisson sends it): the RLock
   * layout, and a fencing counter `redisson_lock_token:{name}` (a string, no TTL) INCRed on every acquisition.
   * Resolves the fencing token when acquired, null when it is held.
   */
  async fencedLock(name: string, threadId: ThreadId, leaseMs = 30_000): Promise<number | null> {
    const reply = (await this.redis.eval(
      `if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
         local token = redis.call('incr', KEYS[2]);
         redis.call('hincrby', KEYS[1], ARGV[2], 1);
         redis.call('pexpire', KEYS[1], ARGV[1]);
         return {-1, token};
       end;
       return {redis.call('pttl', KEYS[1]), -1};`,
      2,
      name,
      redissonPrefixName("redisson_lock_token", name),
      leaseMs,
      this.holder(threadId),
    )) as [number, number];
    return reply[0] === -1 ? reply[1] : null;
  }

  /** RedissonFairLock.tryLock: acquires when free and first in line; otherwise queues the thread. */
  async fairLock(name: string, threadId: ThreadId, leaseMs = 30_000, waitMs = 300_000): Promise<number | null> {
    const reply = await this.redis.eval(
      `local queue, timeouts, id, now = KEYS[2], KEYS[3], ARGV[2], tonumber(ARGV[4])
       local head = redis.call('lindex', queue, 0)
       if redis.call('exists', KEYS[1]) == 0 and (head == false or head == id) then
         redis.call('lpop', queue)
         redis.call('zrem', timeouts, id)
         redis.call('hset', KEYS[1], id, 1)
         redis.call('pexpire', KEYS[1], ARGV[1])
         return false
       end
       if redis.call('hexists', KEYS[1], id) == 1 then
         redis.call('hincrby', KEYS[1], id, 1)
         redis.call('pexpire', KEYS[1], ARGV[1])
         return false
       end
       local ttl = redis.call('pttl', KEYS[1])
       if redis.call('zadd', timeouts, ttl + tonumber(ARGV[3]) + now, id) == 1 then redis.call('rpush', queue, id) end
       return ttl`,
      3,
      name,
      redissonPrefixName("redisson_lock_queue", name),
      redissonPrefixName("redisson_lock_timeout", name),
      leaseMs,
      this.holder(threadId),
      waitMs,
      Date.now(),
    );
    return typeof reply === "number" ? reply : null;
  }

  /** RReadWriteLock.readLock().tryLock. */
  async readLock(name: string, threadId: ThreadId, leaseMs = 30_000): Promise<number | null> {
    const timeoutPrefix = `${name.includes("{") ? name : `{${name}}`}:${this.holder(threadId)}:rwlock_timeout`;
    const reply = await this.redis.eval(
      `local mode = redis.call('hget', KEYS[1], 'mode')
       if mode == false then redis.call('hset', KEYS[1], 'mode', 'read') end
       if mode == false or mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
         local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
         redis.call('set', KEYS[2] .. ':' .. n, 1)
         redis.call('pexpire', KEYS[2] .. ':' .. n, ARGV[1])
         redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
         return false
       end
       return redis.call('pttl', KEYS[1])`,
      2,
      name,
      timeoutPrefix,
      leaseMs,
      this.holder(threadId),
      `${this.holder(threadId)}:write`,
    );
    return typeof reply === "number" ? reply : null;
  }

  /** RReadWriteLock.writeLock().tryLock. */
  async writeLock(name: string, threadId: ThreadId, leaseMs = 30_000): Promise<number | null> {
    const reply = await this.redis.eval(
      `local mode = redis.call('hget', KEYS[1], 'mode')
       if mode == false then
         redis.call('hset', KEYS[1], 'mode', 'write')
         redis.call('hset', KEYS[1], ARGV[2], 1)
         redis.call('pexpire', KEYS[1], ARGV[1])
         return false
       end
       if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
         redis.call('hincrby', KEYS[1], ARGV[2], 1)
         redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + tonumber(ARGV[1]))
         return false
       end
       return redis.call('pttl', KEYS[1])`,
      1,
      name,
      leaseMs,
      `${this.holder(threadId)}:write`,
    );
    return typeof reply === "number" ? reply : null;
  }
}

/** The channel a waiter of a plain RLock subscribes to (Redisson's LockPubSub). */
export const lockChannel = (name: string): string => redissonPrefixName("redisson_lock__channel", name);
/** The channel one fair-lock waiter subscribes to. */
export const fairWaiterChannel = (name: string, holder: string): string => `${lockChannel(name)}:${holder}`;
/** The channel the waiters of a read-write lock subscribe to. */
export const readWriteChannel = (name: string): string => redissonPrefixName("redisson_rwlock", name);

export interface Waiter {
  /** The first message on the waiter's channel. */
  message: Promise<string>;
  /**
   * For the message of an assertion that a release's node result woke this waiter (`woken` 1): nothing when it did,
   * else what the node and the waiter's connection say now (a release reached no subscriber once in CI, a moment after the node
   * counted this one).
   */
  accountUnlessWoken(node: unknown): Promise<string | undefined>;
}

/**
 * A waiter listening the way Redisson's waiters do: SUBSCRIBE to the lock's channel on a connection of its
 * own, then wait for the unlock message.
 */
export async function subscribeWaiter(subscriber: Redis, channel: string): Promise<Waiter> {
  let resolve: (message: string) => void = () => {};
  const message = new Promise<string>((r) => {
    resolve = r;
  });
  subscriber.on("message", (ch: string, text: string) => {
    if (ch === channel) resolve(text);
  });
  // The node counts the subscription before anything is published to it (seen once in CI: a release right after
  // the SUBSCRIBE reply reached no subscriber). Rarely (about one CI run in ten, not explained yet) the SUBSCRIBE is
  // answered and the node never counts it on that channel: the waiter then subscribes again, up to three times,
  // 2 s each, and says what the node holds if it never does.
  const probe = subscriber.duplicate();
  try {
    let count = 0;
    for (let attempt = 0; attempt < 3 && count < 1; attempt++) {
      if (attempt > 0) await subscriber.unsubscribe(channel);
      await subscriber.subscribe(channel);
      for (let i = 0; i < 200 && count < 1; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 10));
        count = Number(((await probe.pubsub("NUMSUB", channel)) as [string, number])[1]);
      }
    }
    // Said here, not later as "woken: 0" in the test that publishes; with what the node and the waiter's
    // connection say, to tell a lost subscription from a connection to another server.
    if (count < 1) {
      const clients = await clientList(probe);
      const channels = await probe.pubsub("CHANNELS", "*").catch((e: unknown) => `PUBSUB CHANNELS failed: ${String(e)}`);
      const port = (await probe.info("server").catch(() => "")).match(/\r\ntcp_port:(\d+)/)?.[1];
      throw new Error(
        `the waiter's SUBSCRIBE to ${channel} was answered, but the node counts no subscriber on it after three tries; the waiter's connection: ${subscriber.status} to port ${subscriber.options.port}; the node on port ${port ?? "?"} has channels ${JSON.stringify(channels)} and lists: ${clients}`,
      );
    }
  } finally {
    probe.disconnect();
  }
  // From here on the node counted the subscription: a connection that closes after it loses it until ioredis
  // subscribes again.
  let closes = 0;
  subscriber.on("close", () => (closes += 1));
  const accountUnlessWoken = async (node: unknown) => {
    if ((node as { woken?: unknown } | undefined)?.woken === 1) return undefined;
    const look = subscriber.duplicate();
    try {
      const count = await look.pubsub("NUMSUB", channel).then((r) => String((r as [string, number])[1]), (e: unknown) => `unknown (${String(e)})`);
      return `the node counts ${count} subscriber(s) on ${channel} now; the waiter's connection is ${subscriber.status} and closed ${closes} time(s) since the node counted it; the node lists: ${await clientList(look)}`;
    } finally {
      look.disconnect();
    }
  };
  return { message, accountUnlessWoken };
}

/** The node's CLIENT LIST on one line (or why it could not be read), for a failure's message. */
async function clientList(probe: Redis): Promise<string> {
  return String(await probe.client("LIST").catch((e: unknown) => `CLIENT LIST failed: ${String(e)}`)).replace(/\n/g, " | ");
}
