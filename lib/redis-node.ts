import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { makeDirs } from "./make-dirs";
import net from "node:net";
import path from "node:path";

/**
 * A local `redis-server` process this program started and therefore owns: the embedded lock nodes of
 * `npm start`, and the nodes every integration test, e2e test and benchmark starts for itself.
 * It never binds 6379 and never connects to a Redis it did not start.
 */
export interface RedisNodeOptions {
  /** Folder for the node's log (and nothing else: nodes keep no data on disk). */
  dir: string;
  /** @default a free port chosen by the OS, never 6379 */
  port?: number;
  /** @default "redis-server" */
  bin?: string;
  /** Extra `--name value` arguments, for example `["--notify-keyspace-events", "KEA"]`. */
  extraArgs?: readonly string[];
  /** How long to wait for PING to answer. @default 10_000 */
  startTimeoutMs?: number;
  /**
   * Kill the node when this process dies, however it dies (SIGKILL included). On Linux the node is started
   * through util-linux's `setpriv --pdeathsig KILL`, which sets the kernel's parent-death signal and then
   * execs redis-server in its place (same pid, so kill, pause and restart act on the node itself). The
   * signal follows the thread that started the node: start nodes from the main thread. Elsewhere, or
   * without `setpriv`, nodes outlive a SIGKILLed owner (the launcher reaps them on its next start).
   * @default true
   */
  dieWithParent?: boolean;
  /**
   * While the node is down after `kill()` or `stop()`, hold its port: a listener of this process resets
   * every connection, and no other process can bind the port, until the node starts again or this process
   * exits (see `heldPorts`). Off, a down node's port refuses connections, as a crashed server's does.
   * @default true
   */
  holdPortWhileDown?: boolean;
}

export class RedisNodeStartError extends Error {
  constructor(
    message: string,
    readonly port: number,
    readonly log: string,
  ) {
    super(message);
    this.name = "RedisNodeStartError";
  }
}

const RESERVED_PORTS = new Set([6379]);

let parentDeathSignal: boolean | null = null;
/** Whether `setpriv --pdeathsig` works here (checked once per process). */
function canDieWithParent(): boolean {
  parentDeathSignal ??= process.platform === "linux" && spawnSync("setpriv", ["--pdeathsig", "KILL", "true"], { stdio: "ignore" }).status === 0;
  return parentDeathSignal;
}

/** Asks the OS for a free TCP port on 127.0.0.1 (racy by nature: callers retry when the bind fails). */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.once("error", reject);
      srv.listen(0, "127.0.0.1", () => {
        const address = srv.address();
        srv.close(() => {
          if (address && typeof address === "object") resolve(address.port);
          else reject(new Error("could not read the listening port"));
        });
      });
    });
    if (!RESERVED_PORTS.has(port)) return port;
  }
}

/**
 * Sends one inline command over a raw socket and resolves what `answer` makes of the reply so far (undefined:
 * wait for more), or `none` on an error, a timeout or a closed connection.
 */
function ask<T>(port: number, host: string, timeoutMs: number, command: string, answer: (reply: string) => T | undefined, none: T): Promise<T> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    let settled = false;
    let reply = "";
    const done = (value: T) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(value);
    };
    socket.setTimeout(timeoutMs, () => done(none));
    socket.once("error", () => done(none));
    socket.once("close", () => done(none));
    socket.once("connect", () => socket.write(`${command}\r\n`));
    socket.on("data", (chunk) => {
      reply += chunk.toString("latin1");
      const value = answer(reply);
      if (value !== undefined) done(value);
    });
  });
}

/** Sends PING over a raw socket; resolves true on +PONG, false on anything else. */
export function ping(port: number, host = "127.0.0.1", timeoutMs = 500): Promise<boolean> {
  return ask(port, host, timeoutMs, "PING", (reply) => reply.startsWith("+PONG"), false);
}

