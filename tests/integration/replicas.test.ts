import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startLauncher, type LauncherProcess } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

const OPERATOR_TOKEN = "it-replicas-operator-token-0123456";
const SESSION_SECRET = "AyyzuYm9Eq22LGcwDzFD4fHgj29SKJMQcpuWYVxIXVE=";

interface Answer {
  status: number;
  body: unknown;
  headers: Headers;
}

async function request(console_: LauncherProcess, method: string, pathAndQuery: string, options: { body?: unknown; headers?: Record<string, string>; bearer?: boolean } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.bearer !== false) headers.authorization = `Bearer ${OPERATOR_TOKEN}`;
  if (method !== "GET") headers.origin = console_.baseUrl;
  if (options.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${console_.baseUrl}${pathAndQuery}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as unknown) : null, headers: res.headers };
}

/** A run that lasts until it is cancelled (a large stock sold slowly by two workers). */
const LONG_RUN = { strategy: "redlock", stock: 100_000, workers: 2, ttlMs: 1000, workMs: 20 };

/** Consoles behind one load balancer: the same nodes, the same session secret, the proxy trusted. */
describe("replicas act as one console", () => {
  let cluster: TestCluster;
  let a: LauncherProcess;
  let b: LauncherProcess;

  beforeAll(async () => {
    cluster = await startCluster(3);
    const env = { REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN, LOCKSCOPE_SESSION_SECRET: SESSION_SECRET, TRUSTED_PROXIES: "127.0.0.1" };
    a = await startLauncher(env);
    b = await startLauncher(env);
  }, 300_000);

  afterAll(async () => {
    await Promise.all([a?.stop("SIGTERM"), b?.stop("SIGTERM")]);
    await cluster?.close();
  });

  it("runs one lab run at a time across both: the second console gets 409 naming the first, and can start once it ended", async () => {
    const started = await request(a, "POST", "/api/demo/runs", { body: LONG_RUN });
    expect(started.status).toBe(202);
    const { id } = started.body as { id: string };

    const refused = await request(b, "POST", "/api/demo/runs", { body: LONG_RUN });
    expect(refused.status).toBe(409);
    const error = (refused.body as { error: { code: string; message: string; details: { runningId: string; console: string } } }).error;
    expect(error.code).toBe("conflict");
    expect(error.details.runningId).toBe(id);
    expect(error.details.console).toMatch(new RegExp(`:${a.port}$`));
    expect(error.message).toContain(`on console ${error.details.console}`);

    expect((await request(a, "DELETE", `/api/demo/runs/${id}`)).status).toBe(200);
    // The lease went with the run: B takes the next one.
    const next = await until("B starts a run once A's has ended", async () => {
      const res = await request(b, "POST", "/api/demo/runs", { body: LONG_RUN });
      return res.status === 202 ? res : null;
    });
    const nextId = (next.body as { id: string }).id;
    expect((await request(b, "DELETE", `/api/demo/runs/${nextId}`)).status).toBe(200);
  }, 120_000);

  it("accepts a session signed in on one console on the other", async () => {
    const signedIn = await request(a, "POST", "/api/session", { bearer: false, body: { token: OPERATOR_TOKEN, name: "dana" } });
    expect(signedIn.status).toBe(200);
    const cookie = (signedIn.headers.get("set-cookie") ?? "").split(";")[0]!;
    const onB = await request(b, "GET", "/api/session", { bearer: false, headers: { cookie } });
    expect(onB.status).toBe(200);
    expect(onB.body).toMatchObject({ role: "operator", actor: "dana", via: "session" });
  });

  it("counts wrong tokens across consoles, per client address behind the trusted proxy, and still takes the right token", async () => {
    const from = (address: string) => ({ "x-forwarded-for": address });
    const guess = (console_: LauncherProcess, address: string, i: number) =>
      request(console_, "POST", "/api/session", { bearer: false, headers: from(address), body: { token: `wrong-replica-token-${i}` } });
    // Spread over both replicas, as a load balancer would.
    for (let i = 0; i < 5; i++) expect((await guess(i % 2 === 0 ? a : b, "198.51.100.7", i)).status).toBe(401);
    const limited = await guess(b, "198.51.100.7", 5);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await guess(a, "198.51.100.7", 6)).status).toBe(429);
    // Another client behind the same proxy is another address.
    expect((await guess(a, "198.51.100.8", 0)).status).toBe(401);
    const right = await request(b, "POST", "/api/session", { bearer: false, headers: from("198.51.100.7"), body: { token: OPERATOR_TOKEN } });
    expect(right.status).toBe(200);
  });

  it("records the forwarded client address in the audit log, and a force release on one console is seen on the other", async () => {
    const resource = "lock:replicas/release";
    await Promise.all(cluster.clients().map((c) => c.set(resource, "stuck-holder-1", "PX", 600_000)));
    await until("B lists the lock", async () => (await request(b, "GET", `/api/locks/${encodeURIComponent(resource)}`)).status === 200);
    const released = await request(a, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
      headers: { "x-forwarded-for": "203.0.113.44", "x-lockscope-actor": "erin" },
      body: { reason: "stuck after deploy", token: "stuck-holder-1" },
    });
    expect(released.status).toBe(200);
    const { auditId } = released.body as { auditId: string };
    await until("B shows it force-released", async () => {
      const res = await request(b, "GET", `/api/locks/${encodeURIComponent(resource)}`);
      return res.status === 404 || (res.body as { state?: string }).state === "force-released";
    });
    const audit = await until("B lists the audit entry", async () => {
      const res = await request(b, "GET", `/api/audit?resource=${encodeURIComponent(resource)}`);
      const entries = (res.body as { entries?: Array<{ id: string; ip: string; actor: string }> }).entries ?? [];
      return entries.find((e) => e.id === auditId) ?? null;
    });
    expect(audit).toMatchObject({ actor: "erin", ip: "203.0.113.44" });
  });

  it("shares the lock patterns: a change on one console applies on the other, and on one started later", async () => {
    const resource = "billing:replicas/invoice-7";
    const path_ = `/api/locks/${encodeURIComponent(resource)}`;
    await Promise.all(cluster.clients().map((c) => c.set(resource, "billing-holder-1", "PX", 600_000)));
    expect((await request(b, "GET", path_)).status).toBe(404);

    const read = (await request(a, "GET", "/api/patterns")).body as { patterns: Array<{ glob: string }>; revision: string };
    const next = [...read.patterns, { glob: "billing:*" }];
    const changed = await request(a, "PUT", "/api/patterns", { body: { patterns: next, reason: "watch the billing locks", revision: read.revision } });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ patterns: next, source: "console", shared: { recorded: ["node-0", "node-1", "node-2"], missed: [] } });
    const { revision } = changed.body as { revision: string };

    // B reads the nodes every 2 s: it applies the change and its live view lists the lock.
    await until("B lists the billing lock", async () => (await request(b, "GET", path_)).status === 200, 15_000);
    expect((await request(b, "GET", "/api/patterns")).body).toMatchObject({ patterns: next, source: "console", revision });
    // A change on B made on the list as it was before A's: refused, nothing changed.
    const stale = await request(b, "PUT", "/api/patterns", { body: { patterns: read.patterns, reason: "undo the billing locks", revision: read.revision } });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ error: { code: "conflict", details: { revision } } });
    expect((await request(a, "GET", "/api/patterns")).body).toMatchObject({ patterns: next, revision });

    // A console started later over the same nodes starts with them.
    const c = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN, LOCKSCOPE_SESSION_SECRET: SESSION_SECRET });
    try {
      expect((await request(c, "GET", "/api/patterns")).body).toMatchObject({ patterns: next, source: "console", revision });
      await until("C lists the billing lock", async () => (await request(c, "GET", path_)).status === 200, 15_000);
    } finally {
      await c.stop("SIGTERM");
      await Promise.all(cluster.clients().map((client) => client.del(resource)));
    }
  }, 120_000);

  it("gives a foreign lock the same age on every console, also on one started later", async () => {
    const resource = "lock:replicas/foreign";
    // A plain SET NX value (another library's lock): nothing in it says when it was taken.
    await Promise.all(cluster.clients().map((c) => c.set(resource, "foreign-holder-7f3a", "PX", 600_000)));
    const acquiredAt = async (console_: LauncherProcess) => {
      const res = await request(console_, "GET", `/api/locks/${encodeURIComponent(resource)}`);
      return res.status === 200 ? ((res.body as { acquiredAt?: number }).acquiredAt ?? null) : null;
    };
    // Each console shows its own first sighting until node 0's shared record comes back, and that record is the
    // sighting of whichever console wrote first, A or B: what both settle on is the record.
    const { firstSeenKey } = await import("@/server/live/first-seen");
    const node0 = cluster.client(0);
    const record = async () => Number(await node0.get(firstSeenKey(resource, "foreign-holder-7f3a")));
    let seen: Array<number | null> = [];
    const onA = await until("A and B agree on the shared first sighting", async () => {
      seen = await Promise.all([acquiredAt(a), acquiredAt(b)]);
      return seen[0] !== null && seen[0] === seen[1] && seen[0] === (await record()) ? seen[0] : null;
    }).catch((error: Error) => {
      throw new Error(`${error.message}: A and B say ${JSON.stringify(seen)}`);
    });
    const c = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN, LOCKSCOPE_SESSION_SECRET: SESSION_SECRET });
    try {
      // C first saw it seconds after A: it adopts A's first sighting.
      let seenOnC: number | null = null;
      await until("C agrees with A", async () => (seenOnC = await acquiredAt(c)) === onA).catch((error: Error) => {
        throw new Error(`${error.message}: A says ${onA}, C says ${seenOnC}`);
      });
      expect(seenOnC).toBe(onA);
    } finally {
      await c.stop("SIGTERM");
      await Promise.all(cluster.clients().map((client) => client.del(resource)));
    }
  }, 120_000);

  it("a console whose session key differs says so at start, and the others name it", async () => {
    // No LOCKSCOPE_SESSION_SECRET: its key is generated into its own data folder.
    const c = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN });
    try {
      // Both warnings (each other console's key differs; its own key was generated), logged one after the
      // other: the second may reach this process's pipe a moment after the first.
      await until("C warns about the other consoles' key and its own", () => c.output().includes("signs sessions with a different key") && c.output().includes("session key was generated"), 30_000);
      expect(c.output()).toMatch(/session key was generated into its data folder and [12] other console\(s\)/);
      expect(c.output()).toContain("LOCKSCOPE_SESSION_SECRET");
      await until("A names C", () => new RegExp(`console \\S+:${c.port} signs sessions with a different key`).test(a.output()), 30_000);
      expect(a.output()).not.toContain(SESSION_SECRET);
    } finally {
      await c.stop("SIGTERM");
    }
  }, 120_000);

  it("a console that shares the session key but takes another operator token says so, and the others name it", async () => {
    const otherToken = "it-replicas-other-operator-token-9876";
    const c = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: otherToken, LOCKSCOPE_SESSION_SECRET: SESSION_SECRET });
    try {
      // A's operator signed in on A is signed out on C: the session names the token it was made from.
      const signedIn = await request(a, "POST", "/api/session", { bearer: false, body: { token: OPERATOR_TOKEN, name: "dana" } });
      const cookie = (signedIn.headers.get("set-cookie") ?? "").split(";")[0]!;
      const onC = await request(c, "GET", "/api/session", { bearer: false, headers: { cookie } });
      expect((onC.body as { role?: string } | null)?.role).not.toBe("operator");
      await until("C names a console that takes another operator token", () => /console \S+ takes a different operator token/.test(c.output()), 30_000);
      expect(c.output()).toContain("LOCKSCOPE_OPERATOR_TOKEN");
      await until("A names C", () => new RegExp(`console \\S+:${c.port} takes a different operator token`).test(a.output()), 30_000);
      for (const out of [a.output(), c.output()]) {
        expect(out).not.toContain(otherToken);
        expect(out).not.toContain(OPERATOR_TOKEN);
      }
    } finally {
      await c.stop("SIGTERM");
    }
  }, 120_000);
});
