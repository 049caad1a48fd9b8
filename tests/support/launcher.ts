import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "@/lib/redis-node";
import { onFreePort } from "./free-port";
import { until } from "./wait";

// The project's root: the test runners (Vitest and Playwright) run from it. (No `import.meta` here: Playwright loads
// this file as CommonJS for the e2e specs that start a console of their own.)
const ROOT = process.cwd();

export interface LauncherProcess {
  child: ChildProcess;
  port: number;
  baseUrl: string;
  /** Its LOCKSCOPE_DATA_DIR (a fresh temporary folder unless `env` names one). */
  dataDir: string;
  output: () => string;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/** The launcher's environment besides the test runner's: a variable given `undefined` is left out. */
type LauncherEnv = Record<string, string | undefined>;

interface StartOptions {
  /** false: returns once spawned, without waiting. */
  waitReady?: boolean;
  /** What it must answer with 200 to be taken as up: `/api/health` (the default) or `/api/ready` (its nodes read). */
  until?: "health" | "ready";
}

/**
 * Starts the real launcher (`npm start`'s script) as a child process and waits until it serves health (or is
 * ready), on a free port unless the test names one (`PORT`), started again on another if the launcher finds its
 * port taken.
 */
export async function startLauncher(env: LauncherEnv = {}, options: StartOptions = {}): Promise<LauncherProcess> {
  const dataDir = env.LOCKSCOPE_DATA_DIR ?? mkdtempSync(path.join(os.tmpdir(), "lockscope-launcher-"));
  const launch = async (port: number | null) => {
    const launcher = spawnLauncher(port, env, dataDir);
    return options.waitReady === false ? launcher : untilServing(launcher, options.until ?? "health");
  };
  if (env.PORT !== undefined) return launch(null);
  if (options.waitReady === false) return launch(await freePort());
  return onFreePort(
    launch,
    // Its one line for a port it cannot listen on, in the failure's output.
    (error) => /port \d+ on 127\.0\.0\.1 is in use/.test(String(error)),
  );
}

function spawnLauncher(port: number | null, env: LauncherEnv, dataDir: string): LauncherProcess {
  const childEnv: NodeJS.ProcessEnv = {
    ...process.env,
    ...(port === null ? {} : { PORT: String(port) }),
    HOST: "127.0.0.1",
    LOG_LEVEL: "warn",
    NODE_ENV: "production",
    // No shutdown delay unless a test asks for one: nothing balances load onto these consoles, and a SIGTERM stops them at once.
    LOCKSCOPE_SHUTDOWN_DELAY_MS: "0",
    ...env,
    LOCKSCOPE_DATA_DIR: dataDir,
  };
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete childEnv[name];
  const child = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "scripts", "start.ts")], { cwd: ROOT, env: childEnv, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout?.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr?.on("data", (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")));
  const listening = port ?? Number(env.PORT);
  return {
    child,
    port: listening,
    baseUrl: `http://127.0.0.1:${listening}`,
    dataDir,
    output: () => out,
    exited,
    stop: async (signal = "SIGTERM") => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

async function untilServing(launcher: LauncherProcess, answering: "health" | "ready"): Promise<LauncherProcess> {
  let exitedEarly = false;
  void launcher.exited.then(() => (exitedEarly = true));
  try {
    await until(
      `the console serves /api/${answering}`,
      async () => {
        if (exitedEarly) throw new Error("the launcher exited");
        // Its own line once it listens: until then an answer on the port would be another process's (a free
        // port can be handed to two starters at once, and only one of them binds it).
        if (!launcher.output().includes(`console ready at http://`)) return false;
        return fetch(`${launcher.baseUrl}/api/${answering}`).then(
          (res) => res.ok,
          () => false,
        );
      },
      answering === "ready" ? 120_000 : 90_000,
      200,
    );
    return launcher;
  } catch (error) {
    await launcher.stop("SIGKILL");
    throw new Error(`the console did not come up on ${launcher.baseUrl} (${(error as Error).message}):\n${launcher.output().slice(-2000)}`);
  }
}

/** PIDs of redis-server processes whose title mentions `needle` (redis-server retitles itself `redis-server host:port`). */
export function redisServerPids(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, "utf8").replace(/\0/g, " ");
      if (cmd.includes("redis-server") && cmd.includes(needle)) pids.push(Number(entry));
    } catch {
      // process ended while we looked
    }
  }
  return pids;
}

/** PIDs of redis-server processes whose parent is `parentPid` (the nodes a launcher started itself). */
export function redisServerChildren(parentPid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // The command name is in parentheses and may hold spaces: fields after it are space-separated.
      const afterName = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const ppid = Number(afterName[1]);
      if (ppid === parentPid && stat.includes("(redis-server)")) pids.push(Number(entry));
    } catch {
      // process ended while we looked
    }
  }
  return pids;
}
