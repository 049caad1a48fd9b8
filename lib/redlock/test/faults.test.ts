import IORedis from "ioredis";
import type Redis from "ioredis";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import CompatRedlock, { ExecutionError, Lock as CompatLock } from "../compat.ts";
import { AnswerLostError, fencedWrite, forceRelease, LockLostError, NodesFailedError, NodeTimeoutError, Redlock, ResourceHeldError, type RedlockClient } from "../index.ts";
import { until } from "./support/wait.ts";
import { startCluster, type TestCluster } from "./support/redis.ts";
import { aborted, failFastClients } from "./support/support.ts";
import { startProxy, type TcpProxy } from "./support/proxy.ts";

/** Every client answers a PING (a fail-fast client reconnects a moment after its node came back). */
const answering = (clients: Redis[]) =>
  until("every client answers", async () => (await Promise.all(clients.map((c) => c.ping().then(() => true, () => false)))).every(Boolean));

describe.each([1, 3, 5])("Redlock on %i node(s)", (size) => {
  let cluster: TestCluster;
  let clients: Redis[];
  let redlock: Redlock;
  beforeAll(async () => {
    cluster = await startCluster(size);
    clients = await failFastClients(cluster);
    redlock = new Redlock(clients, { retryCount: 3, retryDelayMs: 20, retryJitterMs: 10, nodeTimeoutMs: 150 });
  });
  afterAll(async () => {
    await redlock.quit();
    await cluster.close();
  });

  it("needs a quorum of floor(N/2)+1 and keeps contenders exclusive", async () => {
    expect(redlock.quorum).toBe(Math.floor(size / 2) + 1);
    const contenders = Array.from({ length: 3 }, () => new Redlock(clients, { retryCount: -1, retryDelayMs: 20 }));
    let inside = 0;
    let overlaps = 0;
    await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const engine = contenders[i % 3]!;
        const lock = await engine.acquire(["lock:size"], 2000);
        if (++inside > 1) overlaps += 1;
        await clients[0]!.ping(); // some work inside the critical section: a round trip
        inside -= 1;
        await engine.release(lock);
      }),
    );
    await Promise.all(contenders.map((c) => c.quit()));
    expect(overlaps).toBe(0);
  });

  it(`survives ${Math.floor((size - 1) / 2)} dead node(s) and refuses with NodesFailedError beyond that`, async () => {
    const tolerated = Math.floor((size - 1) / 2);
    for (let i = 0; i < tolerated; i++) await cluster.kill(i);
    const lock = await redlock.acquire(["lock:quorum"], 2000);
    expect((await redlock.release(lock)).released).toBe(true);

    await cluster.kill(tolerated);
    const error: unknown = await redlock.acquire(["lock:quorum"], 2000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodesFailedError);
    const failed = error as NodesFailedError;
    expect(failed.reason).toBe("errors");
    expect(failed.attempts).toBe(4);
    expect(failed.votes.filter((v) => v.vote === "error").map((v) => v.index)).toEqual(Array.from({ length: tolerated + 1 }, (_, i) => i));
    expect(failed.votes.filter((v) => v.vote === "error").every((v) => v.error instanceof Error)).toBe(true);

    for (let i = 0; i <= tolerated; i++) await cluster.restart(i);
    await answering(clients);
  });
});

