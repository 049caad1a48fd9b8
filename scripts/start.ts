/**
 * `npm start`: the console's launcher and the owner of the process.
 * 1. Parses the configuration (a wrong value stops here with one line saying what to fix).
 * 2. Takes the data folder's lock: a second console on the same folder stops with one line, touching nothing.
 * 3. Builds the production bundle when it is missing or older than the sources.
 * 4. Without REDIS_URLS, starts three embedded redis-server nodes on free ports (never 6379) and stops
 *    them with the console on SIGINT, SIGTERM or a crash; on Linux they also die with it on a SIGKILL.
 * 5. Serves Next.js in this process, so the lab can kill and restart the embedded nodes it owns and
 *    shutdown can run every hook in order.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { ConfigError, parseConfig, type LockscopeConfig } from "../lib/config";
import { DeploymentConfigError } from "../lib/deployment-config";
import { ensureBuild } from "./build-if-stale";
import { lockDataDir } from "./data-dir-lock";
import { startRedisNodes, type RedisNode } from "../lib/redis-node";
import { checkRequestLine } from "../lib/request-guard";

const ROOT = path.resolve(import.meta.dirname, "..");
const SHUTDOWN_BUDGET_MS = 9_000;
const g = globalThis as unknown as Record<symbol, unknown>;
const key = (name: string) => Symbol.for(`lockscope.${name}`);

function fail(message: string): never {
  process.stderr.write(`lockscope: ${message}\n`);
  process.exit(1);
}

function haveRedisServer(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

function ensureRedisServer(): void {
  if (haveRedisServer()) return;
  const isRoot = process.getuid?.() === 0;
  const debianLike = existsSync("/etc/debian_version");
  if (isRoot && debianLike) {
    process.stdout.write("lockscope: redis-server is missing; installing it with apt-get…\n");
    const update = spawnSync("apt-get", ["update", "-qq"], { stdio: "inherit" });
    const install = spawnSync("apt-get", ["install", "-y", "-qq", "redis-server"], {
      stdio: "inherit",
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    });
    if (update.status === 0 && install.status === 0 && haveRedisServer()) return;
  }
  fail(
    "redis-server is not installed. Install it, then run `npm start` again:\n" +
      "  Debian/Ubuntu: sudo apt-get install redis-server\n" +
      "  macOS:         brew install redis\n" +
      "  Fedora/RHEL:   sudo dnf install redis\n" +
      "or point the console at your own lock nodes with REDIS_URLS=redis://host:port,…",
  );
}

/**
 * A previous console that died without stopping its nodes (SIGKILL before its nodes could be told, a
 * platform where they cannot watch it): stop the ones it recorded, and only those that are provably its
 * orphans. This runs only while this process holds the data folder's lock, so no live console owns a node
 * of this folder; and a process is killed only when it is a redis-server on the recorded port whose
 * working directory is this folder's node directory for that port (redis-server runs in its `--dir`).
 */
function reapOrphans(pidFile: string, nodesDir: string): void {
  if (!existsSync(pidFile)) return;
  for (const line of readFileSync(pidFile, "utf8").split("\n")) {
    const [pidText, portText] = line.trim().split(" ");
    const pid = Number(pidText);
    if (!Number.isInteger(pid) || pid <= 1 || !portText || !/^\d+$/.test(portText)) continue;
    try {
      // redis-server retitles itself "redis-server 127.0.0.1:<port>".
      const title = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ");
      const cwd = readlinkSync(`/proc/${pid}/cwd`);
      const nodeDir = realpathSync(path.join(nodesDir, `node-${portText}`));
      if (title.includes("redis-server") && title.includes(`:${portText}`) && cwd === nodeDir) process.kill(pid, "SIGKILL");
    } catch {
      // gone already, not ours, or no /proc to prove it: leave it
    }
  }
  rmSync(pidFile, { force: true });
}

async function startEmbedded(config: LockscopeConfig): Promise<RedisNode[]> {
  ensureRedisServer();
  const dir = path.resolve(config.dataDir, "redis");
  mkdirSync(dir, { recursive: true });
  const pidFile = path.join(dir, "pids");
  reapOrphans(pidFile, dir);
  const nodes = await startRedisNodes(3, { dir });
  const writePids = () => writeFileSync(pidFile, nodes.map((n) => `${n.pid ?? ""} ${n.port}`).join("\n"));
  writePids();
  g[key("embedded-pids-writer")] = writePids;
  return nodes;
}

