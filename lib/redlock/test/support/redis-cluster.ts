import { execFile, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import Redis from "ioredis";
import { keySlot } from "../../slot.ts";
import { freePort } from "./redis.ts";
import { until } from "./wait.ts";

const run = promisify(execFile);
const setpriv = process.platform === "linux" && spawnSync("setpriv", ["--pdeathsig", "KILL", "true"], { stdio: "ignore" }).status === 0;

/** One cluster node: a redis-server with `--cluster-enabled yes`, on a free port. */
export interface ClusterNode {
  port: number;
  /** With `tls`: the node's TLS port (its plain port stays open for the harness). */
  tlsPort: number | null;
  /** SIGKILL: gone at once, as in a crash. */
  kill(): Promise<void>;
  /** SIGSTOP / SIGCONT. */
  pause(): void;
  resume(): void;
  /**
   * SIGKILL, then a new redis-server on the same port with the same cluster config file, answering: the node
   * comes back as what it was (a primary keeps its slots), with no data (no persistence).
   */
  restart(): Promise<void>;
  /**
   * SIGKILL, then a new redis-server with the same cluster config file on another free port, answering: the same
   * node (its id, a primary its slots) at a new address, as a container restarted with its volume comes back;
   * `port` is the new one after. Resolves it.
   */
  relocate(): Promise<number>;
}

/**
 * A real Redis Cluster for one test file: `primaries` primaries with one replica each, made by
 * `redis-cli --cluster create … --cluster-replicas 1`, a node counted as failed after `nodeTimeoutMs`.
 * Call `await cluster.close()` in `afterAll`.
 */
export interface RedisClusterSet {
  nodes: ClusterNode[];
  /** `redis://127.0.0.1:<port>` of every node (any of them is a seed). */
  urls: string[];
  /** A cluster client (closed by `close()`). */
  client(): InstanceType<typeof Redis.Cluster>;
  /** A plain connection to one node (closed by `close()`). */
  direct(port: number): Redis;
  /** The node serving `slot` as primary, and its replicas, from CLUSTER SHARDS. */
  shardOf(slot: number): Promise<{ primary: number; replicas: number[] }>;
  /** A lock key in the slots of the primary on `port`: `lock:{<name>-<i>}` with the first `i` that lands there. */
  keyOn(port: number, name: string): Promise<string>;
  /** Starts one more node and adds it to the cluster as a primary without slots; resolves its port. */
  addPrimary(): Promise<number>;
  /** Moves `slot` (and its keys, with MIGRATE) to the primary on `toPort`, as a resharding does. */
  moveSlot(slot: number, toPort: number): Promise<void>;
  close(): Promise<void>;
}

interface Shard {
  slots: number[];
  nodes: Array<{ port: number; role: string; health: string }>;
}

/** CLUSTER SHARDS as plain objects: each shard's slot ranges and its nodes. */
export async function readShards(conn: Redis): Promise<Shard[]> {
  const raw = (await conn.call("CLUSTER", "SHARDS")) as unknown[][];
  return raw.map((shard) => {
    const fields = new Map<string, unknown>();
    for (let i = 0; i + 1 < shard.length; i += 2) fields.set(String(shard[i]), shard[i + 1]);
    const nodes = ((fields.get("nodes") as unknown[][] | undefined) ?? []).map((n) => {
      const f = new Map<string, unknown>();
      for (let i = 0; i + 1 < n.length; i += 2) f.set(String(n[i]), n[i + 1]);
      return { port: Number(f.get("port")), role: String(f.get("role")), health: String(f.get("health")) };
    });
    return { slots: ((fields.get("slots") as unknown[] | undefined) ?? []).map(Number), nodes };
  });
}

/**
 * The process id of the node answering on `port` now (`INFO server`), or null when none answers (a fresh
 * connection each time: one that failed stays failed). A free port can be handed to two starters at once:
 * the one that binds it second must not take the other's node for its own.
 */
async function answeringPid(port: number): Promise<number | null> {
  const c = new Redis(port, "127.0.0.1", { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on("error", () => undefined);
  try {
    await c.connect();
    const match = /\r\nprocess_id:(\d+)\r\n/.exec(await c.info("server"));
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  } finally {
    c.disconnect();
  }
}

const nodeId = async (conn: Redis) => String(await conn.call("CLUSTER", "MYID"));

/** Certificates for a cluster that also listens on TLS: the server's, one the nodes present to each other on the bus, the CA. */
export interface ClusterTls {
  cert: string;
  key: string;
  clientCert: string;
  clientKey: string;
  ca: string;
}

export async function startRedisCluster(options: { primaries?: number; nodeTimeoutMs?: number; extraArgs?: readonly string[]; tls?: ClusterTls } = {}): Promise<RedisClusterSet> {
  const primaries = options.primaries ?? 3;
  const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-cluster-"));
  const children = new Map<number, ChildProcess>();
  const nodes: ClusterNode[] = [];
  /** A node of its own on a free port, answering; another port is tried when another process took the first. */
  const spawnNode = async (): Promise<ClusterNode> => {
    for (let attempt = 1; ; attempt++) {
      const node = await spawnOnce();
      const child = children.get(node.port)!;
      let exited = false;
      child.once("exit", () => {
        exited = true;
      });
      // (setpriv execs redis-server: the pid is the node's.)
      const pid = await until(`cluster node on ${node.port}`, async () => (exited ? -1 : await answeringPid(node.port)));
      if (pid === child.pid) return node;
      await node.kill();
      children.delete(node.port);
      if (attempt === 5) throw new Error("no cluster node started: five free ports were each taken by another process first");
    }
  };
  const spawnOnce = async (): Promise<ClusterNode> => {
    const port = await freePort();
    const tls = options.tls;
    const tlsPort = tls ? await freePort() : null;
    const argsAt = (listen: number) => [
      "--port", String(listen), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning",
      "--cluster-enabled", "yes", "--cluster-config-file", `nodes-${port}.conf`, "--cluster-node-timeout", String(options.nodeTimeoutMs ?? 1000),
      // The bus and replication over TLS too: a TLS client is then told the nodes' TLS ports (CLUSTER SLOTS).
      ...(tls ? ["--tls-port", String(tlsPort), "--tls-cert-file", tls.cert, "--tls-key-file", tls.key, "--tls-client-cert-file", tls.clientCert, "--tls-client-key-file", tls.clientKey, "--tls-ca-cert-file", tls.ca, "--tls-cluster", "yes", "--tls-replication", "yes"] : []),
      ...(options.extraArgs ?? []),
    ];
    const start = (listen = port) => {
      const args = argsAt(listen);
      return setpriv ? spawn("setpriv", ["--pdeathsig", "KILL", "redis-server", ...args], { stdio: "ignore" }) : spawn("redis-server", args, { stdio: "ignore" });
    };
    let child = start();
    children.set(port, child);
    let paused = false;
    const kill = () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        if (paused) child.kill("SIGCONT");
        child.kill("SIGKILL");
      });
    const node: ClusterNode = {
      port,
      tlsPort,
      kill,
      pause: () => {
        paused = true;
        child.kill("SIGSTOP");
      },
      resume: () => {
        paused = false;
        child.kill("SIGCONT");
      },
      restart: async () => {
        await kill();
        paused = false;
        const at = node.port;
        child = start(at);
        children.set(at, child);
        const started = child;
        await until(`cluster node on ${at} again`, async () => started.pid !== undefined && (await answeringPid(at)) === started.pid, 10_000, 20);
      },
      relocate: async () => {
        await kill();
        paused = false;
        const moved = await freePort();
        child = start(moved);
        children.set(moved, child);
        node.port = moved;
        const started = child;
        await until(`cluster node moved to ${moved}`, async () => started.pid !== undefined && (await answeringPid(moved)) === started.pid, 10_000, 20);
        return moved;
      },
    };
    return node;
  };
  for (let i = 0; i < primaries * 2; i++) nodes.push(await spawnNode());
  const opened: Array<{ disconnect(): void }> = [];
  const direct = (port: number) => {
    const c = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1, retryStrategy: () => null });
    c.on("error", () => undefined);
    opened.push(c);
    return c;
  };
  await run("redis-cli", ["--cluster", "create", ...nodes.map((n) => `127.0.0.1:${n.port}`), "--cluster-replicas", "1", "--cluster-yes"]);
  let adminAt = 0;
  let adminConn = direct(nodes[0]!.port);
  /** The connection for the harness's own questions; once closed (its node killed or restarted), one to the next node. */
  const admin = () => {
    if (adminConn.status === "end") {
      adminAt = (adminAt + 1) % nodes.length;
      adminConn = direct(nodes[adminAt]!.port);
    }
    return adminConn;
  };
  // Every node agrees the cluster is whole, and every replica has synced with its primary.
  await until(
    "the cluster is up with a synced replica per primary",
    async () => {
      for (const n of nodes) {
        const info = await direct(n.port).call("CLUSTER", "INFO").catch(() => "");
        if (!/cluster_state:ok/.test(String(info))) return false;
      }
      const shards = await readShards(admin());
      return shards.length === primaries && shards.every((s) => s.nodes.length === 2 && s.nodes.every((x) => x.health === "online"));
    },
    30_000,
    100,
  );
  const shardOf = async (slot: number) => {
    const shards = await readShards(admin());
    const shard = shards.find((s) => {
      for (let i = 0; i + 1 < s.slots.length; i += 2) if (slot >= s.slots[i]! && slot <= s.slots[i + 1]!) return true;
      return false;
    });
    if (!shard) throw new Error(`no shard serves slot ${slot}`);
    // A failed primary stays listed as master until it is forgotten: the healthy one serves.
    const primary = shard.nodes.find((n) => n.role === "master" && n.health === "online") ?? shard.nodes.find((n) => n.role === "master");
    return { primary: primary!.port, replicas: shard.nodes.filter((n) => n.role !== "master").map((n) => n.port) };
  };
  const keyOn = async (port: number, name: string) => {
    for (let i = 0; ; i++) {
      const key = `lock:{${name}-${i}}`;
      if ((await shardOf(keySlot(key))).primary === port) return key;
    }
  };
  const addPrimary = async () => {
    const node = await spawnNode();
    nodes.push(node);
    const c = direct(node.port);
    await run("redis-cli", ["--cluster", "add-node", `127.0.0.1:${node.port}`, `127.0.0.1:${nodes[0]!.port}`]);
    const id = await nodeId(c);
    await until("every node knows the new primary, and it knows the cluster is up", async () => {
      for (const n of nodes) {
        const known = String(await direct(n.port).call("CLUSTER", "NODES").catch(() => ""));
        if (n.port !== node.port && !known.includes(id)) return false;
      }
      return /cluster_state:ok/.test(String(await c.call("CLUSTER", "INFO")));
    }, 30_000, 100);
    return node.port;
  };
  const moveSlot = async (slot: number, toPort: number) => {
    const from = direct((await shardOf(slot)).primary);
    const to = direct(toPort);
    const [fromId, toId] = [await nodeId(from), await nodeId(to)];
    await to.call("CLUSTER", "SETSLOT", slot, "IMPORTING", fromId);
    await from.call("CLUSTER", "SETSLOT", slot, "MIGRATING", toId);
    for (;;) {
      const keys = (await from.call("CLUSTER", "GETKEYSINSLOT", slot, 100)) as string[];
      if (keys.length === 0) break;
      await from.call("MIGRATE", "127.0.0.1", toPort, "", 0, 5000, "KEYS", ...keys);
    }
    for (const n of nodes) await direct(n.port).call("CLUSTER", "SETSLOT", slot, "NODE", toId).catch(() => undefined);
    await until("every node sees the slot moved", async () => (await shardOf(slot)).primary === toPort);
  };
  return {
    nodes,
    addPrimary,
    moveSlot,
    keyOn,
    urls: nodes.map((n) => `redis://127.0.0.1:${n.port}`),
    client: () => {
      const c = new Redis.Cluster(nodes.map((n) => ({ host: "127.0.0.1", port: n.port })), { redisOptions: { maxRetriesPerRequest: 1 } });
      c.on("error", () => undefined);
      opened.push(c);
      return c;
    },
    direct,
    shardOf,
    close: async () => {
      for (const c of opened) c.disconnect();
      await Promise.all(nodes.map((n) => n.kill()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
