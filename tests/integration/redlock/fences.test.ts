import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decodeLockValue, fenceKey, fencedWrite, forceRelease, Redlock } from "@/lib/redlock";
import { startCluster, type TestCluster } from "../../support/redis";
import { failFastClients, ready, sleep } from "./support";

describe("fencing tokens", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  beforeAll(async () => {
    cluster = await startCluster(3);
    clients = await failFastClients(cluster);
  });
  afterAll(async () => {
    await cluster.close();
  });

  it("strictly increase across 1,000 hand-overs, also when each quorum differs and a node comes back empty", async () => {
    // Two engines stand for two processes handing the lock back and forth.
    const engines = [0, 1].map(() => new Redlock(clients, { fenced: true, retryCount: 5, retryDelayMs: 20, nodeTimeoutMs: 150 }));
    let previous = 0n;
    let down = -1;
    for (let handOver = 0; handOver < 1000; handOver++) {
      if (handOver % 100 === 50) {
        // Rotate which node is down: the one that was down comes back EMPTY (no fence counter at all),
        // so the next quorum is a different pair than the last, with only one node that saw the fences.
        const next = (down + 1) % 3;
        if (down >= 0) await cluster.restart(down);
        await cluster.kill(next);
        down = next;
        await sleep(60); // the fail-fast client of the restarted node reconnects
      }
      const engine = engines[handOver % 2]!;
      const lock = await engine.acquire(["lock:fenced"], 2000);
      expect(lock.fence).not.toBeNull();
      const fence = BigInt(lock.fence!);
      expect(fence).toBeGreaterThan(previous);
      expect(decodeLockValue(lock.value)?.fence).toBe(lock.fence);
      previous = fence;
      await engine.release(lock);
    }
    expect(down).toBeGreaterThanOrEqual(0);
    await cluster.restart(down);
    await sleep(60);
    await Promise.all(engines.map((e) => e.quit()));
  });

  it("an unfenced acquisition issues no fence and touches no fence key", async () => {
    // The test before restarts nodes: wait until every fail-fast client is connected again.
    await Promise.all(clients.map(ready));
    const redlock = new Redlock(clients);
    const lock = await redlock.acquire(["lock:plain"], 1000);
    expect(lock.fence).toBeNull();
    await redlock.release(lock);
    for (const client of clients) expect(await client.exists(fenceKey("lock:plain"))).toBe(0);
    const fenced = await redlock.acquire(["lock:plain"], 1000, { fenced: true });
    expect(fenced.fence).toBe("1");
    // The fence is recorded on a quorum before the lock is handed out; the last node may follow a moment later.
    const recorded = await Promise.all(clients.map((c) => c.get(fenceKey("lock:plain"))));
    expect(recorded.filter((f) => f === "1").length).toBeGreaterThanOrEqual(2);
    await redlock.release(fenced);
  });

  it("a holder that paused past its TTL has its late write rejected once the next holder wrote", async () => {
    const a = new Redlock(clients, { fenced: true });
    const b = new Redlock(clients, { fenced: true, retryCount: -1, retryDelayMs: 20 });
    const stock = clients[1]!;
    await stock.set("stock", "10");
    const first = await a.acquire(["lock:stock"], 150);
    await sleep(200); // a stop-the-world pause: the lock expires under its holder
    const second = await b.acquire(["lock:stock"], 5000);
    expect(BigInt(second.fence!)).toBeGreaterThan(BigInt(first.fence!));
    expect((await fencedWrite(stock, "stock", second.fence!, { type: "incrby", by: -1, min: 0 })).applied).toBe(true);
    const late = await fencedWrite(stock, "stock", first.fence!, { type: "incrby", by: -1, min: 0 });
    expect(late).toMatchObject({ applied: false, reason: "stale-fence", value: "9" });
    await b.release(second);
  });

  it("after a force release the next fenced holder outranks the evicted one", async () => {
    const redlock = new Redlock(clients, { fenced: true });
    const evicted = await redlock.acquire(["lock:evict"], 10_000);
    await forceRelease(clients, "lock:evict", { token: evicted.value });
    const next = await redlock.acquire(["lock:evict"], 10_000);
    expect(BigInt(next.fence!)).toBeGreaterThan(BigInt(evicted.fence!));
    await redlock.release(next);
    expect((await redlock.release(evicted)).released).toBe(false);
  });
});