async function main(): Promise<void> {
  process.chdir(ROOT);
  let config: LockscopeConfig;
  try {
    config = parseConfig(process.env, { readFile: (file) => readFileSync(file, "utf8") });
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message);
    // One line per mistake, each prefixed like every other line the launcher prints.
    if (error instanceof DeploymentConfigError) fail(error.lines.join("\nlockscope: "));
    throw error;
  }

  // Before anything else touches the folder: a second console on it would reap the first one's nodes
  // and write its secrets and audit file alongside it.
  const dataDir = path.resolve(config.dataDir);
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const lock = await lockDataDir(dataDir, `pid ${process.pid}, console on ${config.host}:${config.port}`);
  if (!lock.held) {
    fail(`the data folder ${dataDir} is in use by another console (${lock.holder}): stop it, or give this one its own LOCKSCOPE_DATA_DIR.`);
  }
  // Held for the life of the process (the kernel lets go of it when the process ends, however it ends).
  g[key("data-dir-lock")] = lock;

  if (!ensureBuild(ROOT)) fail("`next build` failed; see the output above.");

  let nodes: RedisNode[] = [];
  const stopNodesSync = () => nodes.forEach((n) => n.killSync());
  process.on("exit", stopNodesSync);
  // Until the server is up, a signal stops what has been started so far (the "exit" handler kills the
  // embedded nodes); the full shutdown below takes over once the console serves.
  const stopWhileStarting = (signal: NodeJS.Signals) => {
    process.stdout.write(`lockscope: ${signal} received while starting; stopping.\n`);
    process.exit(0);
  };
  process.once("SIGINT", stopWhileStarting);
  process.once("SIGTERM", stopWhileStarting);
  if (!config.deployments) {
    nodes = await startEmbedded(config);
    const urls = nodes.map((n) => n.url);
    config = { ...config, redisUrls: urls, deployments: [{ name: "default", kind: "redlock", urls, tls: null, auth: { username: null, passwordFile: null } }] };
    g[key("embedded-nodes")] = nodes;
    process.stdout.write(`lockscope: embedded lock nodes on ${nodes.map((n) => n.port).join(", ")}\n`);
  }
  g[key("launcher-config")] = config;

  Object.assign(process.env, { NODE_ENV: "production", NEXT_TELEMETRY_DISABLED: "1" });
  const { default: next } = await import("next");
  const app = next({ dev: false, dir: ROOT, hostname: config.host, port: config.port });
  const handle = app.getRequestHandler();
  await app.prepare();

  const server = http.createServer((req, res) => {
    // The client address for rate limiting and the audit log; never trust one a client sent.
    req.headers["x-lockscope-client-ip"] = req.socket.remoteAddress ?? "unknown";
    // Broken percent-encoding and unsupported methods get the contract's 4xx here: Next.js would 500.
    const refused = checkRequestLine(req.method, req.url);
    if (refused) {
      res.writeHead(refused.status, refused.headers);
      res.end(JSON.stringify(refused.body));
      return;
    }
    void handle(req, res);
  });
  server.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code === "EADDRINUSE") fail(`port ${config.port} on ${config.host} is in use: set PORT to a free port.`);
    if (err.code === "EADDRNOTAVAIL") fail(`HOST=${config.host} is not an address of this machine: set HOST, e.g. 127.0.0.1.`);
    fail(`cannot listen on ${config.host}:${config.port}: ${err.message}`);
  });
  await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
  const shownHost = config.host === "127.0.0.1" || config.host === "0.0.0.0" || config.host === "::" ? "localhost" : config.host;
  process.stdout.write(`lockscope: console ready at http://${shownHost}:${config.port}\n`);
  const printToken = g[key("print-operator-token")];
  if (typeof printToken === "function") (printToken as () => void)();

  let stopping = false;
  /**
   * SIGTERM/SIGINT: stop accepting, run the shutdown hooks in order (SSE streams end with a final event,
   * the lab run stops, the audit file is flushed, watchers and Redis connections close), stop the embedded
   * nodes, exit 0, all within SHUTDOWN_BUDGET_MS (a process manager's SIGKILL usually follows at 10 s).
   */
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    g[key("shutting-down")] = true;
    const startedAt = Date.now();
    // Leave the embedded nodes time to stop (RedisNode.stop escalates to SIGKILL after 3 s).
    const hooksDeadline = startedAt + SHUTDOWN_BUDGET_MS - (nodes.length > 0 ? 3_500 : 500);
    process.stdout.write(`lockscope: ${signal} received, shutting down…\n`);
    const force = setTimeout(() => {
      process.stderr.write("lockscope: shutdown took too long; exiting.\n");
      stopNodesSync();
      process.exit(1);
    }, SHUTDOWN_BUDGET_MS + 500);
    force.unref();
    // No new connections; idle keep-alive ones close now, busy ones once their response is sent.
    server.close();
    server.closeIdleConnections();
    const hooks = (g[key("shutdown-hooks")] as Array<{ name: string; run: () => Promise<void> | void }> | undefined) ?? [];
    for (const hook of hooks) {
      // Each step gets at most 3 s, and never more than what is left of the budget (but always a little).
      const allowedMs = Math.max(200, Math.min(3_000, hooksDeadline - Date.now()));
      let timer: NodeJS.Timeout | undefined;
      try {
        const outcome = await Promise.race([
          Promise.resolve(hook.run()).then(() => "done" as const),
          new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), allowedMs))),
        ]);
        if (outcome === "timeout") process.stderr.write(`lockscope: shutdown step ${hook.name} did not finish within ${allowedMs} ms; going on.\n`);
      } catch (error) {
        process.stderr.write(`lockscope: shutdown step ${hook.name} failed: ${String(error)}\n`);
      } finally {
        clearTimeout(timer);
      }
    }
    server.closeAllConnections();
    await Promise.all(nodes.map((n) => n.stop()));
    rmSync(path.resolve(config.dataDir, "redis", "pids"), { force: true });
    process.stdout.write(`lockscope: stopped in ${Date.now() - startedAt} ms.\n`);
    process.exit(0);
  };
  process.off("SIGINT", stopWhileStarting);
  process.off("SIGTERM", stopWhileStarting);
  process.on("SIGINT", () => void shutdown("SIGINT"));
  // When whoever started us (npm, a shell) dies without passing the signal on, we are reparented:
  // shut down rather than leave a console and its nodes running with nobody to stop them.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void shutdown("parent exit");
  }, 1000).unref();
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("uncaughtException", (error) => {
    process.stderr.write(`lockscope: crashed: ${error.stack ?? String(error)}\n`);
    stopNodesSync();
    process.exit(1);
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`lockscope: could not start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});

