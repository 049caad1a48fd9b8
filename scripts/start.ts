/**
 * The console's launcher and the owner of the process. `npm run build` compiles it to `dist/start.mjs` (and
 * copies it into the standalone folder as `start.mjs`), so it runs on a production install with no dev
 * dependency; it never builds and never installs anything (`npm start` builds first, see quickstart.mjs).
 * 1. Loads `.env` files as Next.js does, then parses the configuration (a wrong value stops here with one
 *    line saying what to fix).
 * 2. Takes the data folder's lock: a second console on the same folder stops with one line, touching nothing.
 * 3. Checks that the production bundle is there, and that HOST:PORT can be listened on.
 * 4. Without REDIS_URLS, starts three embedded redis-server nodes on free ports (never 6379) and stops
 *    them with the console on SIGINT, SIGTERM or a crash; on Linux they also die with it on a SIGKILL.
 * 5. Serves Next.js in this process, so the lab can kill and restart the embedded nodes it owns and
 *    shutdown can run every hook in order.
 */
import { loadEnvConfig } from "@next/env";
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import type { Duplex } from "node:stream";
import path from "node:path";
import v8 from "node:v8";
import { ConfigError, parseConfig, withoutArguments, type LockscopeConfig } from "../lib/config";
import { DeploymentConfigError } from "../lib/deployment-config";
import { makeDirs } from "../lib/make-dirs";
import { lockDataDir } from "./data-dir-lock";
import { startRedisNodes, type RedisNode } from "../lib/redis-node";
import { checkHost, checkRequestLine, clientErrorResponse, connectResponse, hostHeaders } from "../lib/request-guard";
import { consoleHostRules } from "../lib/host-rules";
import { clientAddress, trustedProxyList } from "../lib/client-address";
import { invalidLine, listenFailure } from "../lib/listen-error";
import { unknownVariables } from "../lib/unknown-variables";

/**
 * The folder that holds `.next`: this file's own in the standalone folder (`start.mjs` beside `server.js`),
 * its parent for `dist/start.mjs` and `scripts/start.ts`.
 */
/**
 * The console holds a long-lived table (every lock, its readings and timeline; the many locks nothing happens to
 * kept cold, outside the heap) and makes short-lived garbage per change. V8's default lets the heap grow to three
 * or four times what is live before a full collection, hundreds of MB of garbage held as RSS. Growing by as much as
 * is live keeps memory in proportion to the locks. Growing by half, a console with a million locks cold (60 to 100
 * MB live) began a full collection every 2 to 4 s of a churn at 10,000 changes/s, and its p99 delivery doubled.
 * Set before anything is allocated; V8 reads it at every heap limit it computes.
 */
v8.setFlagsFromString("--heap-growing-percent=100");
/**
 * The start-up reconcile builds every lock's record, reading and decoded holder from the same code that later
 * makes a short-lived one per change, so V8's allocation-site pretenuring learns from the reconcile that these
 * objects live long and from then on allocates every change's temporaries straight in the old generation
 * (measured with 100,000 locks at 5,000 changes/s: 2.5 MB promoted per scavenge, a full collection every 4 s).
 * Without pretenuring they die young, in the scavenger, as they should.
 */
v8.setFlagsFromString("--no-allocation-site-pretenuring");
/**
 * The young generation is collected on the main thread alone: a parallel scavenge splits its work with V8's
 * helper threads and waits for all of them, and on a machine the console shares with Redis (two cores in
 * `npm run bench:live`) a helper that is not scheduled turned a 5 ms scavenge into 25 ms and more. The
 * production start also gives V8 two helper threads instead of four (`--v8-pool-size=2` in `npm start`,
 * `npm run start:prod` and the container's CMD; Node.js takes that flag only on its command line).
 */
v8.setFlagsFromString("--no-parallel-scavenge");

const ROOT = existsSync(path.join(import.meta.dirname, ".next")) ? import.meta.dirname : path.resolve(import.meta.dirname, "..");
const SHUTDOWN_BUDGET_MS = 9_000;
/** How long requests in flight at SIGTERM may take to finish before their connections are cut. */
const DRAIN_BUDGET_MS = 4_000;
const g = globalThis as unknown as Record<symbol, unknown>;
const key = (name: string) => Symbol.for(`lockscope.${name}`);

/**
 * Counts and logs a request the launcher answered itself (server/refused-requests.ts, which the server's runtime
 * hands over on globalThis once it has started; before that, nothing is counted).
 */