describe("wake-ups when a node fails", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  beforeAll(async () => {
    cluster = await startCluster(3);
    clients = await failFastClients(cluster);
  });
  afterAll(async () => {
    await cluster.close();
  });

  it("still wake a waiter at once after the node its engine listened on died", async () => {
    const holder = new Redlock(clients, { nodeTimeoutMs: 150 });
    // Retry delay and holder's TTL outlast the test: only a wake-up or a grant can end the wait.
    const waiter = new Redlock(clients, { retryCount: -1, retryDelayMs: 120_000, retryJitterMs: 0, nodeTimeoutMs: 150 });
    let refusals = 0;
    waiter.on("attempt-failed", () => (refusals += 1));
    const lock = await holder.acquire(["lock:wake-failover"], 120_000);
    const waiting = waiter.acquire(["lock:wake-failover"], 5000);
    // Refused, queued, and listening: a fresh engine tries once more when its subscriptions take effect.
    await until("refused twice", () => refusals === 2);
    await cluster.kill(0);
    await lock.release();
    const next = await waiting;
    await waiter.release(next);
    await Promise.all([holder.quit(), waiter.quit()]);
    await cluster.restart(0);
    await answering(clients);
  });

  it("a lock held through rolling restarts of empty nodes stays exclusive: extensions write it back", async () => {
    const holder = new Redlock(clients, { nodeTimeoutMs: 150, automaticExtensionThresholdMs: 400 });
    const restored: number[] = [];
    holder.on("restored", (event) => restored.push(...event.nodes));
    await holder.using(["lock:rolling"], 800, async (signal) => {
      for (const node of [0, 1]) {
        await cluster.restart(node);
        await answering(clients);
        await until(`node ${node} holds the lock again`, () => restored.includes(node));
      }
      // Without the write-backs the lock would now be on node 2 alone, and free to take on 0 and 1.
      const other = new Redlock(clients, { retryCount: 0, nodeTimeoutMs: 150 });
      await expect(other.acquire(["lock:rolling"], 1000)).rejects.toBeInstanceOf(ResourceHeldError);
      expect(signal.aborted).toBe(false);
      await other.quit();
    });
    await holder.quit();
  });
});

