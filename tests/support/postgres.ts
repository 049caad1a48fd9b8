import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { onFreePort } from "./free-port";

/**
 * A real PostgreSQL server for a test file (or a benchmark): its own cluster in a temp folder, on a free
 * port on 127.0.0.1 (never 5432, the machine's own server), with a password, so URLs carry a secret the
 * console must never log. `stop()` and `start()` take it down and up mid-test (same data, same port).
 * Call `await server.close()` in `afterAll`.
 */
export interface TestPostgres {
  port: number;
  /** The server's data folder (its `postmaster.pid` names the server process). */
  readonly dataDir: string;
  /** A URL with the password, for `AUDIT_DATABASE_URL`. */
  url(database?: string): string;
  readonly password: string;
  /** Creates a fresh database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  stop(): void;
  start(): void;
  close(): Promise<void>;
}

const USER = "lockscope";

/** The newest installed server's bin folder (Debian's `postgresql` package puts them under /usr/lib/postgresql/<v>/bin). */
export function postgresBinDir(): string {
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(path.join(root, v, "bin", "initdb")))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  const newest = versions[0];
  if (!newest) throw new Error("PostgreSQL is not installed: `apt-get install postgresql` (the tests need initdb and pg_ctl from /usr/lib/postgresql/<v>/bin).");
  return path.join(root, newest, "bin");
}

/** PostgreSQL refuses to run as root: as root, run its tools as the `postgres` user (Debian's package creates it). */
function asServerUser(): { prefix: string[]; uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return { prefix: [] };
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { prefix: ["runuser", "-u", "postgres", "--"], uid, gid };
}

function run(prefix: string[], bin: string, args: string[]): void {
  const [command, ...rest] = [...prefix, bin, ...args];
  if (!command) throw new Error("no command");
  const result = spawnSync(command, rest, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  if (result.status !== 0) throw new Error(`${path.basename(bin)} ${args[0] ?? ""} failed (${result.status}): ${result.stderr || result.stdout}`);
}

export async function startPostgres(): Promise<TestPostgres> {
  const bin = postgresBinDir();
  const user = asServerUser();
  const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-pg-"));
  const data = path.join(dir, "data");
  const password = `pw-${Math.random().toString(36).slice(2)}-secret`;
  const pwfile = path.join(dir, "pwfile");
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  if (user.uid !== undefined && user.gid !== undefined) {
    chownSync(dir, user.uid, user.gid);
    chownSync(pwfile, user.uid, user.gid);
  }
  run(user.prefix, path.join(bin, "initdb"), ["-D", data, "-U", USER, `--pwfile=${pwfile}`, "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync", "-N"]);
  let port = 0;
  const ctl = (...args: string[]) => run(user.prefix, path.join(bin, "pg_ctl"), args);
  const log = path.join(dir, "server.log");
  const start = () => ctl("start", "-D", data, "-w", "-t", "60", "-l", log, "-o", `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60`);
  await onFreePort(
    (free) => {
      port = free;
      // (Emptied, not made anew: the server's user writes it.)
      if (existsSync(log)) writeFileSync(log, "");
      try {
        start();
      } catch (error) {
        throw new Error(`${(error as Error).message}\n${existsSync(log) ? readFileSync(log, "utf8") : ""}`);
      }
    },
    // The server's log says why it did not start.
    (error) => String(error).includes("Address already in use"),
    [5432],
  );
  const url = (database = "postgres") => `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
  return {
    port,
    dataDir: data,
    password,
    url,
    async createDatabase(name) {
      const client = new pg.Client({ connectionString: url() });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE "${name.replace(/"/g, "")}"`);
      } finally {
        await client.end();
      }
      return url(name);
    },
    stop: () => ctl("stop", "-D", data, "-m", "immediate", "-w"),
    start,
    close() {
      try {
        ctl("stop", "-D", data, "-m", "immediate", "-w");
      } catch {
        // Already stopped by the test.
      }
      rmSync(dir, { recursive: true, force: true });
      return Promise.resolve();
    },
  };
}
