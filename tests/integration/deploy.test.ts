import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import yaml from "js-yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientAddress, trustedProxyList } from "@/lib/client-address";
import { CONFIG_DEFAULTS } from "@/lib/config";
import { freePort } from "@/lib/redis-node";
import { PROD_NODE_ARGS } from "../support/production";
import { startCluster, type TestCluster } from "../support/redis";
import { until } from "../support/wait";

const ROOT = path.resolve(import.meta.dirname, "../..");
const OPERATOR_TOKEN = "deploy-operator-token-0123456789";
const METRICS_TOKEN = "deploy-metrics-token-0123456789ab";

interface Started {
  baseUrl: string;
  output: () => string;
  exited: Promise<number | string>;
  stop: () => Promise<number | string>;
}

/**
 * What a container gets: the standalone folder as its working directory, `node start.mjs`, and only the
 * variables its image and the operator set (no PATH to a dev toolchain, no npm, no HOME of a developer).
 */
function startStandalone(folder: string, env: Record<string, string>, port: number): Started {
  const child = spawn(process.execPath, [...PROD_NODE_ARGS, "start.mjs"], {
    cwd: folder,
    env: { PATH: "/usr/bin:/bin", NODE_ENV: "production", HOST: "127.0.0.1", PORT: String(port), LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr.on("data", (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | string>((resolve) => child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")));
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    output: () => out,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}

async function serving(started: Started): Promise<void> {
  let ended = false;
  void started.exited.then(() => (ended = true));
  await until(
    `the standalone console serves /api/health\n${started.output().slice(-1500)}`,
    async () => {
      if (ended) throw new Error(`the standalone console exited:\n${started.output().slice(-2000)}`);
      return fetch(`${started.baseUrl}/api/health`).then((r) => r.ok, () => false);
    },
    60_000,
    200,
  );
}

describe("the standalone folder, started as a container starts it", () => {
  let cluster: TestCluster;
  let folder = "";
  const scratch = mkdtempSync(path.join(os.tmpdir(), "lockscope-standalone-"));

  beforeAll(async () => {
    cluster = await startCluster(3);
    // A copy outside the checkout: module resolution cannot fall back on the checkout's node_modules.
    folder = path.join(scratch, "app");
    cpSync(path.join(ROOT, ".next", "standalone"), folder, { recursive: true });
  });
  afterAll(async () => {
    await cluster.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it("carries no dev dependency and no build tool", () => {
    for (const name of ["tsx", "typescript", "esbuild", "vitest", "eslint", "@playwright/test"]) {
      expect(existsSync(path.join(folder, "node_modules", name)), name).toBe(false);
    }
    expect(existsSync(path.join(folder, "start.mjs"))).toBe(true);
    expect(existsSync(path.join(folder, ".next", "static"))).toBe(true);
  });

  it("answers health and a lock read on real nodes, and a METRICS_TOKEN from .env protects /metrics", async () => {
    writeFileSync(path.join(folder, ".env"), `METRICS_TOKEN=${METRICS_TOKEN}\n`);
    await cluster.client(0).set("lock:deploy/1", "holder-a", "PX", 60_000);
    await cluster.client(1).set("lock:deploy/1", "holder-a", "PX", 60_000);
    const port = await freePort();
    const started = startStandalone(folder, { REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN, LOCKSCOPE_DATA_DIR: path.join(scratch, "data") }, port);
    try {
      await serving(started);
      const health = (await (await fetch(`${started.baseUrl}/api/health`)).json()) as { nodes: unknown[] };
      expect(health.nodes).toHaveLength(3);
      const locks = await until("the lock is listed", async () => {
        const body = (await (await fetch(`${started.baseUrl}/api/locks`)).json()) as { locks: Array<{ resource: string }> };
        return body.locks.some((l) => l.resource === "lock:deploy/1") ? body.locks : null;
      });
      expect(locks.map((l) => l.resource)).toContain("lock:deploy/1");
      // A page and its static assets come from the folder itself.
      const page = await fetch(`${started.baseUrl}/login`);
      expect(page.status).toBe(200);
      const asset = /\/_next\/static\/[^"]+\.js/.exec(await page.text())?.[0];
      expect(asset).toBeTruthy();
      expect((await fetch(`${started.baseUrl}${asset}`)).status).toBe(200);

      expect((await fetch(`${started.baseUrl}/metrics`)).status).toBe(401);
      const scraped = await fetch(`${started.baseUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      expect(scraped.status).toBe(200);
      expect(await scraped.text()).toContain("lockscope_nodes 3");
      expect(started.output()).not.toContain(METRICS_TOKEN);
    } finally {
      expect(await started.stop()).toBe(0);
      rmSync(path.join(folder, ".env"), { force: true });
    }
  }, 120_000);

  it("never builds: without a build it stops with one line saying what to run", async () => {
    const unbuilt = path.join(scratch, "unbuilt");
    cpSync(folder, unbuilt, { recursive: true });
    rmSync(path.join(unbuilt, ".next", "BUILD_ID"));
    const started = startStandalone(unbuilt, { REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_DATA_DIR: path.join(scratch, "data-unbuilt") }, await freePort());
    expect(await started.exited).toBe(1);
    expect(started.output()).toMatch(/there is no production build in .*: run `npm run build` first/);
    expect(existsSync(path.join(unbuilt, ".next", "BUILD_ID"))).toBe(false);
  });
});

interface ComposeService {
  image?: string;
  build?: unknown;
  environment?: Record<string, string>;
  volumes?: string[];
  healthcheck?: { test: string[] };
  command?: string[];
  ports?: string[];
  stop_grace_period?: string;
}

describe("the container recipe", () => {
  const compose = yaml.load(readFileSync(path.join(ROOT, "compose.yaml"), "utf8")) as { services: Record<string, ComposeService> };
  const services = compose.services;

  it("keeps the .env files that hold a machine's secrets, and the data folder, out of the repository and the image", () => {
    // The console reads .env, .env.local, .env.production and .env.production.local (the README puts its tokens in
    // .env); .env.production is Next.js's place for committed defaults. `git check-ignore` exits 0 for an ignored path.
    for (const file of [".env", ".env.local", ".env.production.local", ".env.development.local", ".lockscope/operator-token"]) {
      expect(spawnSync("git", ["check-ignore", "-q", file], { cwd: ROOT }).status, file).toBe(0);
    }
    const dockerignore = readFileSync(path.join(ROOT, ".dockerignore"), "utf8").split("\n");
    for (const pattern of [".env", ".env.*", ".lockscope"]) expect(dockerignore, pattern).toContain(pattern);
  });

  it("compose.yaml: three Redis nodes, two consoles on all three with one session secret, PostgreSQL, Prometheus with the shipped rules", () => {
    const redis = Object.entries(services).filter(([, s]) => s.image?.startsWith("redis:"));
    expect(redis).toHaveLength(3);
    const consoles = Object.entries(services).filter(([, s]) => s.build !== undefined);
    expect(consoles).toHaveLength(2);
    const urls = redis.map(([name]) => `redis://${name}:6379`).join(",");
    for (const [, service] of consoles) {
      expect(service.environment?.REDIS_URLS).toBe(urls);
      expect(service.environment?.LOCKSCOPE_SESSION_SECRET).toMatch(/^\$\{LOCKSCOPE_SESSION_SECRET:\?/);
    }
    expect(Object.values(services).some((s) => s.image?.startsWith("postgres:"))).toBe(true);
    const prometheus = Object.values(services).find((s) => s.image?.startsWith("prom/prometheus"));
    expect(prometheus?.volumes).toContain("./ops/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro");
    for (const volume of prometheus?.volumes ?? []) {
      const source = volume.split(":")[0]!;
      if (source.startsWith("./")) expect(existsSync(path.join(ROOT, source)), source).toBe(true);
    }
  });

  it("compose.yaml: a client of the published ports cannot choose the address its wrong tokens are counted and audited under", () => {
    // Nothing proxies for the consoles there: a browser's connection through a published port comes from the
    // compose network's gateway (Docker's port mapping), Prometheus's from its own address on that network, and
    // each can write any X-Forwarded-For it likes.
    const consoles = Object.entries(services).filter(([, s]) => s.build !== undefined);
    for (const [name, service] of consoles) {
      const value = service.environment?.TRUSTED_PROXIES;
      const trusted = value ? trustedProxyList(value.split(",").map((p) => p.trim())) : null;
      for (const peer of ["172.17.0.1", "172.18.0.1", "192.168.16.1", "10.0.0.7"]) {
        expect(clientAddress(peer, "203.0.113.9", trusted), `${name}: a request from ${peer} forging X-Forwarded-For`).toBe(peer);
      }
    }
  });

  it("compose.yaml waits for a console's shutdown delay and its shutdown before killing it", () => {
    const consoles = Object.entries(services).filter(([, s]) => s.build !== undefined);
    for (const [name, service] of consoles) {
      // Docker waits 10 s unless told otherwise: less than the default delay plus the shutdown's own 10 s.
      const grace = /^(\d+)s$/.exec(service.stop_grace_period ?? "")?.[1];
      expect(grace, `${name}: stop_grace_period`).toBeDefined();
      expect(Number(grace) * 1000, name).toBeGreaterThanOrEqual(CONFIG_DEFAULTS.shutdownDelayMs + 10_000);
    }
  });

  it("compose.yaml publishes the consoles and Prometheus on this machine's loopback only, nothing else", () => {
    // Reading is open without LOCKSCOPE_VIEWER_TOKEN and Prometheus has no sign-in: a port published on every
    // address of the host would serve the locks, the audit log and the metrics to the whole network.
    const published = Object.fromEntries(Object.entries(services).flatMap(([name, s]) => (s.ports ?? []).map((p) => [p, name])));
    expect(published).toEqual({ "127.0.0.1:3000:3000": "console-1", "127.0.0.1:3001:3000": "console-2", "127.0.0.1:9090:9090": "prometheus" });
  });

  it("the compose Prometheus config scrapes both consoles and passes promtool with the shipped rules", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-compose-prom-"));
    try {
      const config = readFileSync(path.join(ROOT, "ops", "compose", "prometheus.yml"), "utf8");
      expect(config).toContain('targets: ["console-1:3000", "console-2:3000"]');
      writeFileSync(path.join(dir, "metrics_token"), "token\n");
      writeFileSync(path.join(dir, "prometheus.yml"), config.replace("/run/secrets/metrics_token", path.join(dir, "metrics_token")));
      cpSync(path.join(ROOT, "ops", "prometheus", "alerts.yml"), path.join(dir, "alerts.yml"));
      const result = spawnSync("promtool", ["check", "config", "prometheus.yml"], { cwd: dir, encoding: "utf8" });
      expect(result.error, "promtool is needed: apt-get install prometheus").toBeUndefined();
      expect(`${result.stdout}${result.stderr}`).toContain("SUCCESS");
      expect(result.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("Dockerfile: standalone style, multi-stage, non-root, health check, nothing fetched or built at start", () => {
    const lines = readFileSync(path.join(ROOT, "Dockerfile"), "utf8").split("\n").filter((l) => l.trim() !== "" && !l.trim().startsWith("#"));
    const stages = lines.filter((l) => /^FROM /.test(l));
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const last = lines.slice(lines.lastIndexOf(stages.at(-1)!));
    expect(last.join("\n")).toContain("COPY --from=build --chown=root:root /app/.next/standalone ./");
    const user = last.find((l) => /^USER /.test(l));
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^USER (root|0)\b/);
    expect(last.find((l) => /^HEALTHCHECK /.test(l)) ?? "").toBe("HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \\");
    expect(last.join("\n")).toContain("/api/health");
    expect(PROD_NODE_ARGS).toContain("--v8-pool-size=2");
    expect(last.find((l) => /^CMD /.test(l))).toBe(`CMD [${["node", ...PROD_NODE_ARGS, "start.mjs"].map((a) => JSON.stringify(a)).join(", ")}]`);
    // The final stage installs and builds nothing.
    expect(last.filter((l) => /\b(npm|npx|apt-get|next build|curl|wget)\b/.test(l))).toEqual([]);
  });
});
