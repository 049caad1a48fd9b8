import { writeFileSync } from "node:fs";
import path from "node:path";
import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keySlot } from "@lockscope/redlock";
import type { Deployment } from "@/lib/deployment-config";
import type { LockDetail } from "@/lib/locks/types";
import { call, OPERATOR_TOKEN, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { startRedisCluster, type RedisClusterSet } from "../support/redis-cluster";
import { makeCertificates, type TestCertificates } from "../support/tls";
import { README_CLUSTER_ACL } from "../support/acl";
import { until } from "../support/wait";

/** The same without CLUSTER SHARDS: what a server before Redis 7.0 answers to it (it refuses it). */
const NO_SHARDS_ACL = README_CLUSTER_ACL.replace(" +cluster|shards", "");
const PASSWORD = "cluster-console-password-0123456789";
const SERVER_NAME = "redis.lockscope.test";

type Listed = { resource: string; state: string; token: string | null };

/**
 * A Redis Cluster whose nodes listen on TLS (bus and replication over TLS too) besides their plain ports, as
 * while a cluster is moved to TLS: the console, given TLS seeds, a client certificate, SNI and the ACL user,
 * must reach every primary on its TLS port (CLUSTER SHARDS names both ports; CLUSTER SLOTS over TLS the TLS
 * ones), and nothing it does may be refused.
 */
describe("a Redis Cluster over TLS, watched by a least-privilege ACL user", () => {
  let unused: TestCluster;
  let certs: TestCertificates;
  let set: RedisClusterSet;
  let cluster: InstanceType<typeof Redis.Cluster>;
  let passwordFile: string;
  const keyOn = (port: number, name: string) => set.keyOn(port, name);
  const tlsPortOf = (port: number) => set.nodes.find((n) => n.port === port)!.tlsPort!;

  beforeAll(async () => {
    certs = makeCertificates(SERVER_NAME);
    passwordFile = path.join(certs.dir, "password");
    writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
    unused = await setUpConsole({ nodes: 0, env: { LOCKSCOPE_NODE_TIMEOUT_MS: "500" } });
    set = await startRedisCluster({
      nodeTimeoutMs: 2_000,
      tls: { cert: certs.serverCert, key: certs.serverKey, clientCert: certs.clientCert, clientKey: certs.clientKey, ca: certs.caFile },
      extraArgs: ["--tls-auth-clients", "yes", "--user", "lockscope", ...`>${PASSWORD} ${README_CLUSTER_ACL}`.split(" "), "--user", "lockscope-no-shards", ...`>${PASSWORD} ${NO_SHARDS_ACL}`.split(" ")],
    });
    delete process.env.REDIS_URLS;
    Object.assign(process.env, {
      REDIS_CLUSTER_URLS: set.nodes.slice(0, 2).map((n) => `rediss://127.0.0.1:${n.tlsPort}`).join(","),
      REDIS_TLS_CA_FILE: certs.caFile,
      REDIS_TLS_CERT_FILE: certs.clientCert,
      REDIS_TLS_KEY_FILE: certs.clientKey,
      REDIS_TLS_SERVERNAME: SERVER_NAME,
      REDIS_USERNAME: "lockscope",
      REDIS_PASSWORD_FILE: passwordFile,
    });
    cluster = set.client();
    for (const n of set.nodes) await set.direct(n.port).call("ACL", "LOG", "RESET");
  }, 90_000);
  afterAll(async () => {
    await tearDownConsole(unused);
    await set?.close();
  });

  const detail = async (resource: string) => {
    const one = await import("@/app/api/locks/[resource]/route");
    return (await call(one.GET, "GET", `/api/locks/${encodeURIComponent(resource)}`, { token: VIEWER_TOKEN, params: { resource } })).body as LockDetail;
  };
  const heldAs = async (resource: string, token: string) => {
    const locks = await import("@/app/api/locks/route");
    const listed = ((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Listed[] }).locks;
    return listed.some((l) => l.resource === resource && l.state === "held" && l.token === token);
  };

  it("watches every primary on its TLS port, names the TLS addresses, force-releases, and no command is refused", async () => {
    const primaries = [...new Set(await Promise.all([0, 8000, 15000].map(async (slot) => (await set.shardOf(slot)).primary)))];
    expect(primaries).toHaveLength(3);
    const before = await Promise.all(primaries.map((port, i) => keyOn(port, `tls-before-${i}`)));
    for (const key of before) await cluster.set(key, `holder-${key}`, "PX", 60_000);

    const ready = await import("@/app/api/ready/route");
    // (On failure, what the console and the nodes said: a refused command is in ACL LOG.)
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200, 30_000).catch(async (error: Error) => {
      const refused = await Promise.all(set.nodes.map((n) => set.direct(n.port).call("ACL", "LOG")));
      throw new Error(`${error.message}: ${JSON.stringify((await call(ready.GET, "GET", "/api/ready")).body)}; ACL LOG: ${JSON.stringify(refused).slice(0, 2_000)}`);
    });
    await until("the locks held at start, on all three primaries", async () => (await Promise.all(before.map((k) => heldAs(k, `holder-${k}`)))).every(Boolean), 30_000);
    // Each primary's keyspace notifications, over its TLS connection.
    const after = await Promise.all(primaries.map((port, i) => keyOn(port, `tls-after-${i}`)));
    for (const key of after) await cluster.set(key, `holder-${key}`, "PX", 60_000);
    await until("the new locks, on all three primaries", async () => (await Promise.all(after.map((k) => heldAs(k, `holder-${k}`)))).every(Boolean));

    // The health and the lock page name the primaries by the addresses the console reaches them at.
    const health = await import("@/app/api/health/route");
    const node = ((await call(health.GET, "GET", "/api/health")).body as { nodes: Array<{ up: boolean; cluster?: { shards: Array<{ primary: string }> } }> }).nodes[0];
    expect(node?.up).toBe(true);
    expect(node?.cluster?.shards.map((s) => s.primary).sort()).toEqual(primaries.map((p) => `127.0.0.1:${tlsPortOf(p)}`).sort());
    const shard = await set.shardOf(keySlot(after[1]!));
    expect((await detail(after[1]!)).replication).toMatchObject({ slot: keySlot(after[1]!), primary: `127.0.0.1:${tlsPortOf(shard.primary)}` });

    const release = await import("@/app/api/locks/[resource]/release/route");
    const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(after[2]!)}/release`, { token: OPERATOR_TOKEN, body: { reason: "tls cluster release" }, params: { resource: after[2]! } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await cluster.exists(after[2]!)).toBe(0);
    await until("shown force-released", async () => (await detail(after[2]!)).state === "force-released");

    // Nothing the console did was refused by the ACL, on any node.
    for (const n of set.nodes) expect(JSON.stringify(await set.direct(n.port).call("ACL", "LOG"))).toEqual("[]");
  });

  it("reads the topology with CLUSTER SLOTS where CLUSTER SHARDS is refused (servers before Redis 7.0), and watches every primary with it", async () => {
    const { NodeWatcher } = await import("@/server/live/watcher");
    const { LockStore } = await import("@/server/live/store");
    const { getLiveEvents } = await import("@/server/live");
    const { endpointsOf } = await import("@/server/deployments");
    const { ClusterTopology } = await import("@/server/deployments/cluster");
    const { nodeClientOptions } = await import("@/server/nodes");
    const pino = (await import("pino")).default;
    const deployment: Deployment = {
      name: "older",
      kind: "cluster",
      seeds: [`rediss://127.0.0.1:${set.nodes[0]!.tlsPort}`],
      tls: { caFile: certs.caFile, certFile: certs.clientCert, keyFile: certs.clientKey, servername: SERVER_NAME },
      auth: { username: "lockscope-no-shards", passwordFile },
    };
    const [endpoint] = endpointsOf(deployment);
    const client = endpoint!.connect(nodeClientOptions(500)) as InstanceType<typeof Redis.Cluster>;
    const refusals: string[] = [];
    const topology = new ClusterTopology(client, (reason) => refusals.push(reason));
    const store = new LockStore(["node-0"], 1, getLiveEvents());
    store.deployment = "older";
    const watcher = new NodeWatcher(
      { id: "node-0", index: 0, url: "", maskedUrl: endpoint!.label, deployment: "older", connect: endpoint!.connect, client, cluster: { topology, connectTo: endpoint!.connectTo! } },
      { store, patterns: () => ["lock:*"], isLockKey: (k) => k.startsWith("lock:"), events: getLiveEvents(), log: pino({ level: "silent" }), timeoutMs: 500, deadlineMs: 500 },
    );
    try {
      expect(await topology.known(10_000)).toBe(true);
      expect(topology.slotsOnly).toBe(true);
      expect(refusals[0]).toMatch(/NOPERM/);
      // The same primaries, slots and replicas as CLUSTER SHARDS gives, on their TLS ports.
      const { primaryAddresses } = await import("@/lib/locks/cluster");
      const primaries = [...new Set(await Promise.all([0, 8000, 15000].map(async (slot) => (await set.shardOf(slot)).primary)))];
      expect(primaryAddresses(topology.shards)).toEqual(primaries.map((p) => `127.0.0.1:${tlsPortOf(p)}`).sort());
      for (const slot of [0, 8000, 15000]) {
        const shard = await set.shardOf(slot);
        const read = topology.shards.find((s) => s.primary?.port === tlsPortOf(shard.primary))!;
        expect(read.replicas.map((r) => r.port)).toEqual(shard.replicas.map(tlsPortOf));
        expect(read.slots.some(([from, to]) => slot >= from && slot <= to)).toBe(true);
      }
      await until("the watcher up", () => watcher.up, 15_000);
      const keys = await Promise.all(primaries.map((port, i) => keyOn(port, `older-${i}`)));
      for (const key of keys) await cluster.set(key, `holder-${key}`, "PX", 30_000);
      // (The live view's batched reads are not running here: a reconcile reads every primary.)
      await watcher.reconcile();
      expect(keys.map((k) => store.get(k, Date.now())?.state)).toEqual(["held", "held", "held"]);
    } finally {
      await watcher.stop();
      topology.stop();
      client.disconnect();
    }
    // Refused: CLUSTER SHARDS by that user, and nothing else.
    const log = (await Promise.all(set.nodes.map((n) => set.direct(n.port).call("ACL", "LOG")))).flat() as unknown[][];
    expect(new Set(log.map((entry) => `${String(entry[entry.indexOf("username") + 1])} ${String(entry[entry.indexOf("object") + 1])}`))).toEqual(new Set(["lockscope-no-shards cluster|shards"]));
  });

  it("follows a failover over TLS: the lock held across it, released on the promoted replica, and no command is refused", async () => {
    for (const n of set.nodes) await set.direct(n.port).call("ACL", "LOG", "RESET");
    const shard = await set.shardOf(8000);
    const key = await keyOn(shard.primary, "tls-failover");
    const primary = set.direct(shard.primary);
    await primary.set(key, "holder-tls-failover", "PX", 120_000);
    expect(await primary.wait(1, 5_000)).toBe(1);
    await until("the lock listed", () => heldAs(key, "holder-tls-failover"));
    // The console reads the replicas too (their replication, the lock page): it has connections to them in
    // read-only mode, which the cluster client switches back to read-write once one is promoted.
    await until("the lock page shows the replica with the lock", async () => (await detail(key)).replication?.replicas[0]?.hasLock === true);
    await set.nodes.find((n) => n.port === shard.primary)!.kill();
    await until("the replica serves the slots", async () => (await set.shardOf(8000)).primary === shard.replicas[0], 30_000);
    await until("held across the failover", async () => (await detail(key)).timeline.some((t) => t.type === "failover"), 30_000);
    await until("the lock held on the promoted replica", () => heldAs(key, "holder-tls-failover"), 30_000);
    const release = await import("@/app/api/locks/[resource]/release/route");
    const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(key)}/release`, { token: OPERATOR_TOKEN, body: { reason: "after the failover", token: "holder-tls-failover" }, params: { resource: key } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await set.direct(shard.replicas[0]!).exists(key)).toBe(0);
    // Nothing the console did was refused by the ACL, on any node still running.
    for (const n of set.nodes) if (n.port !== shard.primary) expect(JSON.stringify(await set.direct(n.port).call("ACL", "LOG"))).toEqual("[]");
  });
});