describe("slow and stopped nodes", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  beforeAll(async () => {
    cluster = await startCluster(3);
    clients = cluster.clients({ maxRetriesPerRequest: 0 });
  });
  afterEach(() => {
    cluster.resume(0);
  });

  it("fencedWrite gives up on a stopped node after its timeout", async () => {
    cluster.pause(0);
    const error: unknown = await fencedWrite(clients[0]!, "stock:stopped", "7", { type: "set", value: "1" }, { timeoutMs: 100 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodeTimeoutError);
    cluster.resume(0);
  });
  afterAll(async () => {
    await cluster.close();
  });

  it("does not stall on a node stopped with SIGSTOP beyond the per-node timeout", async () => {
    const redlock = new Redlock(clients, { nodeTimeoutMs: 100, retryCount: 0 });
    const errors: number[] = [];
    redlock.on("node-error", (e) => errors.push(e.index));
    cluster.pause(0);
    const stopped = performance.now();
    const lock = await redlock.acquire(["lock:paused"], 5000);
    await redlock.extend(lock, 5000);
    expect((await redlock.release(lock)).released).toBe(true);
    // The node stays stopped for the whole sequence; each step needed only the other two.
    expect(performance.now() - stopped).toBeLessThan(3000);
    expect(cluster.paused(0)).toBe(true);

    // A held resource with one node stopped: the refusal waits at most the timeout for that node.
    const holder = await redlock.acquire(["lock:paused-held"], 5000);
    const error: unknown = await redlock.acquire(["lock:paused-held"], 5000).catch((e: unknown) => e);
    expect((error as Error).name).toBe("ResourceHeldError");
    await redlock.release(holder);
    cluster.resume(0);
    // Commands queued for the stopped node run on resume; the releases queued behind them clean up.
    await until("the resumed node holds neither lock", async () => (await clients[0]!.exists("lock:paused", "lock:paused-held")) === 0);
    await redlock.quit();
  });

  it("names the right node when one times out in the script that follows a refused first try", async () => {
    // Node 2 answers plain commands but never a script; nodes 1 and 2 hold another client's lock.
    const mute: RedlockClient[] = clients.map((c, i) => ({
      evalsha: i === 2 ? () => new Promise(() => {}) : c.evalsha.bind(c),
      eval: i === 2 ? () => new Promise(() => {}) : c.eval.bind(c),
      set: (key: string, value: string, px: "PX", ttlMs: number, nx: "NX") => c.set(key, value, px, ttlMs, nx),
      duplicate: () => c.duplicate(),
    }));
    await Promise.all([clients[1]!.set("lock:mute", "someone else", "PX", 5000), clients[2]!.set("lock:mute", "someone else", "PX", 5000)]);
    const redlock = new Redlock(mute, { nodeTimeoutMs: 100, retryCount: 0 });
    const errors: Array<{ index: number; error: Error }> = [];
    redlock.on("node-error", (e) => errors.push(e));
    const error: unknown = await redlock.acquire(["lock:mute"], 5000).catch((e: unknown) => e);
    // Node 0 granted (and was released), node 1 refused, node 2 timed out: taken, not broken.
    expect(error).toBeInstanceOf(ResourceHeldError);
    const vote = (error as ResourceHeldError).votes[2]!;
    expect(vote.vote).toBe("error");
    expect(vote.vote === "error" && vote.error).toBeInstanceOf(NodeTimeoutError);
    expect(vote.vote === "error" && (vote.error as NodeTimeoutError).index).toBe(2);
    expect(errors.map((e) => [e.index, (e.error as NodeTimeoutError).index])).toEqual([[2, 2]]);
    expect(await clients[0]!.exists("lock:mute")).toBe(0);
    await redlock.quit();
  });

  it("a failed extension says how many nodes agreed and why each other one did not, naming a node the round did not wait for", async () => {
    // Nodes switched to never answer a script (muted) or to fail it at once (broken), per test step.
    const muted = new Set<number>();
    const broken = new Set<number>();
    const switched: RedlockClient[] = clients.map((c, i) => ({
      evalsha: (...args: Parameters<Redis["evalsha"]>) => (muted.has(i) ? new Promise(() => {}) : broken.has(i) ? Promise.reject(new Error(`node ${i} is broken`)) : c.evalsha(...args)),
      eval: (...args: Parameters<Redis["eval"]>) => (muted.has(i) ? new Promise(() => {}) : broken.has(i) ? Promise.reject(new Error(`node ${i} is broken`)) : c.eval(...args)),
      set: (key: string, value: string, px: "PX", ttlMs: number, nx: "NX") => c.set(key, value, px, ttlMs, nx),
      duplicate: () => c.duplicate(),
    }));
    const redlock = new Redlock(switched, { nodeTimeoutMs: 100, retryCount: 0 });
    try {
      const lock = await redlock.acquire(["lock:split-extend"], 10_000);
      await until("every node holds the lock", async () => (await Promise.all(clients.map((c) => c.get("lock:split-extend")))).every((v) => v === lock.value));

      // Node 2 still holds it, node 1 holds another value, node 0 does not answer: one vote for, quorum 2.
      await clients[1]!.set("lock:split-extend", "someone else", "PX", 10_000);
      muted.add(0);
      const split: unknown = await redlock.extend(lock, 10_000).catch((e: unknown) => e);
      expect(split).toBeInstanceOf(NodesFailedError);
      expect((split as Error).message).toBe("Only 1 of 3 nodes agreed, quorum is 2 (node 0: Node 0 did not answer within 100 ms; node 1: refused)");

      // Node 1 fails at once and node 2 refuses: the round is decided without node 0, which had not answered.
      await clients[2]!.set("lock:split-extend", "someone else", "PX", 10_000);
      await clients[1]!.set("lock:split-extend", lock.value, "PX", 10_000);
      broken.add(1);
      const undecided: unknown = await redlock.extend(lock, 10_000).catch((e: unknown) => e);
      expect(undecided).toBeInstanceOf(NodesFailedError);
      expect((undecided as NodesFailedError).votes.map((v) => v.vote)).toEqual(["pending", "error", "against"]);
      expect((undecided as Error).message).toBe("Only 1 of 3 nodes answered, quorum is 2 (node 0: had not answered when the round was decided; node 1: node 1 is broken; node 2: refused)");
    } finally {
      muted.clear();
      broken.clear();
      await redlock.quit();
    }
  });

  it("using(): a lock whose extensions failed until it expired is reported lost with those nodes' votes and why", async () => {
    // Nodes 0 and 1 fail every script once the lock is taken.
    const broken = new Set<number>();
    const switched: RedlockClient[] = clients.map((c, i) => ({
      evalsha: (...args: Parameters<Redis["evalsha"]>) => (broken.has(i) ? Promise.reject(new Error(`node ${i} is broken`)) : c.evalsha(...args)),
      eval: (...args: Parameters<Redis["eval"]>) => (broken.has(i) ? Promise.reject(new Error(`node ${i} is broken`)) : c.eval(...args)),
      set: (key: string, value: string, px: "PX", ttlMs: number, nx: "NX") => c.set(key, value, px, ttlMs, nx),
      duplicate: () => c.duplicate(),
    }));
    const redlock = new Redlock(switched, { nodeTimeoutMs: 100, retryDelayMs: 50, automaticExtensionThresholdMs: 300 });
    try {
      const reason = await redlock.using(["lock:extensions-failed"], 1000, async (signal) => {
        broken.add(0);
        broken.add(1);
        await aborted(signal);
        return signal.reason as unknown;
      });
      expect(reason).toBeInstanceOf(LockLostError);
      const lost = reason as LockLostError;
      // (The failed extensions were decided by the two failures, before node 2 answered.)
      expect(lost.votes.map((v) => v.vote)).toEqual(["error", "error", "pending"]);
      expect(lost.message).toBe(
        'Lock on ["lock:extensions-failed"] expired before it could be extended: Only 0 of 3 nodes answered, quorum is 2 (node 0: node 0 is broken; node 1: node 1 is broken; node 2: had not answered when the round was decided)',
      );
    } finally {
      broken.clear();
      await redlock.quit();
    }
  });

  it("never returns a lock whose validity ran out while the nodes answered", async () => {
    // A client process that stalls (a long GC pause, a blocked event loop) right after each reply: the
    // nodes answer in time, but the whole 100 ms TTL is gone by the time the engine looks at the votes.
    const stall = (ms: number) => {
      const until = performance.now() + ms;
      while (performance.now() < until) {
        // busy: nothing else runs, as in a stop-the-world pause
      }
    };
    const slow: RedlockClient[] = clients.map((c) => ({
      evalsha: (sha: string, numkeys: number, ...args: Array<string | number>) =>
        c.evalsha(sha, numkeys, ...args).then((reply: unknown) => {
          stall(120);
          return reply;
        }),
      eval: (script: string, numkeys: number, ...args: Array<string | number>) =>
        c.eval(script, numkeys, ...args).then((reply: unknown) => {
          stall(120);
          return reply;
        }),
      set: (key: string, value: string, px: "PX", ttlMs: number, nx: "NX") =>
        c.set(key, value, px, ttlMs, nx).then((reply: unknown) => {
          stall(120);
          return reply;
        }),
      duplicate: () => c.duplicate(),
    }));
    const redlock = new Redlock(slow, { nodeTimeoutMs: 1000, retryCount: 2, retryDelayMs: 10, retryJitterMs: 0 });
    const reasons: string[] = [];
    redlock.on("attempt-failed", (e) => reasons.push(e.reason));
    const error: unknown = await redlock.acquire(["lock:slow"], 100).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NodesFailedError);
    expect((error as NodesFailedError).reason).toBe("too-slow");
    expect(reasons).toEqual(["validity", "validity", "validity"]);
    // Each too-late lock was released before the next attempt, not left to expire.
    for (const client of clients) expect(await client.exists("lock:slow")).toBe(0);
    await redlock.quit();
  });
});