function noteRefused(method: string | undefined, status: number, code: string, host: string | undefined): void {
  const note = g[key("note-refused-request")];
  if (typeof note === "function") (note as (n: { method: string | undefined; status: number; code: string; host: string | undefined }) => void)({ method, status, code, host });
}

function fail(message: string): never {
  process.stderr.write(`lockscope: ${message}\n`);
  process.exit(1);
}

/** Stops the start as a wrong value does, naming the variable and why (a folder or file the console cannot make). */
function invalid(variable: string, value: string, expected: string, error: unknown): never {
  fail(invalidLine(variable, value, expected, error instanceof Error ? error.message : String(error)));
}

const DATA_DIR_EXPECTED = "a folder the console can create and write";

function haveRedisServer(): boolean {
  return spawnSync("redis-server", ["--version"], { stdio: "ignore" }).status === 0;
}

function ensureRedisServer(): void {
  // Never installed from here: a start that runs a package manager is not one a deployment can trust.
  if (haveRedisServer()) return;
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
  makeDirs(dir);
  const pidFile = path.join(dir, "pids");
  reapOrphans(pidFile, dir);
  // The lab's killed node refuses connections, as a crashed server does (its port is not held).
  const nodes = await startRedisNodes(3, { dir, holdPortWhileDown: false });
  const writePids = () => writeFileSync(pidFile, nodes.map((n) => `${n.pid ?? ""} ${n.port}`).join("\n"));
  writePids();
  g[key("embedded-pids-writer")] = writePids;
  return nodes;
}

/**
 * Serves with the configuration the bundle was built with: `next build` left it resolved in
 * `.next/required-server-files.json`, and Next.js reads it from this variable (as the standalone folder's
 * own server.js does) instead of evaluating next.config.js again, which the standalone folder does not have.
 */
function useStandaloneConfig(): void {
  const file = path.join(ROOT, ".next", "required-server-files.json");
  if (!existsSync(file)) return;
  const { config } = JSON.parse(readFileSync(file, "utf8")) as { config: unknown };
  process.env.__NEXT_PRIVATE_STANDALONE_CONFIG = JSON.stringify(config);
}

/**
 * Stops the start, with the line a listening failure gets, when HOST:PORT cannot be listened on: tried before anything
 * starts, since the console listens only once its runtime is up, by which time it has started its embedded nodes,
 * written its entry in the consoles list on the lock nodes (which the other consoles warn of) and upgraded the
 * audit database's schema, none of which a console that never serves should do.
 */
async function checkListen(host: string, port: number): Promise<void> {
  const probe = net.createServer();
  const error = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
    probe.once("error", resolve);
    probe.listen(port, host, () => resolve(null));
  });
  if (error) fail(listenFailure(error, host, port));
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

/** The variables that name a file or a folder. */
const PATH_VARIABLES = [
  "LOCKSCOPE_DATA_DIR",
  "AUDIT_FILE",
  "LOCKSCOPE_DEPLOYMENTS_FILE",
  "REDIS_PASSWORD_FILE",
  "REDIS_SENTINEL_PASSWORD_FILE",
  "REDIS_TLS_CA_FILE",
  "REDIS_TLS_CERT_FILE",
  "REDIS_TLS_KEY_FILE",
];

