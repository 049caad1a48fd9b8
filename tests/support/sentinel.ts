import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { freePort, RedisNode, serverPid } from "@/lib/redis-node";
import { setUpConsole } from "./console";
import type { TestCluster } from "./redis";
import { until } from "./wait";

/**
 * A Sentinel-managed primary for a test: the given primary, two replicas and three sentinels
 * (`redis-server <conf> --sentinel`) on free ports, quorum 2, a primary declared down after 1 s.
 */
export interface SentinelSet {
  master: string;
  primary: RedisNode;
  replicas: RedisNode[];
  sentinelPorts: number[];
  /** `host:port,…` for REDIS_SENTINELS (their TLS ports with `tls`). */
  sentinelsVar: string;
  /** SIGSTOP the i-th sentinel: it keeps its connections and accepts new ones, but answers nothing. */
  pauseSentinel(i: number): void;
  resumeSentinel(i: number): void;
  close(): Promise<void>;
}

const setpriv = spawnSync("setpriv", ["--pdeathsig", "KILL", "true"], { stdio: "ignore" }).status === 0;

/**
 * A sentinel on a free port monitoring `primaryPort` as `master` (quorum 2); another port is tried when a process
 * of another test took the one handed out first. The caller kills `child`.
 */
/**
 * TLS for a Sentinel set: every instance and sentinel also listens on a TLS port, replication and the
 * sentinels' own connections go over TLS (so the addresses the sentinels give are TLS ports), and `sentinelConf`
 * lines are added to every sentinel's configuration (its ACL users).
 */
export interface SentinelTls {
  cert: string;
  key: string;
  clientCert: string;
  clientKey: string;
  ca: string;
  /** The primary's TLS port (it was started with it). */
  primaryTlsPort: number;
  /** `--name value` arguments every replica gets besides its TLS ones (its ACL users). */
  replicaArgs?: readonly string[];
  sentinelConf?: readonly string[];
}

/** The TLS arguments of an instance or sentinel on `tlsPort`. */
export const tlsServerArgs = (tls: Pick<SentinelTls, "cert" | "key" | "clientCert" | "clientKey" | "ca">, tlsPort: number): string[] => [
  "--tls-port", String(tlsPort), "--tls-cert-file", tls.cert, "--tls-key-file", tls.key, "--tls-client-cert-file", tls.clientCert, "--tls-client-key-file", tls.clientKey,
  "--tls-ca-cert-file", tls.ca, "--tls-replication", "yes",
];

export async function startSentinel(dir: string, master: string, primaryPort: number, tls?: SentinelTls, hostnames = false): Promise<{ port: number; tlsPort: number | null; child: ChildProcess }> {
  for (let attempt = 1; ; attempt++) {
    const started = await startSentinelOnce(dir, master, primaryPort, tls, hostnames);
    if (started) return started;
    if (attempt === 5) throw new Error("no sentinel started: five free ports were each taken by another process first");
  }
}

async function startSentinelOnce(dir: string, master: string, primaryPort: number, tls: SentinelTls | undefined, hostnames: boolean): Promise<{ port: number; tlsPort: number | null; child: ChildProcess } | null> {
  const port = await freePort();
  const tlsPort = tls ? await freePort() : null;
  const conf = path.join(dir, `sentinel-${port}.conf`);
  writeFileSync(
    conf,
    [
      `port ${port}`,
      "bind 127.0.0.1",
      "daemonize no",
      `dir ${dir}`,
      "loglevel warning",
      // (Over TLS the sentinel monitors the primary's TLS port, and announces its own.)
      ...(tls
        ? [`tls-port ${tlsPort}`, `tls-cert-file ${tls.cert}`, `tls-key-file ${tls.key}`, `tls-client-cert-file ${tls.clientCert}`, `tls-client-key-file ${tls.clientKey}`, `tls-ca-cert-file ${tls.ca}`, "tls-replication yes", ...(tls.sentinelConf ?? [])]
        : []),
      // (With `hostnames`, the instances are known and announced by the name localhost, as by DNS names elsewhere.)
      ...(hostnames ? ["sentinel resolve-hostnames yes", "sentinel announce-hostnames yes"] : []),
      `sentinel monitor ${master} ${hostnames ? "localhost" : "127.0.0.1"} ${tls ? tls.primaryTlsPort : primaryPort} 2`,
      `sentinel down-after-milliseconds ${master} 1000`,
      `sentinel failover-timeout ${master} 10000`,
      `sentinel parallel-syncs ${master} 2`,
      "",
    ].join("\n"),
  );
  const args = [conf, "--sentinel"];
  // Dies with the test process, however it dies (as RedisNode's nodes do).
  const child = setpriv ? spawn("setpriv", ["--pdeathsig", "KILL", "redis-server", ...args], { stdio: "ignore" }) : spawn("redis-server", args, { stdio: "ignore" });
  let exited = false;
  child.once("exit", () => {
    exited = true;
  });
  // Answered by this sentinel's own process (setpriv execs it, keeping the pid), not by another that holds the port.
  const pid = await until(`sentinel on ${port}`, async () => (exited ? -1 : await serverPid(port)));
  if (pid === child.pid) return { port, tlsPort, child };
  child.kill("SIGKILL");
  return null;
}