describe("a client process that stalls while the nodes answer", () => {
  let cluster: TestCluster;
  let clients: Redis[];
  beforeAll(async () => {
    cluster = await startCluster(3);
    clients = cluster.clients({ maxRetriesPerRequest: 0 });
    await answering(clients);
  });
  afterAll(async () => {
    await cluster.close();
  });

  /**
   * The clients, and a pause of this process's event loop (a GC pause, a long synchronous task) armed for `ms` right
   * after the next round's commands went out: every node answers at once, and its reply waits in the socket,
   * unread, past the node timeout.
   */
  const stallingAfterSend = (ms: number) => {
    let armed = false;
    const sent = <T>(reply: Promise<T>): Promise<T> => {
      if (armed) {
        armed = false;
        // (After the round's other commands and its timer: the whole round is sent in one go.)
        process.nextTick(() => {
          const until = performance.now() + ms;
          while (performance.now() < until) {
            // busy: nothing else runs, as in a stop-the-world pause
          }
        });
      }
      return reply;
    };
    const stalling: RedlockClient[] = clients.map((c) => ({
      evalsha: (sha: string, numkeys: number, ...args: Array<string | number>) => sent(c.evalsha(sha, numkeys, ...args)),
      eval: (script: string, numkeys: number, ...args: Array<string | number>) => sent(c.eval(script, numkeys, ...args)),
      set: (key: string, value: string, px: "PX", ttlMs: number, nx: "NX") => sent(c.set(key, value, px, ttlMs, nx)),
      duplicate: () => c.duplicate(),
    }));
    // (Armed from a turn of the loop that read no socket: the pause then ends where Node runs due timers first.)
    const arm = () => new Promise<void>((resolve) => setImmediate(() => ((armed = true), resolve())));
    return { clients: stalling, arm };
  };

  it("counts the answers that came in time: the lock is taken, extended and released on every node", async () => {
    const stall = stallingAfterSend(300);
    const redlock = new Redlock(stall.clients, { nodeTimeoutMs: 100, retryCount: 0 });
    const nodeErrors: string[] = [];
    redlock.on("node-error", (e) => nodeErrors.push(`node ${e.index}: ${e.error.message}`));
    // The scripts loaded first: a pause then holds up one round trip, not also the fallback from EVALSHA to EVAL.
    await redlock.release(await redlock.extend(await redlock.acquire(["lock:warm-up"], 10_000), 10_000));
    await stall.arm();
    const lock = await redlock.acquire(["lock:stalled"], 10_000);
    await stall.arm();
    const extended = await redlock.extend(lock, 10_000);
    await stall.arm();
    const { released, votes } = await redlock.release(extended);
    expect(nodeErrors).toEqual([]);
    expect(released).toBe(true);
    // (The release resolves once a quorum deleted it: the last node's vote may still be pending.)
    expect(votes.map((v) => v.vote)).not.toContain("error");
    await until("every node deleted it", async () => (await Promise.all(clients.map((c) => c.exists("lock:stalled")))).every((n) => n === 0));
    await redlock.quit();
  });
});

