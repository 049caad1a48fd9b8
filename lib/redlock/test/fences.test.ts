import Redis from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AcquireAbortedError, decodeLockValue, defineScript, FENCE_MARKER_KEY, fenceKey, fencedWrite, FenceUnavailableError, forceRelease, Redlock, type RedlockClient, type RedlockSettings } from "../index.ts";
import { ACQUIRE_LUA } from "../acquire.lua.ts";
import { startProxy, type TcpProxy } from "./support/proxy.ts";
import { startCluster, type TestCluster } from "./support/redis.ts";
import { until } from "./support/wait.ts";

describe("fencing tokens", () => {
  let cluster: TestCluster;
  let proxies: TcpProxy[];
  /** The engine's clients, through the proxies: they fail fast and never replay a command after a cut. */
  let clients: Redis[];
  /** Straight to the nodes, to look at them and to write as an application would. */
  let direct: Redis[];
  const engines: Redlock[] = [];
  const engine = (settings: RedlockSettings = {}) => {
    const redlock = new Redlock(clients, { fenced: true, nodeTimeoutMs: 400, retryCount: 3, retryDelayMs: 20, ...settings });
    engines.push(redlock);
    return redlock;
  };
  // Every engine client answers (after a cut, a client may still look connected for a moment).
  const allReady = () =>
    until("every engine client answers", async () => (await Promise.all(clients.map((c) => c.ping().then(() => true, () => false)))).every(Boolean));
  const fencesOn = (resource: string) => Promise.all(direct.map((c) => c.get(fenceKey(resource))));
  const markers = () => Promise.all(direct.map((c) => c.get(FENCE_MARKER_KEY)));

  beforeAll(async () => {
    cluster = await startCluster(3);
    proxies = await Promise.all(cluster.ports.map((port) => startProxy(port)));
    clients = proxies.map((p) => {
      const c = new Redis(p.port, "127.0.0.1", {
        enableOfflineQueue: false,
        autoResendUnfulfilledCommands: false,
        maxRetriesPerRequest: 0,
        retryStrategy: () => 20,
      });
      c.on("error", () => {
        // Faults are made on purpose here; they surface through the engine's votes.
      });
      return c;
    });
    direct = cluster.clients();
    await allReady();
  });
  // A test that failed while a node answered late leaves no delay behind for the next ones.
  afterEach(() => {
    for (const proxy of proxies) proxy.delay(0);
  });
  afterAll(async () => {
    await Promise.all(engines.map((e) => e.quit()));
    for (const c of clients) c.disconnect();
    await Promise.all(proxies.map((p) => p.close()));
    await cluster.close();
  });

  it("an unfenced acquisition issues no fence and writes no fence key or fence marker", async () => {
    const redlock = engine({ fenced: false });
    const lock = await redlock.acquire(["lock:plain"], 1000);
    expect(lock.fence).toBeNull();
    await redlock.release(lock);
    for (const client of direct) expect(await client.exists(fenceKey("lock:plain"), FENCE_MARKER_KEY)).toBe(0);
    // The first fenced acquisition of a new deployment seeds and marks every node.
    const fenced = await redlock.acquire(["lock:plain"], 1000, { fenced: true });
    expect(fenced.fence).toBe("1");
    expect((await markers()).every((m) => typeof m === "string" && m.length > 0)).toBe(true);
    const recorded = await fencesOn("lock:plain");
    expect(recorded.filter((f) => f === "1").length).toBeGreaterThanOrEqual(2);
    await redlock.release(fenced);
  });

  it("never repeat when one node missed a commit, another came back empty and the third is slow", async () => {
    const resource = "lock:schedule";
    const holder = engine();
    for (let i = 0; i < 4; i++) await holder.release(await holder.acquire([resource], 10_000));
    // C (node 2) is cut off while the holder takes fence 5: it is recorded on A and B only.
    proxies[2]!.partition();
    const late = await holder.acquire([resource], 1000);
    expect(late.fence).toBe("5");
    expect((await fencesOn(resource)).slice(0, 2)).toEqual(["5", "5"]);
    // The holder stalls past its TTL: the lock runs out on A and B under it.
    await until("the stalled holder's lock expired", async () => (await Promise.all(direct.slice(0, 2).map((c) => c.exists(resource)))).every((n) => n === 0));
    // B restarts empty, C is reachable again with fence 4, and A answers late but within the node timeout.
    await cluster.restart(1);
    expect(await direct[1]!.dbsize()).toBe(0);
    proxies[2]!.heal();
    proxies[0]!.delay(120);
    await allReady();
    expect(await fencesOn(resource)).toEqual(["5", null, "4"]);

    const successor = engine();
    const next = await successor.acquire([resource], 5000);
    proxies[0]!.delay(0);
    expect(BigInt(next.fence!)).toBeGreaterThan(5n);
    // The next holder writes with its fence; the stalled holder's late write is refused.
    expect((await fencedWrite(direct[0]!, "stock:schedule", next.fence!, { type: "set", value: "next" })).applied).toBe(true);
    expect(await fencedWrite(direct[0]!, "stock:schedule", late.fence!, { type: "set", value: "late" })).toMatchObject({ applied: false, reason: "stale-fence", value: "next" });
    // B, found without its marker, is re-seeded from A and C in the background.
    await until("node 1 is re-seeded and marked", async () => (await direct[1]!.get(FENCE_MARKER_KEY)) !== null);
    expect(await direct[1]!.get(fenceKey(resource))).toBe(next.fence);
    expect((await holder.release(late)).released).toBe(false);
    await successor.release(next);
  });

  it("strictly increase when every node in turn misses a commit, comes back empty and answers slowly", async () => {
    const resource = "lock:rotating";
    const pair = [engine(), engine()];
    let previous = 0n;
    const take = async (turn: number) => {
      const redlock = pair[turn % 2]!;
      const lock = await redlock.acquire([resource], 2000);
      const fence = BigInt(lock.fence!);
      expect(fence).toBeGreaterThan(previous);
      expect(decodeLockValue(lock.value)?.fence).toBe(lock.fence);
      previous = fence;
      await redlock.release(lock);
    };
    for (let round = 0; round < 6; round++) {
      const [missed, emptied, slow] = [round % 3, (round + 1) % 3, (round + 2) % 3];
      proxies[missed]!.partition();
      await take(round);
      await cluster.restart(emptied);
      proxies[missed]!.heal();
      proxies[slow]!.delay(120);
      await allReady();
      await take(round + 1);
      proxies[slow]!.delay(0);
      await until(`node ${emptied} is re-seeded`, async () => (await direct[emptied]!.get(FENCE_MARKER_KEY)) !== null);
      await take(round);
    }
  });

  it("a repair that could not read its sources in time is tried again by itself, with no acquisition to trigger it", async () => {
    const resource = "lock:repair-retry";
    const redlock = engine();
    await redlock.release(await redlock.acquire([resource], 2000));
    let lock: Awaited<ReturnType<typeof redlock.acquire>>;
    for (let attempt = 1; ; attempt++) {
      await cluster.restart(1);
      await allReady();
      // The acquisition finds node 1 unmarked and starts its repair; node 2 then answers past the node
      // timeout, so the repair reads only one marked source of the two it needs and gives up.
      lock = await redlock.acquire([resource], 2000);
      proxies[2]!.delay(1500);
      await new Promise((r) => setTimeout(r, 600));
      if ((await direct[1]!.get(FENCE_MARKER_KEY)) === null) break;
      // The repair read node 2 before its answers were delayed (a busy machine): the scene is set again.
      proxies[2]!.delay(0);
      await redlock.release(lock);
      if (attempt === 3) throw new Error("three times the repair read node 2 before its answers were delayed");
    }
    proxies[2]!.delay(0);
    await until("node 1 is re-seeded without another acquisition", async () => (await direct[1]!.get(FENCE_MARKER_KEY)) !== null, 8000);
    expect(BigInt((await direct[1]!.get(fenceKey(resource)))!)).toBeGreaterThanOrEqual(BigInt(lock.fence!));
    await redlock.release(lock);
  });

  it("a node that comes back empty again within a second of its repair is repaired once that second is over, with no acquisition to trigger it", async () => {
    const resource = "lock:repair-again";
    const redlock = engine();
    await redlock.release(await redlock.acquire([resource], 2000));
    for (let attempt = 1; ; attempt++) {
      await cluster.restart(1);
      await allReady();
      // This acquisition finds node 1 unmarked and repairs it: the engine's last repair of node 1 starts here.
      const repairedFrom = performance.now();
      await redlock.release(await redlock.acquire([resource], 2000));
      await until("node 1 is re-seeded", async () => (await direct[1]!.get(FENCE_MARKER_KEY)) !== null);
      // Node 1 restarts empty once more, and one acquisition finds it so within the second after that repair.
      await cluster.restart(1);
      await allReady();
      await redlock.release(await redlock.acquire([resource], 2000));
      if (performance.now() - repairedFrom < 900) break;
      // The restart took most of the second (a busy machine): the scene is set again.
      await until("node 1 is re-seeded", async () => (await direct[1]!.get(FENCE_MARKER_KEY)) !== null);
      if (attempt === 3) throw new Error("three times node 1 took most of a second to restart");
    }
    expect(await direct[1]!.get(FENCE_MARKER_KEY)).toBeNull();
    await until("node 1 is re-seeded without another acquisition", async () => (await direct[1]!.get(FENCE_MARKER_KEY)) !== null, 3000);
    expect(await direct[1]!.get(fenceKey(resource))).toBe(await direct[0]!.get(fenceKey(resource)));
  });

  it("refuse with FenceUnavailableError when fewer than a quorum kept their fences, until an operator re-seeds", async () => {
    const resource = "lock:two-lost";
    const redlock = engine({ retryCount: 0 });
    const before = await redlock.acquire([resource], 5000);
    await redlock.release(before);
    await cluster.restart(1);
    await cluster.restart(2);
    await allReady();
    const error: unknown = await redlock.acquire([resource], 5000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FenceUnavailableError);
    const refused = error as FenceUnavailableError;
    expect(refused.reason).toBe("untrusted");
    expect(refused.nodes.map((n) => n.state)).toEqual(["trusted", "untrusted", "untrusted"]);
    // Nothing was left taken.
    for (const client of direct) expect(await client.exists(resource)).toBe(0);
    // The operator accepts the risk (node 0 kept every fence here) and re-seeds from all nodes.
    const reseeded = await redlock.reseedFences();
    expect(reseeded.nodes.map((n) => n.result)).toEqual(["kept", "marked", "marked"]);
    const after = await redlock.acquire([resource], 5000);
    expect(BigInt(after.fence!)).toBeGreaterThan(BigInt(before.fence!));
    await redlock.release(after);
  });

  it("continue from fences written before markers existed: every node is seeded from the highest", async () => {
    const resource = "lock:legacy";
    await Promise.all(direct.map((c) => c.del(FENCE_MARKER_KEY)));
    await direct[1]!.set(fenceKey(resource), "41");
    await direct[2]!.set(fenceKey(resource), "40");
    const redlock = engine({ retryCount: 0 });
    const lock = await redlock.acquire([resource], 5000);
    expect(lock.fence).toBe("42");
    expect((await markers()).every((m) => m !== null)).toBe(true);
    await redlock.release(lock);
  });

  it("an acquisition aborted while it seeds a new deployment's fences leaves no lock behind, waiters or not", async () => {
    for (const wakeOnRelease of [true, false]) {
      const resource = `lock:seed-abort-${wakeOnRelease}`;
      await Promise.all(direct.map((c) => c.del(FENCE_MARKER_KEY)));
      const controller = new AbortController();
      const acquireSha = defineScript(ACQUIRE_LUA).sha;
      // The engine's own clients, that abort the acquisition when the seeding of the nodes sends its first
      // script (the attempt before it was granted on every node).
      const aborting = clients.map((client): RedlockClient => ({
        evalsha: (sha, ...rest) => {
          if (sha !== acquireSha) controller.abort(new Error("shutting down"));
          return client.evalsha(sha, ...rest);
        },
        eval: (...args) => client.eval(...args),
        set: (...args) => client.set(...args),
        duplicate: () => client.duplicate(),
      }));
      const redlock = new Redlock(aborting, { fenced: true, nodeTimeoutMs: 400, retryCount: 3, retryDelayMs: 20, wakeOnRelease });
      engines.push(redlock);
      await expect(redlock.acquire([resource], 60_000, { signal: controller.signal })).rejects.toBeInstanceOf(AcquireAbortedError);
      // Nothing holds the resource: another holder takes it at once, not after the aborted one's TTL.
      await until("the aborted acquisition's lock is gone from every node", async () => (await Promise.all(direct.map((c) => c.exists(resource)))).every((n) => n === 0));
      const next = await engine({ retryCount: 0 }).acquire([resource], 5000);
      await next.release();
    }
  });

  it("the first fenced acquisition of a deployment waits for a node that answers late, rather than fail as if fences were lost", async () => {
    const resource = "lock:first";
    await Promise.all(direct.map((c) => c.del(FENCE_MARKER_KEY)));
    await direct[0]!.set(fenceKey(resource), "7");
    const redlock = engine({ retryCount: 3 });
    // No node has a marker, so seeding them needs every node: node 2 answers nothing until the first attempt
    // failed. That is no loss of fences (which only an operator could repair): a later attempt can seed.
    cluster.pause(2);
    redlock.once("attempt-failed", () => cluster.resume(2));
    let lock: Awaited<ReturnType<Redlock["acquire"]>>;
    try {
      lock = await redlock.acquire([resource], 5000);
    } finally {
      if (cluster.paused(2)) cluster.resume(2);
    }
    expect(lock.fence).toBe("8");
    expect((await markers()).every((m) => m !== null)).toBe(true);
    await redlock.release(lock);
  });

  it("a damaged fence key is a FenceUnavailableError, and nothing is taken", async () => {
    const resource = "lock:damaged";
    await Promise.all(direct.map((c) => c.set(fenceKey(resource), "not a number")));
    const error: unknown = await engine({ retryCount: 0 }).acquire([resource], 5000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(FenceUnavailableError);
    expect((error as FenceUnavailableError).reason).toBe("damaged");
    for (const client of direct) expect(await client.exists(resource)).toBe(0);
    // On one node only, the other two vouch for the fence.
    await direct[0]!.del(fenceKey(resource));
    await direct[1]!.del(fenceKey(resource));
    const lock = await engine({ retryCount: 0 }).acquire([resource], 5000);
    expect(lock.fence).toBe("1");
    await lock.release();
  });

  it("a holder that paused past its TTL has its late write rejected once the next holder wrote", async () => {
    const a = engine();
    const b = engine({ retryCount: -1 });
    const stock = direct[1]!;
    await stock.set("stock", "10");
    const first = await a.acquire(["lock:stock"], 150);
    // A stop-the-world pause: the lock expires under its holder.
    await until("the first holder's lock expired", async () => (await Promise.all(direct.map((c) => c.exists("lock:stock")))).every((n) => n === 0));
    const second = await b.acquire(["lock:stock"], 5000);
    expect(BigInt(second.fence!)).toBeGreaterThan(BigInt(first.fence!));
    expect((await fencedWrite(stock, "stock", second.fence!, { type: "incrby", by: -1, min: 0 })).applied).toBe(true);
    const late = await fencedWrite(stock, "stock", first.fence!, { type: "incrby", by: -1, min: 0 });
    expect(late).toMatchObject({ applied: false, reason: "stale-fence", value: "9" });
    await b.release(second);
  });

  it("a fenced write keeps the key's expiry, and a fence write keeps one the application set", async () => {
    const redlock = engine();
    const node = direct[0]!;
    await node.set("stock:expiring", "10", "PX", 60_000);
    // An application that lets its keys expire (a sale's stock, a run's scratch keys) expires their fences too.
    await node.set(`fence-seen:stock:expiring`, "0", "PX", 60_000);
    await Promise.all(direct.map((c) => c.set(fenceKey("lock:expiring"), "0", "PX", 60_000)));
    const lock = await redlock.acquire(["lock:expiring"], 5_000);
    expect((await fencedWrite(node, "stock:expiring", lock.fence!, { type: "incrby", by: -1, min: 0 })).applied).toBe(true);
    expect(await node.get("stock:expiring")).toBe("9");
    expect(await node.pttl("stock:expiring"), "the stock's TTL after a fenced INCRBY").toBeGreaterThan(50_000);
    expect(await node.pttl("fence-seen:stock:expiring"), "the last fence's TTL").toBeGreaterThan(50_000);
    expect((await fencedWrite(node, "stock:expiring", lock.fence!, { type: "set", value: "8" })).applied).toBe(true);
    expect(await node.pttl("stock:expiring"), "the stock's TTL after a fenced SET").toBeGreaterThan(50_000);
    for (const c of direct) expect(await c.pttl(fenceKey("lock:expiring")), "the lock's fence key's TTL").toBeGreaterThan(50_000);
    // A key without an expiry keeps none: nothing is made to expire that was not.
    await node.set("stock:kept", "3");
    expect((await fencedWrite(node, "stock:kept", lock.fence!, { type: "incrby", by: -1 })).applied).toBe(true);
    expect(await node.pttl("stock:kept")).toBe(-1);
    expect(await node.pttl("fence-seen:stock:kept")).toBe(-1);
    await redlock.release(lock);
  });

  it("after a force release the next fenced holder outranks the evicted one", async () => {
    const redlock = engine();
    const evicted = await redlock.acquire(["lock:evict"], 10_000);
    await forceRelease(direct, "lock:evict", { token: evicted.value });
    const next = await redlock.acquire(["lock:evict"], 10_000);
    expect(BigInt(next.fence!)).toBeGreaterThan(BigInt(evicted.fence!));
    await redlock.release(next);
    expect((await redlock.release(evicted)).released).toBe(false);
  });

  it("no lock or force release can be made on the engine's own keys: a lock cannot pose as a fence marker, nor a release delete a fence", async () => {
    const redlock = engine();
    await allReady();
    const first = await redlock.acquire(["lock:named"], 1000);
    await redlock.release(first);
    // The acquisition resolves once a quorum has answered: the last node's fence write may still be on its way.
    await until("every node recorded the fence", async () => (await fencesOn("lock:named")).every((fence) => fence !== null));
    const fences = await fencesOn("lock:named");
    const marked = await markers();
    // A lock on the marker of a node that came back empty would make its lost fences count again; a force
    // release of `fence:` or `fence-seen:` would let a fence repeat or a stale fenced write land.
    for (const name of [FENCE_MARKER_KEY, "lockscope:fence-reseed", fenceKey("lock:named"), "fence-seen:stock", "waitq:lock:named", "waitqd:lock:named", "waitqg:lock:named"]) {
      const taken: unknown = await redlock.acquire(["lock:other", name], 60_000, { fenced: false, retryCount: 0 }).catch((e: unknown) => e);
      expect(taken).toBeInstanceOf(TypeError);
      expect((taken as Error).message).toContain("named like none of the keys the engine keeps beside its locks");
      const forced: unknown = await forceRelease(direct, name).catch((e: unknown) => e);
      expect(forced).toBeInstanceOf(TypeError);
      expect((forced as Error).message).toContain(`Expected \`resource\` to be named like none of the keys the engine keeps beside its locks`);
    }
    expect(await fencesOn("lock:named")).toEqual(fences);
    expect(await markers()).toEqual(marked);
    for (const client of direct) expect(await client.exists("lock:other")).toBe(0);
    const next = await redlock.acquire(["lock:named"], 1000);
    expect(BigInt(next.fence!)).toBeGreaterThan(BigInt(first.fence!));
    await redlock.release(next);
  });
});