/**
 * The process id of the redis-server answering on `port` (`INFO server`'s `process_id`), or null when none
 * answers. Tells a node's own process from another that holds the port: a free port handed out to two
 * starters at once is bound by one of them, and the other's PING is answered by the winner. (INFO is
 * answered while a node loads its data too.)
 */
export function serverPid(port: number, host = "127.0.0.1", timeoutMs = 500): Promise<number | null> {
  return ask(
    port,
    host,
    timeoutMs,
    "INFO server",
    (reply) => {
      if (reply.startsWith("-")) return null;
      const match = /\r\nprocess_id:(\d+)\r\n/.exec(reply);
      return match ? Number(match[1]) : undefined;
    },
    null,
  );
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// Every node this process started and has not seen exit: killed when the process exits, however it
// exits (a test worker torn down early, a benchmark interrupted), so no redis-server outlives its owner.
const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function track(child: ChildProcess): void {
  live.add(child);
  child.once("exit", () => live.delete(child));
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once("exit", () => {
    for (const c of live) {
      try {
        c.kill("SIGCONT");
        c.kill("SIGKILL");
      } catch {
        // already gone
      }
    }
  });
}

// Ports of this process's nodes that were killed or stopped (with `holdPortWhileDown`), each held by a
// listener that resets every connection, until the node starts again on it or this process exits. A port
// freed mid-test is otherwise handed to the next node any test process starts, and what still points at the
// old node takes the new one for it: a Sentinel that watched a killed primary turns the new node into a
// replica (wiping its keys and dropping its clients and subscribers), and a console or engine reads, writes
// and deletes keys there.
const heldPorts = new Map<number, net.Server>();

/** Holds `port` for this process (see `heldPorts`); a port another process took meanwhile is left to it. */
async function holdPort(port: number): Promise<void> {
  if (heldPorts.has(port)) return;
  const server = net.createServer((socket) => socket.resetAndDestroy());
  await new Promise<void>((resolve) => {
    server.once("error", () => resolve());
    server.listen(port, "127.0.0.1", () => {
      server.unref();
      heldPorts.set(port, server);
      resolve();
    });
  });
}

/** Lets go of a port held by `holdPort`, so that a node can bind it. */
async function releasePort(port: number): Promise<void> {
  const server = heldPorts.get(port);
  if (!server) return;
  heldPorts.delete(port);
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

export class RedisNode {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  private paused = false;
  private logTail = "";

  private constructor(
    readonly port: number,
    private readonly options: Required<Omit<RedisNodeOptions, "port">>,
  ) {}

  /** Starts a node and waits until it answers PING. Retries on another port when the chosen one was taken. */
  static async start(options: RedisNodeOptions): Promise<RedisNode> {
    const resolved = {
      dir: options.dir,
      bin: options.bin ?? "redis-server",
      extraArgs: options.extraArgs ?? [],
      startTimeoutMs: options.startTimeoutMs ?? 10_000,
      dieWithParent: options.dieWithParent ?? true,
      holdPortWhileDown: options.holdPortWhileDown ?? true,
    };
    if (options.port !== undefined && RESERVED_PORTS.has(options.port)) {
      throw new TypeError(`Expected \`port\` to be a port other than 6379, got \`${options.port}\` (number)`);
    }
    let lastError: unknown;
    for (let attempt = 0; attempt < 5; attempt++) {
      const port = options.port ?? (await freePort());
      const node = new RedisNode(port, resolved);
      try {
        await node.launch();
        return node;
      } catch (error) {
        lastError = error;
        if (options.port !== undefined) break;
      }
    }
    throw lastError;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== null;
  }

  get isPaused(): boolean {
    return this.paused;
  }

  private async launch(): Promise<void> {
    await releasePort(this.port);
    const dir = path.join(this.options.dir, `node-${this.port}`);
    makeDirs(dir);
    const args = [
      "--port", String(this.port),
      "--bind", "127.0.0.1",
      "--save", "",
      "--appendonly", "no",
      "--dir", dir,
      "--daemonize", "no",
      "--protected-mode", "yes",
      "--loglevel", "warning",
      ...this.options.extraArgs,
    ];
    const [command, argv] =
      this.options.dieWithParent && canDieWithParent() ? ["setpriv", ["--pdeathsig", "KILL", this.options.bin, ...args]] : [this.options.bin, args];
    const child = spawn(command, argv, { stdio: ["ignore", "pipe", "pipe"] });
    track(child);
    this.child = child;
    this.paused = false;
    this.logTail = "";
    const capture = (chunk: Buffer) => {
      this.logTail = (this.logTail + chunk.toString("utf8")).slice(-4000);
    };
    child.stdout?.on("data", capture);
    child.stderr?.on("data", capture);
    let spawnError: Error | null = null;
    this.exited = new Promise<void>((resolve) => {
      child.once("error", (error) => {
        spawnError = error;
        resolve();
      });
      child.once("exit", () => resolve());
    });
    void this.exited.then(() => {
      if (this.child === child) this.child = null;
    });

    let taken: number | null = null;
    const deadline = performance.now() + this.options.startTimeoutMs;
    while (performance.now() < deadline) {
      if (spawnError) break;
      if (this.child !== child) break;
      // Answered by this node's own process, not by another redis-server that took the port first.
      const pid = await serverPid(this.port);
      if (pid === child.pid && this.child === child) return;
      if (pid !== null && pid !== child.pid) {
        taken = pid;
        break;
      }
      await sleep(25);
    }
    child.kill("SIGKILL");
    await this.exited;
    const reason = taken !== null ? `the port is held by another redis-server (pid ${taken})` : spawnError ? (spawnError as Error).message : this.logTail.trim().split("\n").slice(-3).join(" | ");
    throw new RedisNodeStartError(
      `redis-server did not start on port ${this.port}: ${reason || "no answer to PING"}`,
      this.port,
      this.logTail,
    );
  }

  /**
   * SIGKILL: the node dies at once, losing everything in memory, as in a crash. Its port stays this node's
   * (connections to it are reset) until it starts again or this process exits (see `holdPortWhileDown`).
   */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    if (this.paused) child.kill("SIGCONT");
    child.kill("SIGKILL");
    await this.exited;
    this.paused = false;
    if (this.options.holdPortWhileDown) await holdPort(this.port);
  }

  /** SIGSTOP: the node stops answering but keeps its connections and memory, as in a long GC pause. */
  pause(): void {
    if (!this.child || this.paused) return;
    this.child.kill("SIGSTOP");
    this.paused = true;
  }

  /** SIGCONT after `pause()`. */
  resume(): void {
    if (!this.child || !this.paused) return;
    this.child.kill("SIGCONT");
    this.paused = false;
  }

  /** Graceful stop (SIGTERM; Redis shuts down without saving, since saving is off). Its port is held as after `kill()`. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    if (this.paused) this.resume();
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
    await this.exited;
    clearTimeout(timer);
    if (this.options.holdPortWhileDown) await holdPort(this.port);
  }

  /** Starts the node again on the same port (after `kill()` or `stop()`); it comes back empty. */
  async restart(): Promise<void> {
    if (this.child) await this.kill();
    await this.launch();
  }

  /** Synchronous last-resort kill, for `process.on("exit")`. */
  killSync(): void {
    if (!this.child) return;
    try {
      if (this.paused) this.child.kill("SIGCONT");
      this.child.kill("SIGKILL");
    } catch {
      // already gone
    }
  }
}

/** Starts `count` nodes in parallel; on any failure stops the ones that started and rethrows. */
export async function startRedisNodes(count: number, options: RedisNodeOptions): Promise<RedisNode[]> {
  const results = await Promise.allSettled(Array.from({ length: count }, () => RedisNode.start(options)));
  const nodes = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failed) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw failed.reason;
  }
  return nodes;
}
