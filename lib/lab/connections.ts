import Redis, { type RedisOptions } from "ioredis";
import type { RedlockClient, SubscriberClient } from "@lockscope/redlock";

/**
 * The lab workers' own connections. Each worker is its own client: one connection per node it uses,
 * failing fast while a node is down (no offline queue) so a dead node never queues orders.
 */
export function labClientOptions(commandTimeoutMs: number, connectionName: string): RedisOptions {
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: Math.max(1000, commandTimeoutMs * 2),
    commandTimeout: commandTimeoutMs,
    // A restarted node is back within a second or two; poll for it quickly but not in a tight loop.
    retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 4), 500),
    // WATCH (the naive lock's release) belongs to a connection: no auto-pipelining across callers.
    enableAutoPipelining: false,
    autoResubscribe: false,
    connectionName,
  };
}

export function openLabClient(url: string, commandTimeoutMs: number, connectionName: string): Redis {
  const client = new Redis(url, labClientOptions(commandTimeoutMs, connectionName));
  // Faults kill nodes on purpose: connection errors surface through the commands, counted as errors.
  client.on("error", () => {});
  return client;
}

/** Runs `task` over `items` with at most `limit` in flight; rejects with the first failure after all settle. */
export async function boundedAll<T>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const failures: Error[] = [];
  const lane = async () => {
    while (next < items.length) {
      const index = next++;
      try {
        await task(items[index]!, index);
      } catch (error) {
        failures.push(error instanceof Error ? error : new Error(`task failed: ${typeof error}`));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failures[0]) throw failures[0];
}

/**
 * A node's switch for the "connections" fault mode, used when the console does not own the node's
 * process: while stalled, the lab workers' commands to that node wait here, unsent, and go out when the
 * stall ends, as a SIGSTOPped Redis would read them after SIGCONT.
 */
export class NodeSwitch {
  #stall: { promise: Promise<void>; release: () => void } | null = null;

  get stalled(): boolean {
    return this.#stall !== null;
  }

  stall(): void {
    if (this.#stall) return;
    let release!: () => void;
    const promise = new Promise<void>((resolve) => (release = resolve));
    this.#stall = { promise, release };
  }

  resume(): void {
    const stall = this.#stall;
    this.#stall = null;
    stall?.release();
  }

  through<T>(send: () => Promise<T>): Promise<T> {
    return this.#stall ? this.#stall.promise.then(send) : send();
  }
}

/** A worker's connection to one node as the engine sees it, passing every command through the node's switch. */
export class SwitchedClient implements RedlockClient {
  constructor(
    readonly redis: Redis,
    private readonly nodeSwitch: NodeSwitch,
  ) {}

  evalsha(sha1: string, numkeys: number, ...keysAndArgs: Array<string | number>): Promise<unknown> {
    return this.nodeSwitch.through(() => this.redis.evalsha(sha1, numkeys, ...keysAndArgs));
  }

  eval(script: string, numkeys: number, ...keysAndArgs: Array<string | number>): Promise<unknown> {
    return this.nodeSwitch.through(() => this.redis.eval(script, numkeys, ...keysAndArgs));
  }

  set(key: string, value: string, px: "PX", ttlMs: number, nx: "NX"): Promise<unknown> {
    return this.nodeSwitch.through(() => this.redis.set(key, value, px, ttlMs, nx));
  }

  duplicate(): SubscriberClient {
    const subscriber = this.redis.duplicate();
    subscriber.on("error", () => {});
    return subscriber;
  }
}
