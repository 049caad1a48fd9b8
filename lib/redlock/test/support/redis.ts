import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import Redis, { type RedisOptions } from "ioredis";

/** A free TCP port on the loopback interface, as the kernel hands one out (never 6379 in practice). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** FLUSHALL on each of these local ports, each with a connection of its own that is closed after. */
export async function flushPorts(ports: readonly number[]): Promise<void> {
  await Promise.all(
    ports.map(async (port) => {
      const c = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1 });
      try {
        await c.flushall();
      } finally {
        c.disconnect();
      }
    }),
  );
}

/** One redis-server child process, empty on every start (no RDB, no AOF). */
class Node {
  process: ChildProcess | null = null;
  paused = false;
  /**
   * While killed, the node's port is held by a listener that resets every connection, until the node starts
   * again: another test file's new node would otherwise get the port from the kernel, and this file's clients,
   * still pointing at it, would read and write that node's keys.
   */
  private holder: net.Server | null = null;

  constructor(readonly port: number, readonly dir: string, readonly extraArgs: readonly string[]) {}

  /** Starts the server and resolves once it says it accepts connections (its own log line, not a poll). */
  async start(): Promise<void> {
    const holder = this.holder;
    this.holder = null;
    if (holder) await new Promise<void>((resolve) => holder.close(() => resolve()));
    const child = spawn("redis-server", ["--port", String(this.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", this.dir, ...this.extraArgs]);
    this.process = child;
    this.paused = false;
    return new Promise((resolve, reject) => {
      let log = "";
      child.stdout.on("data", (chunk: Buffer) => {
        log += chunk.toString();
        if (log.includes("Ready to accept connections")) resolve();
      });
      child.once("exit", (code) => reject(new Error(`redis-server on ${this.port} exited (${code}): ${log.slice(-300)}`)));
      child.once("error", reject);
    });
  }

  /** Kills the process and holds its port until the next `start()`. */
  async kill(): Promise<void> {
    await this.end("SIGKILL");
    if (this.holder) return;
    const holder = net.createServer((socket) => socket.resetAndDestroy());
    // A port another process took meanwhile is left to it.
    await new Promise<void>((resolve) => {
      holder.once("error", () => resolve());
      holder.listen(this.port, "127.0.0.1", () => {
        holder.unref();
        this.holder = holder;
        resolve();
      });
    });
  }

  /** Ends the process with `signal` and resolves once it is gone. */
  end(signal: NodeJS.Signals): Promise<void> {
    const child = this.process;
    this.process = null;
    if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    if (this.paused) child.kill("SIGCONT");
    this.paused = false;
    return new Promise((resolve) => {
      child.once("exit", () => resolve());
      child.kill(signal);
    });
  }
}

/**
 * `first` started, or, when another process took its port before redis-server bound it, a node on another free
 * port instead, up to five tries. A free port is one the kernel handed out a moment before, and the test files run
 * in parallel (a cluster node binds its bus at its port + 10,000 as well).
 */
async function started(first: Node): Promise<Node> {
  let node = first;
  for (let attempt = 1; ; attempt++) {
    try {
      await node.start();
      return node;
    } catch (error) {
      if (attempt === 5 || !(error instanceof Error && error.message.includes("Address already in use"))) throw error;
      node = new Node(await freePort(), node.dir, node.extraArgs);
    }
  }
}

/**
 * Real redis-server processes for one test file, on free ports, with helpers to stop, kill, pause
 * (SIGSTOP) and restart a single node. Call `await cluster.close()` in `afterAll`.
 */
export interface TestCluster {
  urls: string[];
  ports: number[];
  /** A fresh ioredis client per node (closed by `close()`). */
  clients(options?: RedisOptions): Redis[];
  client(index: number, options?: RedisOptions): Redis;
  kill(index: number): Promise<void>;
  pause(index: number): void;
  resume(index: number): void;
  paused(index: number): boolean;
  /** Kills the node and starts it again on the same port, empty. */
  restart(index: number): Promise<void>;
  flushAll(): Promise<void>;
  close(): Promise<void>;
}

export async function startCluster(count: number, extraArgs: readonly string[] = []): Promise<TestCluster> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "redlock-test-"));
  const ports: number[] = [];
  for (let i = 0; i < count; i++) ports.push(await freePort());
  const nodes = await Promise.all(ports.map((port) => started(new Node(port, dir, extraArgs))));
  const opened: Redis[] = [];
  const node = (i: number): Node => nodes[i] ?? (() => { throw new RangeError(`no node ${i} in a cluster of ${nodes.length}`); })();
  const client = (i: number, options: RedisOptions = {}) => {
    const c = new Redis(node(i).port, "127.0.0.1", { maxRetriesPerRequest: 1, ...options });
    // Nodes are killed on purpose in these tests; connection errors surface through commands.
    c.on("error", () => {});
    opened.push(c);
    return c;
  };
  const signal = (i: number, sig: NodeJS.Signals, paused: boolean) => {
    const n = node(i);
    n.process?.kill(sig);
    n.paused = paused;
  };
  return {
    urls: nodes.map((n) => `redis://127.0.0.1:${n.port}`),
    ports: nodes.map((n) => n.port),
    client,
    clients: (options) => nodes.map((_, i) => client(i, options)),
    kill: (i) => node(i).kill(),
    pause: (i) => signal(i, "SIGSTOP", true),
    resume: (i) => signal(i, "SIGCONT", false),
    paused: (i) => node(i).paused,
    restart: async (i) => {
      await node(i).end("SIGKILL");
      await node(i).start();
    },
    flushAll: () => flushPorts(nodes.filter((n) => n.process && !n.paused).map((n) => n.port)),
    close: async () => {
      for (const c of opened) c.disconnect();
      await Promise.all(nodes.map((n) => n.end("SIGTERM")));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
