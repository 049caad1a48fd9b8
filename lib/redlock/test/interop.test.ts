import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redlock, ResourceHeldError } from "../index.ts";
import { startCluster, type TestCluster } from "./support/redis.ts";
import { NodeRedlock, NodeRedlockExecutionError } from "./support/node-redlock.ts";

describe("interop with node-redlock on the same keys", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  let ours: Redlock;
  let theirs: NodeRedlock;
  beforeAll(async () => {
    cluster = await startCluster(3);
    clients = cluster.clients();
    ours = new Redlock(clients, { retryCount: 1, retryDelayMs: 10, retryJitterMs: 0 });
    theirs = new NodeRedlock(clients, { retryCount: 1, retryDelay: 10, retryJitter: 0 });
  });
  afterAll(async () => {
    await ours.quit();
    await cluster.close();
  });

  it("a resource node-redlock holds is refused by this engine (holder unknown: a foreign value)", async () => {
    const theirLock = await theirs.acquire(["lock:shared"], 5000);
    const error: unknown = await ours.acquire(["lock:shared"], 5000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ResourceHeldError);
    expect((error as ResourceHeldError).heldBy[0]).toMatchObject({ value: theirLock.value, holder: null });
    await theirLock.release();
    const lock = await ours.acquire(["lock:shared"], 5000);
    await ours.release(lock);
  });

  it("a resource this engine holds is refused by node-redlock, which can take it after release", async () => {
    const lock = await ours.acquire(["lock:shared2", "lock:shared3"], 5000);
    await expect(theirs.acquire(["lock:shared3"], 5000)).rejects.toBeInstanceOf(NodeRedlockExecutionError);
    expect((await ours.release(lock)).released).toBe(true);
    const theirLock = await theirs.acquire(["lock:shared2", "lock:shared3"], 5000);
    await theirLock.release();
  });
});