export async function startSentinelSet(primary: RedisNode, dir: string, master = "locks", tls?: SentinelTls, hostnames = false): Promise<SentinelSet> {
  mkdirSync(dir, { recursive: true });
  const announce = hostnames ? ["--replica-announce-ip", "localhost"] : [];
  const replicaArgs = async () => (tls ? [...tlsServerArgs(tls, await freePort()), "--replicaof", "127.0.0.1", String(tls.primaryTlsPort), ...(tls.replicaArgs ?? [])] : ["--replicaof", "127.0.0.1", String(primary.port), ...announce]);
  if (hostnames) {
    const c = new Redis(primary.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    try {
      await c.config("SET", "replica-announce-ip", "localhost");
    } finally {
      c.disconnect();
    }
  }
  const replicas = await Promise.all([0, 1].map(async () => RedisNode.start({ dir, extraArgs: await replicaArgs() })));
  const admin = new Redis(primary.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
  try {
    await until("both replicas online", async () => /connected_slaves:2/.test(await admin.info("replication")) && /state=online[^\n]*\n[^\n]*state=online/.test(await admin.info("replication")));
  } finally {
    admin.disconnect();
  }
  const sentinels = await Promise.all([0, 1, 2].map(() => startSentinel(dir, master, primary.port, tls, hostnames)));
  // Sentinels find the replicas and each other through the primary (hello messages every 2 s).
  for (const s of sentinels) {
    const c = new Redis(s.port, "127.0.0.1", { maxRetriesPerRequest: 1 });
    try {
      await until("the sentinel knows the replicas and the other sentinels", async () => {
        const replicasSeen = (await c.call("SENTINEL", "REPLICAS", master)) as unknown[];
        const others = (await c.call("SENTINEL", "SENTINELS", master)) as unknown[];
        return replicasSeen.length === 2 && others.length === 2;
      }, 30_000);
    } finally {
      c.disconnect();
    }
  }
  return {
    master,
    primary,
    replicas,
    sentinelPorts: sentinels.map((s) => s.port),
    sentinelsVar: sentinels.map((s) => `127.0.0.1:${s.tlsPort ?? s.port}`).join(","),
    pauseSentinel: (i) => sentinels[i]?.child.kill("SIGSTOP"),
    resumeSentinel: (i) => sentinels[i]?.child.kill("SIGCONT"),
    close: async () => {
      for (const s of sentinels) s.child.kill("SIGKILL");
      await Promise.all(replicas.map((r) => r.stop()));
    },
  };
}

/**
 * A console over a Sentinel set: the console's own node is the primary the sentinels monitor, and the console
 * is pointed at the sentinels (REDIS_SENTINELS) before its live view starts.
 */
export async function setUpConsoleOverSentinels(dirPrefix: string, options: { hostnames?: boolean } = {}): Promise<{ cluster: TestCluster; set: SentinelSet }> {
  const cluster = await setUpConsole({ nodes: 1, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
  const set = await startSentinelSet(cluster.nodes[0]!, mkdtempSync(path.join(os.tmpdir(), dirPrefix)), "locks", undefined, options.hostnames ?? false);
  delete process.env.REDIS_URLS;
  Object.assign(process.env, { REDIS_SENTINELS: set.sentinelsVar, REDIS_SENTINEL_MASTER: set.master });
  return { cluster, set };
}

/**
 * The primary after a failover: the replica the other replica follows with its link up (the old primary is
 * dead). Asked of the instances, not of a sentinel: a sentinel can name for a while a replica that the
 * others' later failover turned back into a replica. Waits until the two agree; the caller disconnects it.
 */
export async function promotedPrimary(set: SentinelSet, timeoutMs = 90_000): Promise<{ client: Redis; port: number }> {
  const port = await until(
    "one replica following the other as its primary",
    async () => {
      for (const r of set.replicas) {
        if (!r.running || r.isPaused) continue;
        const c = new Redis(r.port, "127.0.0.1", { maxRetriesPerRequest: 1, retryStrategy: () => null });
        c.on("error", () => undefined);
        try {
          const info = await c.info("replication");
          const leader = /\r\nmaster_port:(\d+)\r\n/.exec(info)?.[1];
          if (/\r\nrole:slave\r\n/.test(info) && /\r\nmaster_link_status:up\r\n/.test(info) && set.replicas.some((o) => o !== r && String(o.port) === leader)) return Number(leader);
        } catch {
          // (not answering yet)
        } finally {
          c.disconnect();
        }
      }
      return null;
    },
    timeoutMs,
  );
  return { client: new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1 }), port };
}