async function main(): Promise<void> {
  // A relative path in the environment names a file of the folder the console was started from (`node
  // /opt/lockscope/start.mjs` from /etc/lockscope), as any command reads its arguments; the console then runs
  // in its own folder, where the defaults and the paths in its `.env` files are.
  for (const name of PATH_VARIABLES) {
    const value = process.env[name]?.trim();
    if (value && !path.isAbsolute(value)) process.env[name] = path.resolve(value);
  }
  process.chdir(ROOT);
  // `.env.production.local`, `.env.local`, `.env.production`, `.env`, as `next start` reads them; variables
  // already in the environment win. Names are logged, never values.
  loadEnvConfig(ROOT, false, { info: (m: string) => process.stdout.write(`lockscope: ${m.trim()}\n`), error: (m: string) => process.stderr.write(`lockscope: ${m}\n`) });
  let config: LockscopeConfig;
  try {
    config = parseConfig(process.env, { readFile: (file) => readFileSync(file, "utf8") });
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message);
    // One line per mistake, each prefixed like every other line the launcher prints.
    if (error instanceof DeploymentConfigError) fail(error.lines.join("\nlockscope: "));
    throw error;
  }
  // A misspelled variable would be ignored without a word (`LOCKSCOPE_VIEWR_TOKEN` leaves reading open). Names
  // only: a value may be a secret.
  for (const { name, closest } of unknownVariables(process.env)) {
    process.stderr.write(`lockscope: ${name} is not a variable the console reads, and is ignored: did you mean ${closest}?\n`);
  }

  // Before anything else touches the folder: a second console on it would reap the first one's nodes
  // and write its secrets and audit file alongside it.
  const dataDir = path.resolve(config.dataDir);
  try {
    makeDirs(dataDir, 0o700);
  } catch (error) {
    invalid("LOCKSCOPE_DATA_DIR", config.dataDir, DATA_DIR_EXPECTED, error);
  }
  const lock = await lockDataDir(dataDir, `pid ${process.pid}, console on ${config.host}:${config.port}`).catch((error: unknown) =>
    invalid("LOCKSCOPE_DATA_DIR", config.dataDir, DATA_DIR_EXPECTED, error),
  );
  if (!lock.held) {
    fail(`the data folder ${dataDir} is in use by another console (${lock.holder}): stop it, or give this one its own LOCKSCOPE_DATA_DIR.`);
  }
  // Held for the life of the process (the kernel lets go of it when the process ends, however it ends).
  g[key("data-dir-lock")] = lock;
  if (config.auditDatabaseUrl === null) {
    // The audit file is written at the first release or pattern change: one it cannot be is found now.
    try {
      makeDirs(path.dirname(path.resolve(config.auditFile)), 0o700);
      closeSync(openSync(config.auditFile, "a", 0o600));
    } catch (error) {
      invalid("AUDIT_FILE", config.auditFile, "a file the console can create and append to", error);
    }
  } else if (process.env.AUDIT_FILE?.trim()) {
    // Never written in this mode: neither made nor checked, and an operator looking for the log there is told where it is.
    process.stderr.write("lockscope: AUDIT_FILE is ignored: with AUDIT_DATABASE_URL the audit log is kept in the database.\n");
  }

  if (!existsSync(path.join(ROOT, ".next", "BUILD_ID"))) {
    fail(`there is no production build in ${ROOT}: run \`npm run build\` first (or \`npm start\`, which builds when needed).`);
  }
  useStandaloneConfig();
  await checkListen(config.host, config.port);

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
  // The server's runtime (instrumentation.ts) starts within prepare(), which only logs its failure: the console
  // would then listen and answer every request with a 500. A start that cannot work stops here, saying why.
  const runtime = g[key("runtime-started")];
  if (runtime instanceof Promise) {
    await runtime.catch((error: unknown) => {
      // (Next.js prefixes the error's own message with where it was thrown.)
      const message = (error instanceof Error ? error.message : String(error)).replace(/^An error occurred while loading instrumentation hook: /, "");
      const file = (error as NodeJS.ErrnoException | null)?.path;
      if (typeof file === "string" && path.resolve(file).startsWith(dataDir + path.sep)) {
        invalid("LOCKSCOPE_DATA_DIR", config.dataDir, "a folder whose files the console can read and write", message);
      }
      fail(`could not start: ${withoutArguments(message)}`);
    });
  }

  const trustedProxies = config.trustedProxies.length > 0 ? trustedProxyList(config.trustedProxies) : null;
  // The host names it answers to, as the pages and routes check them (server/host-check.ts), here checked
  // first: before a refusal of the path, a redirect or a static file.
  const rules = consoleHostRules(config, Object.values(os.networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address)));
  let stopping = false;
  /** Requests being answered (live streams aside: they are ended by their own shutdown step), for the drain. */
  const inFlight = new Set<http.ServerResponse>();
  let onDrained: (() => void) | null = null;
  // A request without Host reaches the handler, which answers it in JSON (Node.js alone answers a bare 400).
  const server = http.createServer({ requireHostHeader: false }, (req, res) => {
    const streaming = req.url?.startsWith("/api/locks/stream") === true || (req.headers.accept ?? "").includes("text/event-stream");
    if (!streaming) {
      inFlight.add(res);
      const done = () => {
        if (!inFlight.delete(res)) return;
        if (inFlight.size === 0) onDrained?.();
      };
      // "finish": answered in full; "close": the connection ended before that.
      res.once("finish", done);
      res.once("close", done);
    }
    // Once shutting down, a keep-alive client (a load balancer) is told to reconnect: elsewhere.
    if (stopping) res.setHeader("Connection", "close");
    // The client address for rate limiting and the audit log: the peer, or behind a trusted proxy the
    // address it forwarded; never one a client wrote itself.
    req.headers["x-lockscope-client-ip"] = clientAddress(req.socket.remoteAddress, req.headers["x-forwarded-for"], trustedProxies);
    // Broken percent-encoding and unsupported methods get the contract's 4xx here: Next.js would 500.
    const length = req.headers["content-length"];
    const hasBody = req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
    const refused = checkHost(rules, hostHeaders(req.rawHeaders)) ?? checkRequestLine(req.method, req.url, hasBody);
    if (refused) {
      const text = refused.body === null ? "" : JSON.stringify(refused.body);
      res.writeHead(refused.status, { ...refused.headers, ...(refused.body === null ? {} : { "Content-Length": String(Buffer.byteLength(text)) }) });
      res.end(text);
      // (OPTIONS, answered 204 without a body, is no refusal.)
      if (refused.body !== null) noteRefused(req.method, refused.status, refused.body.error.code, req.headers.host);
      return;
    }
    void handle(req, res);
    // Next.js listens for protocol upgrades on the server at its first request (its development server's
    // WebSocket), and drops such a socket in production: a request with `Upgrade` (curl --http2's h2c, a
    // WebSocket handshake) got no answer at all. Without a listener, Node.js serves it as the request it is.
    if (server.listenerCount("upgrade") > 0) server.removeAllListeners("upgrade");
  });
  // An idle keep-alive connection stays open longer than the load balancers' own idle timeouts (60 s on AWS's):
  // closed first by the console (Node.js's default is 5 s), a request the balancer sends on it as it closes
  // fails (a 502 there; ECONNRESET for a client that keeps connections).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  // A CONNECT (a proxy tunnel) reaches no request handler: answered 405 here rather than left hanging.
  server.on("connect", (req: http.IncomingMessage, socket: Duplex) => {
    socket.end(connectResponse());
    noteRefused("CONNECT", 405, "method_not_allowed", req.headers.host);
  });
  // A request Node.js's parser refuses gets the contract's JSON answer with the security headers, not a bare 400.
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
    const answering = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
    if (err.code === "ECONNRESET" || !socket.writable || answering) {
      socket.destroy();
      return;
    }
    const raw = (err as NodeJS.ErrnoException & { rawPacket?: Buffer }).rawPacket;
    const answer = clientErrorResponse(err.code, raw ? raw.toString("latin1").split("\n", 1)[0] : "");
    socket.end(answer);
    const [status, code] = [Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1]), /"code":"([a-z_]+)"/.exec(answer)?.[1] ?? "bad_request"];
    noteRefused(undefined, status, code, undefined);
  });
  server.on("error", (err: NodeJS.ErrnoException) => fail(listenFailure(err, config.host, config.port)));
  await new Promise<void>((resolve) => server.listen(config.port, config.host, resolve));
  // An IPv6 address goes in brackets in a URL (http://[::1]:3000), or the line cannot be opened as printed.
  const shownHost =
    config.host === "127.0.0.1" || config.host === "0.0.0.0" || config.host === "::" ? "localhost" : config.host.includes(":") && !config.host.startsWith("[") ? `[${config.host}]` : config.host;
  process.stdout.write(`lockscope: console ready at http://${shownHost}:${config.port}\n`);
  const printToken = g[key("print-operator-token")];
  if (typeof printToken === "function") (printToken as () => void)();

  /** Resolves once every request in flight has been answered, or after `ms`; says how many were left. */
  const drain = (ms: number) =>
    new Promise<number>((resolve) => {
      if (inFlight.size === 0) return resolve(0);
      const timer = setTimeout(() => resolve(inFlight.size), ms);
      onDrained = () => {
        clearTimeout(timer);
        resolve(0);
      };
    });
  /** Ends the shutdown delay early (a second signal), while it runs. */
  let endDelay: (() => void) | null = null;
  /**
   * SIGTERM/SIGINT: turn not-ready; on SIGTERM go on serving for the shutdown delay (load balancers and
   * kube-proxy send new connections for a few seconds after a pod is marked terminating: refused, they fail),
   * every answer saying `Connection: close`. Then stop accepting, end the live streams (a final event and a
   * reconnect hint, so browsers move to another console), let the requests in flight finish (DRAIN_BUDGET_MS
   * at most), run the other shutdown hooks in order (the lab run stops, the audit file is flushed, watchers and
   * Redis connections close), stop the embedded nodes and exit 0, all within SHUTDOWN_BUDGET_MS of the delay's
   * end (a process manager's SIGKILL must not come before the delay plus 10 s).
   */
  const shutdown = async (signal: string) => {
    if (stopping) {
      // A second signal (Ctrl-C again, an impatient operator) does not wait for the rest of the delay.
      if (endDelay) {
        process.stdout.write(`lockscope: ${signal} received during the shutdown delay; shutting down now.\n`);
        endDelay();
      }
      return;
    }
    stopping = true;
    g[key("shutting-down")] = true;
    const signalledAt = Date.now();
    // Only SIGTERM, what process managers and Kubernetes send: Ctrl-C at a terminal means now.
    const delayMs = signal === "SIGTERM" ? config.shutdownDelayMs : 0;
    if (delayMs > 0) {
      process.stdout.write(`lockscope: ${signal} received, shutting down in ${delayMs} ms: not ready, still serving meanwhile (LOCKSCOPE_SHUTDOWN_DELAY_MS).\n`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delayMs);
        endDelay = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      endDelay = null;
      process.stdout.write("lockscope: shutting down…\n");
    } else {
      process.stdout.write(`lockscope: ${signal} received, shutting down…\n`);
    }
    const startedAt = Date.now();
    // Leave the embedded nodes time to stop (RedisNode.stop escalates to SIGKILL after 3 s).
    const hooksDeadline = startedAt + SHUTDOWN_BUDGET_MS - (nodes.length > 0 ? 3_500 : 500);
    const force = setTimeout(() => {
      process.stderr.write("lockscope: shutdown took too long; exiting.\n");
      stopNodesSync();
      process.exit(1);
    }, SHUTDOWN_BUDGET_MS + 500);
    force.unref();
    // No new connections; idle keep-alive ones close now, busy ones once their response is sent.
    server.close();
    server.closeIdleConnections();
    const hooks = (g[key("shutdown-hooks")] as Array<{ name: string; order: number; run: () => Promise<void> | void }> | undefined) ?? [];
    const runHook = async (hook: (typeof hooks)[number]) => {
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
    };
    // Streams and the metrics lease first (order up to 10): they need nothing the requests in flight use.
    for (const hook of hooks.filter((h) => h.order <= 10)) await runHook(hook);
    // Answered in full, then closed: a keep-alive client sends its next request to another console.
    for (const res of inFlight) if (!res.headersSent) res.setHeader("Connection", "close");
    if (inFlight.size > 0) process.stdout.write(`lockscope: draining ${inFlight.size} in-flight request(s)…\n`);
    const cut = await drain(Math.min(DRAIN_BUDGET_MS, Math.max(0, hooksDeadline - Date.now() - 1_000)));
    if (cut > 0) process.stderr.write(`lockscope: ${cut} request(s) still running after the drain; their connections will be closed.\n`);
    for (const hook of hooks.filter((h) => h.order > 10)) await runHook(hook);
    server.closeAllConnections();
    await Promise.all(nodes.map((n) => n.stop()));
    rmSync(path.resolve(config.dataDir, "redis", "pids"), { force: true });
    // Each start's nodes get new ports, so new folders: the stopped ones' (empty: no persistence) go with them.
    for (const n of nodes) if (!n.running) rmSync(path.resolve(config.dataDir, "redis", `node-${n.port}`), { recursive: true, force: true });
    process.stdout.write(`lockscope: stopped in ${Date.now() - signalledAt} ms.\n`);
    process.exit(0);
  };
  process.off("SIGINT", stopWhileStarting);
  process.off("SIGTERM", stopWhileStarting);
  process.on("SIGINT", () => void shutdown("SIGINT"));
  // With nodes of its own: when whoever started us (npm, a shell) dies without passing the signal on, we are
  // reparented; shut down rather than leave a console and its nodes running with nobody to stop them. A console
  // on the team's nodes keeps running when reparented (started with nohup or setsid, or daemonized).
  if (nodes.length > 0) {
    const parent = process.ppid;
    setInterval(() => {
      if (process.ppid !== parent) void shutdown("parent exit");
    }, 1000).unref();
  }
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("uncaughtException", (error) => {
    process.stderr.write(`lockscope: crashed: ${withoutArguments(error.stack ?? String(error))}\n`);
    stopNodesSync();
    process.exit(1);
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`lockscope: could not start: ${withoutArguments(error instanceof Error ? error.message : String(error))}\n`);
  process.exit(1);
});

