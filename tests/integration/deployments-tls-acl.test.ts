import { writeFileSync } from "node:fs";
import path from "node:path";
import type Redis from "ioredis";
import type { Logger } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Deployment } from "@/lib/deployment-config";
import { freePort } from "@/lib/redis-node";
import { call, OPERATOR_TOKEN, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";
import { makeCertificates, type TestCertificates } from "../support/tls";
import { README_CONSOLE_ACL } from "../support/acl";
import { until } from "../support/wait";

/**
 * The same without CONFIG and CLIENT: where the README says the notifications are probed instead; and without the fair-lock queues' channel, as
 * a user set up before the console watched it (the rest is watched as before).
 */
const NO_CONFIG_ACL = README_CONSOLE_ACL.replace(" +config|get +config|set +client|setname", "").replace(" &__keyspace@0__:redisson_lock_timeout:*", "");
const PASSWORD = "console-password-0123456789";
const SERVER_NAME = "redis.lockscope.test";

describe("a TLS node with a client certificate, watched by a least-privilege ACL user", () => {
  let cluster: TestCluster;
  let certs: TestCertificates;
  let tlsPort: number;
  let admin: Redis;
  let passwordFile: string;

  beforeAll(async () => {
    certs = makeCertificates(SERVER_NAME);
    tlsPort = await freePort();
    passwordFile = path.join(certs.dir, "password");
    writeFileSync(passwordFile, `${PASSWORD}\n`, { mode: 0o600 });
    cluster = await setUpConsole({
      nodes: 1,
      // The plain port stays for the test's own admin connection (default user); the console uses only TLS.
      extraArgs: [
        "--tls-port", String(tlsPort), "--tls-cert-file", certs.serverCert, "--tls-key-file", certs.serverKey, "--tls-ca-cert-file", certs.caFile, "--tls-auth-clients", "yes",
        "--user", "lockscope", ...`>${PASSWORD} ${README_CONSOLE_ACL}`.split(" "),
        "--user", "lockscope-no-config", ...`>${PASSWORD} ${NO_CONFIG_ACL}`.split(" "),
      ],
      env: {
        REDIS_URL: `rediss://127.0.0.1:${tlsPort}`,
        REDIS_TLS_CA_FILE: certs.caFile,
        REDIS_TLS_CERT_FILE: certs.clientCert,
        REDIS_TLS_KEY_FILE: certs.clientKey,
        REDIS_TLS_SERVERNAME: SERVER_NAME,
        REDIS_USERNAME: "lockscope",
        REDIS_PASSWORD_FILE: passwordFile,
      },
    });
    delete process.env.REDIS_URLS;
    admin = cluster.client(0);
    await admin.call("ACL", "LOG", "RESET");
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  /**
   * A watcher of the TLS node alone, with a store of its own (deployment `name`), as the ACL user `user`: one the
   * node started with, or, given `rules`, one made here with the README's rules and those (deleted after, with the
   * ACL LOG reset). `isLockKey`: by default the patterns in force.
   */
  const watcherAs = async (
    user: string,
    name: string,
    patterns: () => readonly string[],
    options: { rules?: string[]; isLockKey?: (key: string) => boolean; log?: Logger } = {},
  ) => {
    const { NodeWatcher } = await import("@/server/live/watcher");
    const { LockStore } = await import("@/server/live/store");
    const { getLiveEvents } = await import("@/server/live");
    const { endpointsOf } = await import("@/server/deployments");
    const { lockKeyMatcher } = await import("@/lib/locks/glob");
    const pino = (await import("pino")).default;
    if (options.rules) await admin.call("ACL", "SETUSER", user, ...`>${PASSWORD} ${README_CONSOLE_ACL}`.split(" "), ...options.rules);
    const deployment: Deployment = {
      name,
      kind: "standalone",
      url: `rediss://127.0.0.1:${tlsPort}`,
      tls: { caFile: certs.caFile, certFile: certs.clientCert, keyFile: certs.clientKey, servername: SERVER_NAME },
      auth: { username: user, passwordFile },
    };
    const [endpoint] = endpointsOf(deployment);
    const store = new LockStore(["node-0"], 1, getLiveEvents());
    store.deployment = name;
    const watcher = new NodeWatcher(
      { id: "node-0", index: 0, url: endpoint!.url ?? "", maskedUrl: endpoint!.label, deployment: name, connect: endpoint!.connect, client: admin },
      { store, patterns, isLockKey: options.isLockKey ?? ((key) => lockKeyMatcher(patterns())(key)), events: getLiveEvents(), log: options.log ?? pino({ level: "silent" }), timeoutMs: 500, deadlineMs: 500 },
    );
    const stop = async () => {
      await watcher.stop();
      if (!options.rules) return;
      await admin.call("ACL", "DELUSER", user);
      await admin.call("ACL", "LOG", "RESET");
    };
    return { watcher, store, stop };
  };

  it("shows, force-releases and audits locks on the standalone deployment, and no command is refused", async () => {
    const locks = await import("@/app/api/locks/route");
    const ready = await import("@/app/api/ready/route");
    const health = await import("@/app/api/health/route");
    const release = await import("@/app/api/locks/[resource]/release/route");
    const session = await import("@/app/api/session/route");
    await admin.set("lock:invoice/7", "holder-token-1", "PX", 30_000);
    await until("ready", async () => (await call(ready.GET, "GET", "/api/ready")).status === 200);
    const listed = await until("the lock listed", async () => {
      const body = (await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Array<{ resource: string; deployment: string; state: string }> };
      return body.locks.find((l) => l.resource === "lock:invoice/7");
    });
    expect(listed).toMatchObject({ deployment: "default", state: "held" });
    const healthBody = (await call(health.GET, "GET", "/api/health")).body as { nodes: Array<{ url: string; notifications: string }> };
    expect(healthBody.nodes).toMatchObject([{ url: `rediss://127.0.0.1:${tlsPort}`, notifications: "enabled-by-console" }]);
    expect(JSON.stringify(healthBody)).not.toContain(PASSWORD);

    const released = await call(release.POST, "POST", "/api/locks/lock%3Ainvoice%2F7/release", { body: { reason: "stuck holder", token: "holder-token-1" }, params: { resource: "lock:invoice/7" } });
    expect(released.status, JSON.stringify(released.body)).toBe(200);
    expect(await admin.get("lock:invoice/7")).toBeNull();
    // A plain token is not this engine's: its release compares and deletes, and leaves fences alone.
    expect(await admin.get("fence:lock:invoice/7")).toBeNull();
    expect((await admin.xrange("lockscope:audit", "-", "+")).length).toBe(2);

    const signIn = await call(session.POST, "POST", "/api/session", { token: null, body: { token: OPERATOR_TOKEN, name: "alice" } });
    expect(signIn.status).toBe(200);
    const cookie = signIn.headers.get("set-cookie")?.split(";")[0] ?? "";
    expect((await call(session.DELETE, "DELETE", "/api/session", { token: null, headers: { cookie } })).status).toBeLessThan(300);
    await until("the session's revocation on the node", async () => (await admin.keys("lockscope:revoked-session:*")).length === 1);

    // What a console does besides (as instrumentation starts it in production): the registry of consoles over
    // the same nodes, and the shared count of wrong tokens.
    (await import("@/server/cluster/registry")).startConsoleRegistry();
    await until("the console registered on the node", async () => Object.keys(await admin.hgetall("lockscope:consoles")).length === 1);
    expect((await call(session.POST, "POST", "/api/session", { token: null, body: { token: "a-wrong-token-0123456789abcdef", name: "mallory" } })).status).toBe(401);
    await until("the wrong token counted on the node", async () => (await admin.keys("lockscope:wrong-token:*")).length > 0);

    // The watcher is live on notifications: a new lock shows up (and nothing the console sent was refused).
    await admin.set("locks:batch", "holder-token-2", "PX", 30_000);
    await until("the new lock listed", async () => JSON.stringify((await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body).includes("locks:batch"));
    // Each refusal as "reason object" (a command, key or channel), so a missing permission names itself.
    const refused = ((await admin.call("ACL", "LOG")) as string[][]).map((entry) => `${entry[entry.indexOf("reason") + 1]} ${entry[entry.indexOf("object") + 1]}`);
    expect(refused).toEqual([]);
  });

  it("refuses a lab run its workers could not connect for (TLS files, a password file), saying why", async () => {
    const runs = await import("@/app/api/demo/runs/route");
    const res = await call(runs.POST, "POST", "/api/demo/runs", { body: { strategy: "none", stock: 10, workers: 2, ttlMs: 1000, workMs: 1 } });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: { code: "unprocessable", message: "The lab runs only on Redlock or standalone deployments reached by plain URLs (no Sentinel, TLS files or password files)." } });
  });

  it("refuses a lock pattern the console's user may not watch, naming the ACL rules it needs, and the live view stays up", async () => {
    const patterns = await import("@/app/api/patterns/route");
    const ready = await import("@/app/api/ready/route");
    const locks = await import("@/app/api/locks/route");
    (await import("@/server/patterns")).setPatternsAuditor({ recordIntent: () => Promise.resolve(), recordOutcome: () => Promise.resolve() });
    const before = (await call(patterns.GET, "GET", "/api/patterns", { token: VIEWER_TOKEN })).body as { patterns: Array<{ glob: string }> };
    const wanted = { patterns: [...before.patterns, { glob: "orders:*" }], reason: "watch the order locks" };
    const refused = await call(patterns.PUT, "PUT", "/api/patterns", { body: wanted });
    expect(refused.status).toBe(422);
    const error = (refused.body as { error: { code: string; message: string; details: unknown } }).error;
    expect(error.message).toBe(
      `The console's Redis user may not watch \`orders:*\` (rediss://127.0.0.1:${tlsPort} refuses it; the user needs \`&__keyspace@0__:orders:*\` and \`~orders:*\`): add those rules to the user's ACL on every lock node, then make this change again. Nothing changed.`,
    );
    expect(error.details).toEqual({ refused: [{ glob: "orders:*", nodes: [`rediss://127.0.0.1:${tlsPort}`], rules: ["&__keyspace@0__:orders:*", "~orders:*"] }] });
    expect((await call(patterns.GET, "GET", "/api/patterns", { token: VIEWER_TOKEN })).body).toMatchObject({ patterns: before.patterns });
    expect((await call(ready.GET, "GET", "/api/ready")).status).toBe(200);

    // Only the channel missing: only that rule is named.
    await admin.call("ACL", "SETUSER", "lockscope", "~orders:*");
    const channelOnly = await call(patterns.PUT, "PUT", "/api/patterns", { body: wanted });
    expect(channelOnly.status).toBe(422);
    expect((channelOnly.body as { error: { details: unknown } }).error.details).toEqual({ refused: [{ glob: "orders:*", nodes: [`rediss://127.0.0.1:${tlsPort}`], rules: ["&__keyspace@0__:orders:*"] }] });

    // With the rules in place the same change applies, and its locks are watched.
    await admin.call("ACL", "SETUSER", "lockscope", "&__keyspace@0__:orders:*");
    const applied = await call(patterns.PUT, "PUT", "/api/patterns", { body: wanted });
    expect(applied.status, JSON.stringify(applied.body)).toBe(200);
    await admin.set("orders:1", "holder-token-9", "PX", 30_000);
    await until("the order lock listed", async () => {
      const body = (await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Array<{ resource: string; state: string }> };
      return body.locks.some((l) => l.resource === "orders:1" && l.state === "held");
    });
    expect((await call(ready.GET, "GET", "/api/ready")).status).toBe(200);

    // The rule taken away again (the node drops the subscription): the watcher comes back up without that
    // pattern, and the node's health says which pattern and what it needs.
    const health = await import("@/app/api/health/route");
    const metrics = await import("@/app/metrics/route");
    const refusedSeries = async () => String((await call(metrics.GET, "GET", "/metrics", { token: null })).body).match(/^lockscope_node_refused_patterns\{node="node-0"\} (\d+)$/m)?.[1];
    expect(await refusedSeries()).toBe("0");
    const channels = README_CONSOLE_ACL.split(" ").filter((rule) => rule.startsWith("&"));
    await admin.call("ACL", "SETUSER", "lockscope", "resetchannels", ...channels);
    const node = await until("the refusal in the node's health", async () => {
      const body = (await call(health.GET, "GET", "/api/health")).body as { status: string; nodes: Array<{ refusedPatterns?: unknown; watcher?: { up: boolean } }> };
      return body.nodes[0]?.refusedPatterns && body.nodes[0].watcher?.up ? body : undefined;
    });
    expect(node.status).toBe("degraded");
    expect(node.nodes[0]?.refusedPatterns).toEqual([{ glob: "orders:*", rule: "&__keyspace@0__:orders:*" }]);
    // What pages the on-call (LockscopeLockPatternsRefused): the node is up, yet the console is blind to a pattern there.
    expect(await refusedSeries()).toBe("1");
    expect((await call(ready.GET, "GET", "/api/ready")).status).toBe(200);
    await admin.set("lock:invoice/8", "holder-token-10", "PX", 30_000);
    await until("a lock under another pattern still listed", async () => {
      const body = (await call(locks.GET, "GET", "/api/locks", { token: VIEWER_TOKEN })).body as { locks: Array<{ resource: string }> };
      return body.locks.some((l) => l.resource === "lock:invoice/8");
    });
    await admin.call("ACL", "LOG", "RESET");
  });

  it("without CONFIG and CLIENT (nor the fair-lock queues' channel), finds the notifications on by its probe over TLS and still sees the locks", async () => {
    const { watcher, store, stop } = await watcherAs("lockscope-no-config", "restricted", () => ["lock:*"], { isLockKey: (k) => k.startsWith("lock:") });
    try {
      await until("the watcher up", () => watcher.up);
      // (Switched on by the console's own user, which may CONFIG SET: this one cannot read them, and probes.)
      expect(watcher.notifications).toBe("on");
      await admin.set("lock:restricted/1", "holder-token-3", "PX", 30_000);
      await until("the lock's notification heard", () => watcher.dirty.has("lock:restricted/1"));
      await watcher.reconcile();
      expect(store.get("lock:restricted/1", Date.now())?.deployment).toBe("restricted");
    } finally {
      await stop();
    }
  });

  it("watches the patterns a node allows when it refuses others, says which and what they need, and takes them up once allowed", async () => {
    // The README's user, with the channel of `jobs:*` but not its keys, and nothing of `orders:*`.
    const patterns = ["lock:*", "orders:*", "jobs:*"];
    const { watcher, store, stop } = await watcherAs("lockscope-narrow", "narrow", () => patterns, { rules: ["&__keyspace@0__:jobs:*"] });
    try {
      await admin.set("lock:narrow/1", "holder-a", "PX", 30_000);
      await admin.set("orders:narrow/1", "holder-b", "PX", 30_000);
      await admin.set("jobs:narrow/1", "holder-c", "PX", 30_000);
      await until("the watcher up", () => watcher.up);
      expect(watcher.status().refusedPatterns).toEqual([
        { glob: "orders:*", rule: "&__keyspace@0__:orders:*" },
        { glob: "orders:*", rule: "~orders:*" },
        { glob: "jobs:*", rule: "~jobs:*" },
      ]);
      const now = () => Date.now();
      expect(store.get("lock:narrow/1", now())?.state).toBe("held");
      expect(store.get("orders:narrow/1", now())).toBeNull();
      expect(store.get("jobs:narrow/1", now())).toBeNull();
      // A change under the pattern it may watch is still heard.
      await admin.set("lock:narrow/2", "holder-d", "PX", 30_000);
      await until("the new lock's notification heard", () => watcher.dirty.has("lock:narrow/2"));

      await admin.call("ACL", "SETUSER", "lockscope-narrow", "~orders:*", "~jobs:*", "&__keyspace@0__:orders:*");
      await watcher.refreshFacts(true);
      expect(watcher.status().refusedPatterns).toBeUndefined();
      expect(store.get("orders:narrow/1", now())?.state).toBe("held");
      expect(store.get("jobs:narrow/1", now())?.state).toBe("held");
      await admin.set("orders:narrow/2", "holder-e", "PX", 30_000);
      await until("the order lock's notification heard", () => watcher.dirty.has("orders:narrow/2"));
    } finally {
      await stop();
    }
  });

  it("a pattern change made while the refused patterns are asked again is the one that stands", async () => {
    // The README's user, with nothing of `orders:*`, and the channels of the patterns the change brings and drops.
    const extra = ["a", "b", "c", "d", "e", "fresh"].flatMap((p) => [`~${p}:*`, `&__keyspace@0__:${p}:*`]);
    let patterns = ["lock:*", "orders:*", "a:*", "b:*", "c:*", "d:*", "e:*"];
    const { watcher, store, stop } = await watcherAs("lockscope-race", "race", () => patterns, { rules: extra });
    try {
      await until("the watcher up", () => watcher.up);
      expect(watcher.status().refusedPatterns?.map((r) => r.glob)).toEqual(["orders:*", "orders:*"]);
      await admin.set("fresh:race/1", "holder-a", "PX", 30_000);
      // The refused patterns asked again (as every 30 s) and, before that has settled, an operator's change that
      // drops `orders:*` and five others and brings `fresh:*`.
      const retry = watcher.resubscribe({ retryRefused: true });
      patterns = ["lock:*", "fresh:*"];
      const change = watcher.resubscribe();
      await Promise.all([retry, change]);
      expect(watcher.status().refusedPatterns).toBeUndefined();
      await until("the new pattern's lock read", () => store.get("fresh:race/1", Date.now())?.state === "held");
      await admin.set("fresh:race/2", "holder-b", "PX", 30_000);
      await until("the new pattern's notification heard", () => watcher.dirty.has("fresh:race/2"));
    } finally {
      await stop();
    }
  });

  it("a node that does not answer while its refused patterns are asked again still has them refused", async () => {
    // The README's user, with the channel of `orders:*` but not its keys.
    const patterns = ["lock:*", "orders:*"];
    const { watcher, stop } = await watcherAs("lockscope-slow", "slow", () => patterns, { rules: ["&__keyspace@0__:orders:*"] });
    const refused = [{ glob: "orders:*", rule: "~orders:*" }];
    try {
      await until("the watcher up", () => watcher.up);
      expect(watcher.status().refusedPatterns).toEqual(refused);
      // The node holds every command for longer than the watcher waits for a read (5 s) as the refused patterns
      // are asked again: both sample reads time out.
      await admin.call("CLIENT", "PAUSE", "11000", "ALL");
      await watcher.resubscribe({ retryRefused: true }).catch(() => undefined);
      expect(watcher.status().refusedPatterns).toEqual(refused);
      await until("the node answering again", async () => (await admin.ping()) === "PONG" && watcher.answering);
      await admin.set("lock:slow/1", "holder-a", "PX", 30_000);
      await until("a lock under the allowed pattern heard", () => watcher.dirty.has("lock:slow/1"));
      expect(watcher.status().refusedPatterns).toEqual(refused);
    } finally {
      await stop();
    }
  });

  it("a node that refuses a pattern reads the other locks of a batch that names one of its keys", async () => {
    // The README's user, with nothing of `orders:*` (which another node of the deployment may allow).
    const patterns = ["lock:*", "orders:*"];
    const { watcher, stop } = await watcherAs("lockscope-batch", "batch", () => patterns, { rules: [] });
    try {
      await admin.set("lock:batch/1", "holder-a", "PX", 30_000);
      await admin.set("orders:batch/1", "holder-b", "PX", 30_000);
      await until("the watcher up", () => watcher.up);
      expect(watcher.status().refusedPatterns?.map((r) => r.glob)).toEqual(["orders:*", "orders:*"]);
      // The keys changed on any node of a deployment are read on every node in one batch (and a lock whose TTL
      // ran out is probed everywhere): here, one the node refuses among them.
      const readings = await watcher.readDirty(["lock:batch/1", "orders:batch/1"]);
      expect(readings[0]).toMatchObject({ key: "lock:batch/1" });
      expect(readings[1]).toBeUndefined();
    } finally {
      await stop();
    }
  });

  it("a pattern change made while a node reconnects is watched there once it is back", async () => {
    const { lockKeyMatcher } = await import("@/lib/locks/glob");
    let patterns = ["lock:*"];
    // Armed: the next time the watcher takes the patterns (subscribing as it comes back), an operator's change
    // lands right after, and every node is asked to re-subscribe (as the runtime does).
    let armed = false;
    const asked: { resubscribe?: () => Promise<void> } = {};
    const current = () => {
      const taken = patterns;
      if (armed) {
        armed = false;
        patterns = ["lock:*", "fresh:*"];
        queueMicrotask(() => void asked.resubscribe?.());
      }
      return taken;
    };
    // (Whether a key is a lock follows the patterns without taking them, which would fire the change.)
    const { watcher, stop } = await watcherAs("lockscope-back", "back", current, { rules: ["~fresh:*", "&__keyspace@0__:fresh:*"], isLockKey: (key) => lockKeyMatcher(patterns)(key) });
    asked.resubscribe = () => watcher.resubscribe();
    try {
      await until("the watcher up", () => watcher.up);
      const reconnects = watcher.status().reconnects;
      armed = true;
      // The node drops the watcher's connections (a restart, a network blip); they come back.
      await admin.call("CLIENT", "KILL", "USER", "lockscope-back");
      await until("the watcher back", () => watcher.up && watcher.status().reconnects > reconnects);
      expect(armed).toBe(false);
      await admin.set("fresh:back/1", "holder-a", "PX", 30_000);
      await until("the new pattern's notification heard", () => watcher.dirty.has("fresh:back/1"));
    } finally {
      await stop();
    }
  });

  it("a pattern whose keys a node stops allowing is found refused at the first read it refuses, and left out there", async () => {
    const patterns = ["lock:*", "orders:*"];
    const { watcher, stop } = await watcherAs("lockscope-revoked", "revoked", () => patterns, { rules: ["~orders:*", "&__keyspace@0__:orders:*"] });
    try {
      await admin.set("lock:revoked/1", "holder-a", "PX", 30_000);
      await until("the watcher up", () => watcher.up);
      expect(watcher.status().refusedPatterns).toBeUndefined();
      // The keys' rule taken away (the channel's stays: the node keeps the subscription, and says nothing).
      await admin.call("ACL", "SETUSER", "lockscope-revoked", "resetkeys", ...README_CONSOLE_ACL.split(" ").filter((rule) => rule.startsWith("~")));
      await expect(watcher.readDirty(["lock:revoked/1", "orders:revoked/1"])).rejects.toThrow(/NOPERM/);
      await until("the pattern found refused", () => watcher.status().refusedPatterns?.some((r) => r.glob === "orders:*" && r.rule === "~orders:*"));
      const readings = await watcher.readDirty(["lock:revoked/1", "orders:revoked/1"]);
      expect(readings[0]).toMatchObject({ key: "lock:revoked/1" });
      expect(readings[1]).toBeUndefined();
    } finally {
      await stop();
    }
  });

  it("says once, not every second, that a node refusing its reads keeps the watcher from coming up, and comes up once allowed", async () => {
    const pino = (await import("pino")).default;
    const lines: Array<{ msg: string; err?: string }> = [];
    const log = pino({ level: "warn" }, { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string; err?: string }) });
    // The README's user without SCAN: every bring-up fails at its reconcile, and is tried again a second later.
    const { watcher, stop } = await watcherAs("lockscope-noscan", "noscan", () => ["lock:*"], { rules: ["-scan"], log });
    const failures = () => lines.filter((l) => l.msg === "lock watcher could not come up; retrying");
    try {
      await until("the first failure said", () => failures().length > 0);
      // Three more tries, the same way.
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      expect(failures()).toHaveLength(1);
      expect(failures()[0]?.err).toMatch(/NOPERM/);
      expect(watcher.up).toBe(false);
      await admin.call("ACL", "SETUSER", "lockscope-noscan", "+scan");
      await until("the watcher up", () => watcher.up);
    } finally {
      await stop();
    }
  });

  it("refuses the server's certificate without the SNI name it was issued for", async () => {
    const { endpointsOf } = await import("@/server/deployments");
    const [endpoint] = endpointsOf({
      name: "no-sni",
      kind: "standalone",
      url: `rediss://127.0.0.1:${tlsPort}`,
      tls: { caFile: certs.caFile, certFile: certs.clientCert, keyFile: certs.clientKey, servername: null },
      auth: { username: "lockscope", passwordFile },
    });
    const errors: string[] = [];
    const client = endpoint!.connect({ lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false });
    client.on("error", (error: Error) => errors.push(error.message));
    try {
      await client.connect().catch(() => undefined);
      const refusal = await until("the certificate refused", () => errors.find((m) => /altnames/.test(m)));
      expect(refusal).toContain("IP: 127.0.0.1 is not in the cert's list");
    } finally {
      client.disconnect();
    }
  });
});
