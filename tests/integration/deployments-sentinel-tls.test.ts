import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "@/lib/redis-node";
import type { LockDetail } from "@/lib/locks/types";
import { call, OPERATOR_TOKEN, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { startSentinelSet, tlsServerArgs, type SentinelSet } from "../support/sentinel";
import { makeCertificates, type TestCertificates } from "../support/tls";
import { README_CONSOLE_ACL } from "../support/acl";
import { until } from "../support/wait";

/** The README's ACL for the sentinels themselves, word for word (after the password). */
const SENTINEL_ACL = "resetchannels &+switch-master -@all +ping +sentinel|get-master-addr-by-name +sentinel|sentinels +subscribe +unsubscribe +client|setname";
const PASSWORD = "console-password-0123456789";
const SENTINEL_PASSWORD = "sentinel-password-0123456789";
const SERVER_NAME = "redis.lockscope.test";

type Listed = { resource: string; state: string; token: string | null };

/**
 * A Sentinel-managed primary where everything speaks TLS (the instances, replication, the sentinels) and the
 * console logs in as least-privilege ACL users on both: the instances' and the sentinels' own. It must find the
 * primary through the sentinels, watch it, follow a failover to the replica's TLS port, and nothing it does may
 * be refused.
 */
describe("a Sentinel-managed primary over TLS, with ACL users on the instances and the sentinels", () => {
  let cluster: TestCluster;
  let set: SentinelSet;
  let certs: TestCertificates;
  let primaryTlsPort: number;
  const admin = (port: number) => {
    const c = new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1, retryStrategy: () => null });
    c.on("error", () => undefined);
    return c;
  };
  const refused = async (ports: number[]) => {
    const out: unknown[] = [];
    for (const port of ports) {
      const c = admin(port);
      try {
        out.push(...((await c.call("ACL", "LOG")) as unknown[]));
      } finally {
        c.disconnect();
      }
    }
    return out;
  };

  beforeAll(async () => {
    certs = makeCertificates(SERVER_NAME);
    const passwordFile = path.join(certs.dir, "password");
    writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
    const sentinelPasswordFile = path.join(certs.dir, "sentinel-password");
    writeFileSync(sentinelPasswordFile, `${SENTINEL_PASSWORD}\n`, { mode: 0o600 });
    const tlsFiles = { cert: certs.serverCert, key: certs.serverKey, clientCert: certs.clientCert, clientKey: certs.clientKey, ca: certs.caFile };
    primaryTlsPort = await freePort();
    const userArgs = ["--user", "lockscope", ...`>${PASSWORD} ${README_CONSOLE_ACL}`.split(" ")];
    cluster = await setUpConsole({ nodes: 1, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "500" }, extraArgs: [...tlsServerArgs(tlsFiles, primaryTlsPort), ...userArgs] });
    set = await startSentinelSet(cluster.nodes[0]!, mkdtempSync(path.join(os.tmpdir(), "lockscope-sentinel-tls-")), "locks", {
      ...tlsFiles,
      primaryTlsPort,
      replicaArgs: userArgs,
      sentinelConf: [`user lockscope-sentinel on >${SENTINEL_PASSWORD} ${SENTINEL_ACL}`],
    });
    delete process.env.REDIS_URLS;
    Object.assign(process.env, {
      REDIS_SENTINELS: set.sentinelsVar,
      REDIS_SENTINEL_MASTER: set.master,
      REDIS_TLS_CA_FILE: certs.caFile,
      REDIS_TLS_CERT_FILE: certs.clientCert,
      REDIS_TLS_KEY_FILE: certs.clientKey,
      REDIS_TLS_SERVERNAME: SERVER_NAME,
      REDIS_USERNAME: "lockscope",
      REDIS_PASSWORD_FILE: passwordFile,
      REDIS_SENTINEL_USERNAME: "lockscope-sentinel",
      REDIS_SENTINEL_PASSWORD_FILE: sentinelPasswordFile,
    });
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(cluster);
    await set?.close();
  });

  it("watches the primary the sentinels name, follows a failover to the promoted replica's TLS port, and no command is refused", async () => {
    const locks = await import("@/app/api/locks/route");
    const one = await import("@/app/api/locks/[resource]/route");
    const ready = await import("@/app/api/ready/route");
    const heldAs = async (resource: string, token: string) =>
      ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Listed[] }).locks.some((l) => l.resource === resource && l.state === "held" && l.token === token);
    const primary = admin(cluster.nodes[0]!.port);
    await primary.set("lock:sentinel-tls/before", "holder-before", "PX", 60_000);
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000).catch(async (error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify((await call(ready.GET, "GET", "/api/ready")).body)}; ACL LOG: ${JSON.stringify(await refused([cluster.nodes[0]!.port, ...set.sentinelPorts])).slice(0, 2_000)}`);
    });
    await until("the lock held at start", () => heldAs("lock:sentinel-tls/before", "holder-before"));
    await primary.set("lock:sentinel-tls/after", "holder-after", "PX", 60_000);
    await until("a lock taken while watched", () => heldAs("lock:sentinel-tls/after", "holder-after"));
    // Copied to both replicas before the failover, so it is held across it.
    expect(await primary.wait(2, 5_000)).toBe(2);
    const release = await import("@/app/api/locks/[resource]/release/route");
    const res = await call(release.POST, "POST", "/api/locks/lock%3Asentinel-tls%2Fbefore/release", { token: OPERATOR_TOKEN, body: { reason: "tls sentinel release" }, params: { resource: "lock:sentinel-tls/before" } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await primary.exists("lock:sentinel-tls/before")).toBe(0);
    primary.disconnect();

    // The primary dies; the sentinels promote a replica and give its TLS port.
    await cluster.nodes[0]!.kill();
    const sentinel = admin(set.sentinelPorts[0]!);
    const promotedTls = await until(
      "a replica promoted",
      async () => {
        const reply = (await sentinel.call("SENTINEL", "GET-MASTER-ADDR-BY-NAME", set.master).catch(() => null)) as [string, string] | null;
        return reply !== null && Number(reply[1]) !== primaryTlsPort ? Number(reply[1]) : null;
      },
      60_000,
      200,
    );
    sentinel.disconnect();
    const promoted = await replicaWithTlsPort(set, promotedTls);
    const writer = admin(promoted);
    await until("the promoted replica takes writes", async () => (await writer.set("lock:sentinel-tls/promoted", "holder-promoted", "PX", 60_000).catch(() => null)) === "OK", 30_000, 200);
    await until("the console on the promoted primary", () => heldAs("lock:sentinel-tls/promoted", "holder-promoted"), 60_000);
    expect(await heldAs("lock:sentinel-tls/after", "holder-after")).toBe(true);
    const page = (await call(one.GET, "GET", "/api/locks/lock%3Asentinel-tls%2Fafter", { token: VIEWER_TOKEN, params: { resource: "lock:sentinel-tls/after" } })).body as LockDetail;
    expect(page.timeline.map((t) => t.type)).toContain("failover");
    writer.disconnect();

    // Nothing the console did was refused, on the instances or the sentinels.
    expect(JSON.stringify(await refused([...set.replicas.map((r) => r.port), ...set.sentinelPorts]))).toBe("[]");
  });
});

/** The plain port of the replica whose TLS port is `tlsPort`. */
async function replicaWithTlsPort(set: SentinelSet, tlsPort: number): Promise<number> {
  for (const r of set.replicas) {
    const c = new Redis(r.port, "127.0.0.1", { maxRetriesPerRequest: 1, retryStrategy: () => null });
    c.on("error", () => undefined);
    try {
      const [, port] = (await c.config("GET", "tls-port")) as [string, string];
      if (Number(port) === tlsPort) return r.port;
    } finally {
      c.disconnect();
    }
  }
  throw new Error(`no replica listens on TLS port ${tlsPort}`);
}