describe("a release whose answer is lost with the connection", () => {
  let cluster: TestCluster;
  let proxies: TcpProxy[];
  let clients: Redis[];
  beforeAll(async () => {
    cluster = await startCluster(3);
    proxies = await Promise.all(cluster.ports.map((port) => startProxy(port)));
    // ioredis's defaults: what a dropped connection left unanswered is sent again once it reconnects.
    clients = proxies.map((p) => {
      const client = new IORedis(p.port, "127.0.0.1", { retryStrategy: () => 20 });
      client.on("error", () => {
        // The cut is made on purpose; the engine's votes tell what it did.
      });
      return client;
    });
    await answering(clients);
  });
  // A test's cut leaves its connections reconnecting: their handshake's replies (the ready check's INFO) must not be
  // the next test's lost answer, nor its command wait behind them.
  beforeEach(() => answering(clients));
  /** How many of `nodes` saw their connection drop since this was called. */
  const dropsSeen = (nodes: Redis[]) => {
    const dropped = new Set<Redis>();
    for (const node of nodes) node.once("close", () => dropped.add(node));
    return () => dropped.size;
  };
  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await Promise.all(proxies.map((p) => p.close()));
    await cluster.close();
  });

  it.each([1, 3])("an acquisition whose answers are lost is still had (%i node(s))", async (size) => {
    const nodes = clients.slice(0, size);
    const redlock = new Redlock(nodes, { nodeTimeoutMs: 2000, retryCount: 0 });
    const resource = `lock:grant-lost-${size}`;
    const cut = dropsSeen(nodes);
    for (const proxy of proxies.slice(0, redlock.quorum)) proxy.loseReply("+OK\r\n");
    const outcome = await redlock.acquire([resource], 30_000).then(
      (lock) => ({ held: true, lock }),
      (error: unknown) => ({ held: false, error }),
    );
    expect(cut()).toBe(redlock.quorum);
    expect(outcome).toMatchObject({ held: true });
    await redlock.quit();
  });

  it("a force release whose answer is lost says the node's result is unknown, not absent", async () => {
    const redlock = new Redlock(clients, { nodeTimeoutMs: 2000 });
    const resource = "lock:force-answer-lost";
    await redlock.acquire([resource], 30_000);
    const cut = dropsSeen(clients.slice(0, 1));
    proxies[0]!.loseReply("deleted");
    const result = await forceRelease(clients, resource, { nodeTimeoutMs: 2000 });
    expect(cut()).toBe(1);
    for (const client of cluster.clients()) expect(await client.exists(resource)).toBe(0);
    expect(result.nodes.map((n) => n.result)).toEqual(["error", "deleted", "deleted"]);
    expect(result.nodes[0]!.error).toMatch(/connection dropped while the release was out/);
    await redlock.quit();
  });

  it.each([1, 3])("is not reported lost when the node ran it (%i node(s))", async (size) => {
    const nodes = clients.slice(0, size);
    const redlock = new Redlock(nodes, { nodeTimeoutMs: 2000 });
    const lost: unknown[] = [];
    redlock.on("lost", (event) => lost.push(event));
    const resource = `lock:answer-lost-${size}`;
    const lock = await redlock.acquire([resource], 30_000);
    // The acquisition is decided once a quorum granted it: a node's grant may still be on its way, and its reply
    // must not be the one lost below. A PING on each connection comes back after every reply before it.
    await Promise.all(nodes.map((client) => client.ping()));
    // A quorum of nodes delete it, and their answers never arrive: the client resends the release.
    const cut = dropsSeen(nodes);
    for (const proxy of proxies.slice(0, redlock.quorum)) proxy.loseReply(":1\r\n");
    const { released, votes } = await redlock.release(lock);
    expect(cut()).toBe(redlock.quorum);
    // Every node ran it. (The release resolves once its vote is decided: with the resent answers in, it need not
    // wait for the node whose answer came through, whose delete may still be on its way.)
    for (const client of cluster.clients().slice(0, size)) await until("the node ran the release", async () => (await client.exists(resource)) === 0, 5_000);
    expect(lost).toEqual([]);
    // The resent release found nothing to delete; that answer says nothing about whether the first one did.
    expect(votes.filter((v) => v.vote === "against")).toEqual([]);
    expect(released).toBe(false);
    await redlock.quit();
  });

  it("compat: a Lock the application made from a stored value is not said to be held by nobody when its release's answers are lost", async () => {
    // (No quit(): the compat entry's quit() quits the clients too, and these are shared.)
    const redlock = new CompatRedlock(clients);
    const resource = "lock:answer-lost-rebuilt";
    const held = await redlock.acquire([resource], 30_000);
    await Promise.all(clients.map((client) => client.ping()));
    // Released elsewhere, from the stored value, as node-redlock advises.
    const rebuilt = new CompatLock(redlock, [resource], held.value, [], held.expiration);
    const cut = dropsSeen(clients);
    for (const proxy of proxies.slice(0, 2)) proxy.loseReply(":1\r\n");
    const error = await redlock.release(rebuilt).then(
      () => null,
      (e: unknown) => e,
    );
    expect(cut()).toBe(2);
    for (const client of cluster.clients()) await until("the node ran the release", async () => (await client.exists(resource)) === 0, 5_000);
    expect(error).toBeInstanceOf(ExecutionError);
    const [stats] = await Promise.all((error as ExecutionError).attempts);
    // The resent release found nothing to delete: that says nothing about what the first one did.
    const reasons = [...stats!.votesAgainst.values()];
    expect(reasons).toHaveLength(2);
    for (const reason of reasons) expect(reason).toBeInstanceOf(AnswerLostError);
  });
});
