import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, ping, RedisNode } from "@/lib/redis-node";
import { startCluster, type TestCluster } from "../support/redis";
import { redisServerChildren, redisServerPids, startLauncher, type LauncherProcess } from "../support/launcher";
import { until } from "../support/wait";

interface HealthBody {
  status: string;
  nodes: Array<{ url: string; up: boolean }>;
}

describe("npm start's launcher", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(3);
  });
  afterAll(async () => {
    await cluster.close();
  });

  it("stops at once with one line naming a bad PORT", async () => {
    const launcher = await startLauncher({ PORT: "http" }, { waitReady: false });
    expect(await launcher.exited).toBe(1);
    const lines = launcher.output().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('PORT="http" is invalid');
  });

  it("stops at once with one line naming a bad REDIS_URLS", async () => {
    const launcher = await startLauncher({ REDIS_URLS: "localhost:6380" }, { waitReady: false });
    expect(await launcher.exited).toBe(1);
    expect(launcher.output().trim()).toMatch(/^lockscope: REDIS_URLS="localhost:6380" is invalid: expected .*redis:\/\//);
  });

  it("stops with one line naming HOST when it names no address the console can listen on", async () => {
    const cases: Array<[string, RegExp]> = [
      // What an IPv6 address looks like in a URL, where listening takes it bare.
      ["[::1]", /^lockscope: HOST="\[::1\]" is invalid: expected a hostname or IP address to bind, e.g. 127.0.0.1 \(an IPv6 address goes without brackets here: ::1\)\.$/],
      ["no-such-host.invalid", /^lockscope: HOST="no-such-host.invalid" is invalid: expected a hostname or IP address of this machine to bind, e.g. 127.0.0.1 \(.*ENOTFOUND.*\)\.$/],
    ];
    for (const [host, said] of cases) {
      const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), HOST: host }, { waitReady: false });
      const code = await Promise.race([launcher.exited, new Promise((resolve) => setTimeout(() => resolve("still running after 30 s"), 30_000))]);
      if (code !== 1) await launcher.stop("SIGKILL");
      expect([host, code]).toEqual([host, 1]);
      expect(launcher.output().trim().split("\n").at(-1)).toMatch(said);
    }
  }, 120_000);

  it("stops with one line naming PORT when the port is in use, before it connects to the lock nodes", async () => {
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    const port = (busy.address() as net.AddressInfo).port;
    try {
      const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), PORT: String(port) }, { waitReady: false });
      const code = await Promise.race([launcher.exited, new Promise((resolve) => setTimeout(() => resolve("still running after 60 s"), 60_000))]);
      if (code !== 1) await launcher.stop("SIGKILL");
      expect(code, launcher.output()).toBe(1);
      expect(launcher.output().trim().split("\n").at(-1)).toBe(`lockscope: port ${port} on 127.0.0.1 is in use: set PORT to a free port.`);
      // A console that never served is not listed among the consoles on the nodes (the others would warn of it), as
      // `<host name>:<port>/<id>`.
      const listed = await cluster.client(0).hkeys("lockscope:consoles");
      expect(listed.filter((id) => id.includes(`:${port}/`))).toEqual([]);
    } finally {
      await new Promise<void>((resolve) => busy.close(() => resolve()));
    }
  }, 120_000);

  it("stops at once with one line naming a data folder or an audit file it cannot make", async () => {
    // /proc refuses new entries with ENOENT, which Node's own recursive mkdir retried forever (the launcher hung).
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ LOCKSCOPE_DATA_DIR: "/proc/lockscope-nope" }, /^lockscope: LOCKSCOPE_DATA_DIR="\/proc\/lockscope-nope" is invalid: expected a folder the console can create and write \(ENOENT: .*\)\.$/],
      [{ LOCKSCOPE_DATA_DIR: "/etc/hostname/lockscope" }, /^lockscope: LOCKSCOPE_DATA_DIR="\/etc\/hostname\/lockscope" is invalid: expected a folder the console can create and write \(ENOTDIR: .*\)\.$/],
      [{ AUDIT_FILE: "/proc/lockscope-nope/audit.jsonl" }, /^lockscope: AUDIT_FILE="\/proc\/lockscope-nope\/audit.jsonl" is invalid: expected a file the console can create and append to \(ENOENT: .*\)\.$/],
      [{ AUDIT_FILE: "/etc/hostname/audit.jsonl" }, /^lockscope: AUDIT_FILE="\/etc\/hostname\/audit.jsonl" is invalid: expected a file the console can create and append to \(ENOTDIR: .*\)\.$/],
    ];
    for (const [env, said] of cases) {
      const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), ...env }, { waitReady: false });
      const code = await Promise.race([launcher.exited, new Promise((resolve) => setTimeout(() => resolve("still running after 20 s"), 20_000))]);
      if (code !== 1) await launcher.stop();
      expect([env, code]).toEqual([env, 1]);
      const lines = launcher.output().trim().split("\n");
      expect(lines.at(-1)).toMatch(said);
    }
  }, 120_000);

  it("with AUDIT_DATABASE_URL, neither makes nor checks the audit file it does not use, and says AUDIT_FILE is ignored", async () => {
    // A database that does not answer (nothing listens on the port): the console serves, refusing releases meanwhile.
    const database = `postgres://lockscope:it-db-password-0123@127.0.0.1:${await freePort()}/lockscope`;
    const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), AUDIT_DATABASE_URL: database, AUDIT_FILE: "/proc/lockscope-nope/audit.jsonl" }, { waitReady: false });
    try {
      await until("the console serves, or exits", () => launcher.output().includes("console ready at") || launcher.child.exitCode !== null, 60_000, 100);
      expect(launcher.output()).toContain("console ready at");
      const about = launcher.output().split("\n").filter((line) => line.includes("AUDIT_FILE"));
      expect(about).toEqual(["lockscope: AUDIT_FILE is ignored: with AUDIT_DATABASE_URL the audit log is kept in the database."]);
      expect(launcher.output()).not.toContain("it-db-password-0123");
    } finally {
      await launcher.stop();
    }
    // Nor is the default one made in the data folder, where an operator would look for the log.
    const defaults = await startLauncher({ REDIS_URLS: cluster.urls.join(","), AUDIT_DATABASE_URL: database });
    try {
      expect(existsSync(path.join(defaults.dataDir, "audit.jsonl"))).toBe(false);
      expect(defaults.output()).not.toContain("AUDIT_FILE");
    } finally {
      await defaults.stop();
      rmSync(defaults.dataDir, { recursive: true, force: true });
    }
  }, 180_000);

  it("stops with one line naming the data folder when a file of its own there cannot be read, instead of serving 500s", async () => {
    // A secret mounted at the token's path (a Kubernetes Secret volume is a folder), or a volume whose files another
    // user owns: the console's runtime cannot start.
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-unreadable-"));
    mkdirSync(path.join(dataDir, "operator-token"));
    try {
      const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_DATA_DIR: dataDir }, { waitReady: false });
      const code = await Promise.race([launcher.exited, new Promise((resolve) => setTimeout(() => resolve("still running after 60 s"), 60_000))]);
      if (code !== 1) await launcher.stop("SIGKILL");
      expect(code, launcher.output()).toBe(1);
      const last = launcher.output().trim().split("\n").at(-1);
      expect(last).toBe(
        `lockscope: LOCKSCOPE_DATA_DIR=${JSON.stringify(dataDir)} is invalid: expected a folder whose files the console can read and write (EISDIR: illegal operation on a directory, open '${path.join(dataDir, "operator-token")}').`,
      );
      expect(launcher.output()).not.toContain("console ready");
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);

  it("keeps an idle keep-alive connection open past the idle timeouts of load balancers' own connections", async () => {
    const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(",") });
    try {
      const { port } = new URL(launcher.baseUrl);
      const socket = net.connect(Number(port), "127.0.0.1");
      let received = "";
      socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")));
      const closed = new Promise<string>((resolve) => socket.once("close", () => resolve("closed")));
      const ask = () => socket.write(`GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n\r\n`);
      ask();
      await until("the first answer", () => /^HTTP\/1\.1 \d{3} /.test(received));
      // Idle longer than Node.js's default keep-alive timeout (5 s): the connection must still be there.
      const idle = await Promise.race([closed, new Promise<string>((resolve) => setTimeout(() => resolve("open"), 6_500))]);
      expect(idle).toBe("open");
      received = "";
      ask();
      await until("the second answer, on the same connection", () => /^HTTP\/1\.1 \d{3} /.test(received));
      socket.destroy();
    } finally {
      await launcher.stop();
    }
  }, 60_000);

  it("serves on three embedded nodes and leaves no redis-server, nor its folder, behind after Ctrl-C", async () => {
    const launcher = await startLauncher({ REDIS_URLS: "" });
    // Right after the start, on a loaded machine, a node can briefly read as degraded (a probe slower than
    // the node timeout, a watcher still subscribing): wait for "ok", as an operator watching would.
    const health = await until("health ok", async () => {
      const body = (await (await fetch(`${launcher.baseUrl}/api/health`)).json()) as HealthBody;
      return body.status === "ok" ? body : null;
    });
    expect(health.status).toBe("ok");
    expect(health.nodes).toHaveLength(3);
    const ports = health.nodes.map((n) => new URL(n.url).port);
    expect(ports).not.toContain("6379");
    for (const port of ports) expect(redisServerPids(`:${port}`)).toHaveLength(1);
    expect(redisServerChildren(launcher.child.pid!)).toHaveLength(3);
    expect(launcher.output()).toContain(`console ready at http://localhost:${launcher.port}`);
    for (const port of ports) expect(existsSync(path.join(launcher.dataDir, "redis", `node-${port}`))).toBe(true);
    expect(await launcher.stop("SIGINT")).toBe(0);
    for (const port of ports) expect(redisServerPids(`:${port}`)).toEqual([]);
    // A start's node folders go with its nodes: the data folder does not gather three more at every start.
    expect(readdirSync(path.join(launcher.dataDir, "redis")).filter((entry) => entry.startsWith("node-"))).toEqual([]);
  }, 120_000);

  it("uses the nodes in REDIS_URLS and starts none of its own", async () => {
    const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(",") });
    const health = (await (await fetch(`${launcher.baseUrl}/api/health`)).json()) as HealthBody;
    expect(health.nodes.map((n) => n.url)).toEqual(cluster.urls);
    expect(redisServerChildren(launcher.child.pid!)).toEqual([]);
    expect(await launcher.stop("SIGTERM")).toBe(0);
    // The nodes it did not start are still there.
    expect(await cluster.client(0).ping()).toBe("PONG");
  }, 120_000);
  it("keeps running when its parent exits (nohup, setsid) on the team's nodes, and stops with its own nodes", async () => {
    /** Starts the launcher from a shell that exits once told to: the launcher is then reparented. */
    const fromShell = async (env: Record<string, string>) => {
      const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-reparent-"));
      const port = await freePort();
      const go = path.join(dir, "go");
      const shell = spawn("sh", ["-c", `"${process.execPath}" --import tsx scripts/start.ts > "${dir}/out.log" 2>&1 & echo $!; while [ ! -f "${go}" ]; do sleep 0.1; done`], {
        cwd: path.resolve(import.meta.dirname, "../.."),
        env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", NODE_ENV: "production", LOCKSCOPE_DATA_DIR: dir, ...env },
        stdio: ["ignore", "pipe", "ignore"],
      });
      const pid = Number(await new Promise<string>((resolve) => shell.stdout.once("data", (c: Buffer) => resolve(c.toString()))));
      const health = () => fetch(`http://127.0.0.1:${port}/api/health`).then((r) => r.ok, () => false);
      await until("the console serves /api/health", health, 90_000, 200);
      writeFileSync(go, "");
      await new Promise<void>((resolve) => shell.once("exit", () => resolve()));
      const alive = () => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      return { pid, health, alive, log: () => readFileSync(path.join(dir, "out.log"), "utf8") };
    };
    const external = await fromShell({ REDIS_URLS: cluster.urls.join(",") });
    try {
      // Longer than the once-a-second check for a new parent.
      await new Promise((r) => setTimeout(r, 3_000));
      expect(external.alive()).toBe(true);
      expect(await external.health()).toBe(true);
    } finally {
      process.kill(external.pid, "SIGTERM");
    }
    await until("the console stopped on SIGTERM", () => !external.alive(), 20_000);
    const embedded = await fromShell({});
    await until("the console with its own nodes stopped once reparented", () => !embedded.alive(), 30_000);
    expect(embedded.log()).toContain("parent exit");
  }, 240_000);

  it("stops, cleanly, on a SIGTERM or SIGINT sent to npm alone (`npm run start:prod` and `npm start` under a process manager)", async () => {
    // A process manager signals the process it started: npm, which passes the signal to its script's shell.
    for (const [script, env, signal] of [
      ["start:prod", { REDIS_URLS: cluster.urls.join(",") }, "SIGTERM"],
      ["start", {}, "SIGINT"],
    ] as const) {
      const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-npm-signal-"));
      const port = await freePort();
      const npm = spawn("npm", ["run", "--silent", script], {
        cwd: path.resolve(import.meta.dirname, "../.."),
        env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", LOCKSCOPE_DATA_DIR: dir, ...env },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      npm.stdout.on("data", (c: Buffer) => (out += c.toString()));
      npm.stderr.on("data", (c: Buffer) => (out += c.toString()));
      const npmExited = new Promise<void>((resolve) => npm.once("exit", () => resolve()));
      const listening = () =>
        new Promise<boolean>((resolve) => {
          const socket = net.connect(port, "127.0.0.1");
          socket.once("connect", () => (socket.destroy(), resolve(true)));
          socket.once("error", () => resolve(false));
        });
      try {
        await until(`${script} serves`, async () => out.includes("console ready at http://") && (await listening()), 90_000, 200);
        const pidsFile = path.join(dir, "redis", "pids");
        const nodePorts = existsSync(pidsFile) ? readFileSync(pidsFile, "utf8").trim().split("\n").map((line) => line.split(" ")[1]) : [];
        expect(nodePorts).toHaveLength(script === "start" ? 3 : 0);
        npm.kill(signal);
        await npmExited;
        // The console heard the signal itself and shut down in order, its port and nodes let go.
        await until(`the console of ${script} stopped`, async () => out.includes("lockscope: stopped in") && !(await listening()), 20_000, 200);
        expect(out).toContain(`lockscope: ${signal} received, shutting down`);
        for (const nodePort of nodePorts) expect(redisServerPids(`:${nodePort}`)).toEqual([]);
      } finally {
        if (npm.exitCode === null && npm.signalCode === null) npm.kill("SIGKILL");
        // A console the signal never reached: found by its data folder, stopped.
        for (const pid of readdirSync("/proc").filter((entry) => /^\d+$/.test(entry))) {
          try {
            if (readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`LOCKSCOPE_DATA_DIR=${dir}`)) process.kill(Number(pid), "SIGTERM");
          } catch {
            // ended meanwhile, or not ours to read
          }
        }
      }
    }
  }, 240_000);

  it("reads relative paths in the environment from the folder it was started in, not its own", async () => {
    const here = mkdtempSync(path.join(os.tmpdir(), "lockscope-cwd-"));
    writeFileSync(path.join(here, "deployments.json"), JSON.stringify({ deployments: [{ name: "orders", kind: "redlock", urls: cluster.urls }] }));
    const port = await freePort();
    const child = spawn(process.execPath, [path.resolve(import.meta.dirname, "../../dist/start.mjs")], {
      cwd: here,
      env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", LOCKSCOPE_DATA_DIR: "data", LOCKSCOPE_DEPLOYMENTS_FILE: "deployments.json" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (c: Buffer) => (out += c.toString()));
    child.stderr.on("data", (c: Buffer) => (out += c.toString()));
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    try {
      await until(
        "the console serves /api/health",
        async () => {
          if (child.exitCode !== null) throw new Error(`the launcher exited:\n${out}`);
          if (!out.includes("console ready at http://")) return false;
          return fetch(`http://127.0.0.1:${port}/api/health`).then((r) => r.ok, () => false);
        },
        90_000,
        200,
      );
      const health = (await (await fetch(`http://127.0.0.1:${port}/api/health`)).json()) as HealthBody;
      expect(health.nodes.map((n) => n.url)).toEqual(cluster.urls);
      expect(out).toContain(`kept in ${path.join(here, "data", "operator-token")}`);
      expect(readFileSync(path.join(here, "data", "operator-token"), "utf8").trim()).toMatch(/^lsop_/);
    } finally {
      child.kill("SIGTERM");
      await exited;
    }
  }, 120_000);

  it("says why a REDIS_CLUSTER_URLS seed that is not a cluster node cannot be reached", async () => {
    const launcher = await startLauncher({ REDIS_CLUSTER_URLS: cluster.urls[0]! });
    try {
      await until("the log says why", () => launcher.output().includes("lock node unreachable"), 30_000, 200);
      const line = launcher.output().split("\n").find((l) => l.includes("lock node unreachable")) ?? "";
      expect((JSON.parse(line) as { err: string }).err).toMatch(/cluster support disabled/);
    } finally {
      expect(await launcher.stop("SIGTERM")).toBe(0);
    }
  }, 120_000);

  it("prints a URL that can be opened when it listens on an IPv6 address", async () => {
    const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), HOST: "::1" }, { waitReady: false });
    try {
      await until("the console says where it serves", () => launcher.output().includes("console ready at"), 90_000, 200);
      const url = /console ready at (\S+)/.exec(launcher.output())?.[1] ?? "";
      expect(url).toBe(`http://[::1]:${launcher.port}`);
      expect((await fetch(`${url}/api/health`)).status).toBe(200);
    } finally {
      expect(await launcher.stop("SIGTERM")).toBe(0);
    }
  }, 120_000);

  describe("one console per data folder", () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-launcher-folder-"));
    let first: LauncherProcess;
    let orphan: RedisNode;
    let firstPorts: string[] = [];

    afterAll(async () => {
      await first?.stop("SIGKILL");
      await orphan?.kill();
      rmSync(dataDir, { recursive: true, force: true });
    });

    it("reaps a node a dead console of this folder left behind, and no other redis-server", async () => {
      // A node of this folder whose console is gone (its node directory is where redis-server runs), and a
      // node of someone else's listed in the same file: only the first is provably an orphan.
      orphan = await RedisNode.start({ dir: path.join(dataDir, "redis"), dieWithParent: false });
      const foreign = cluster.nodes[0]!;
      mkdirSync(path.join(dataDir, "redis"), { recursive: true });
      writeFileSync(path.join(dataDir, "redis", "pids"), `${orphan.pid} ${orphan.port}\n${foreign.pid} ${foreign.port}\n`);

      first = await startLauncher({ REDIS_URLS: "", LOCKSCOPE_DATA_DIR: dataDir });
      expect(await ping(orphan.port)).toBe(false);
      expect(await ping(foreign.port)).toBe(true);
      firstPorts = /embedded lock nodes on ([\d, ]+)\n/.exec(first.output())![1]!.split(", ");
      expect(redisServerChildren(first.child.pid!)).toHaveLength(3);
    }, 120_000);

    it("refuses a second launcher on the same folder with one line, and leaves the running console's nodes alone", async () => {
      const nodesBefore = redisServerChildren(first.child.pid!).sort();
      const port = Number(firstPorts[0]);
      const Redis = (await import("ioredis")).default;
      const client = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1 });
      try {
        await client.set("lock:held-by-the-first-console", "v", "PX", 60_000);
        const second = await startLauncher({ REDIS_URLS: "", LOCKSCOPE_DATA_DIR: dataDir }, { waitReady: false });
        try {
          const code = await until("the second launcher stops", () => second.child.exitCode, 60_000);
          expect(code).toBe(1);
          const lines = second.output().trim().split("\n");
          expect(lines).toHaveLength(1);
          expect(lines[0]).toMatch(new RegExp(`^lockscope: the data folder .* is in use by another console \\(pid ${first.child.pid}, `));
        } finally {
          await second.stop("SIGKILL");
        }
        expect(redisServerChildren(first.child.pid!).sort()).toEqual(nodesBefore);
        expect(await client.get("lock:held-by-the-first-console")).toBe("v");
        expect((await fetch(`${first.baseUrl}/api/health`)).status).toBe(200);
      } finally {
        client.disconnect();
      }
    }, 120_000);

    it("takes its embedded nodes with it when it is killed with SIGKILL", async () => {
      expect(firstPorts).toHaveLength(3);
      expect(await first.stop("SIGKILL")).toBe("SIGKILL");
      await until("no redis-server of the killed console is left", () => firstPorts.every((p) => redisServerPids(`:${p}`).length === 0), 10_000);
    });
  });
});
