import { spawnSync } from "node:child_process";
import path from "node:path";

export const ROOT = path.resolve(import.meta.dirname, "../..");
export const PROMETHEUS_DIR = path.join(ROOT, "ops", "prometheus");

function missing(tool: string): Error {
  return new Error(`${tool} is not installed: install the Debian package \`prometheus\` (apt-get install prometheus), or run .ci/run.`);
}

/** Runs the real promtool in ops/prometheus; a missing promtool fails the test with how to install it (never a skip). */
export function promtool(args: string[], input?: string): { status: number | null; output: string } {
  const result = spawnSync("promtool", args, { cwd: PROMETHEUS_DIR, input, encoding: "utf8", timeout: 60_000 });
  if (result.error && (result.error as NodeJS.ErrnoException).code === "ENOENT") throw missing("promtool");
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

/** The prometheus server binary, or a failure saying how to install it. */
export function prometheusBinary(): string {
  const result = spawnSync("prometheus", ["--version"], { encoding: "utf8" });
  if (result.error || result.status !== 0) throw missing("prometheus");
  return "prometheus";
}

export interface PrometheusServer {
  url: string;
  log: () => string;
  /** `GET /api/v1/<path>`'s `data`, failing on an error answer. */
  api<T>(pathAndQuery: string): Promise<T>;
  /** The value of an instant query with one result, or null when it has none. */
  scalar(query: string): Promise<string | null>;
  stop(): Promise<void>;
}

/**
 * A real Prometheus scraping `targets` (host:port of consoles) with ops/prometheus/alerts.yml loaded,
 * scraping and evaluating every second, in its own temporary folder, ready when this resolves.
 */
export async function startPrometheus(targets: readonly string[], metricsToken: string): Promise<PrometheusServer> {
  const binary = prometheusBinary();
  const { mkdtempSync, writeFileSync, copyFileSync, rmSync } = await import("node:fs");
  const os = await import("node:os");
  const { spawn } = await import("node:child_process");
  const { onFreePort } = await import("./free-port");
  const { until } = await import("./wait");
  const tmp = mkdtempSync(path.join(os.tmpdir(), "lockscope-prometheus-"));
  writeFileSync(path.join(tmp, "token"), `${metricsToken}\n`, { mode: 0o600 });
  writeFileSync(
    path.join(tmp, "prometheus.yml"),
    [
      "global: { scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 1s }",
      "rule_files: [alerts.yml]",
      "scrape_configs:",
      "  - job_name: lockscope",
      "    authorization: { type: Bearer, credentials_file: token }",
      `    static_configs: [{ targets: ${JSON.stringify(targets)} }]`,
      "",
    ].join("\n"),
  );
  copyFileSync(path.join(PROMETHEUS_DIR, "alerts.yml"), path.join(tmp, "alerts.yml"));
  const launch = async (port: number) => {
    const child = spawn(binary, [`--config.file=${path.join(tmp, "prometheus.yml")}`, `--storage.tsdb.path=${path.join(tmp, "data")}`, `--web.listen-address=127.0.0.1:${port}`, "--log.level=warn"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    const started = { url: `http://127.0.0.1:${port}`, child, log: "", exited: new Promise<void>((resolve) => child.once("exit", () => resolve())) };
    child.stdout.on("data", (c: Buffer) => (started.log += c.toString()));
    child.stderr.on("data", (c: Buffer) => (started.log += c.toString()));
    let ended = false;
    void started.exited.then(() => (ended = true));
    try {
      await until(
        "Prometheus ready",
        () => {
          if (ended) throw new Error("it exited");
          // A port that accepts and never answers is given up on, not waited on until the test's timeout.
          return fetch(`${started.url}/-/ready`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false);
        },
        60_000,
        200,
      );
    } catch (error) {
      child.kill("SIGKILL");
      throw new Error(`Prometheus did not start (${(error as Error).message}):\n${started.log}`);
    }
    return started;
  };
  // Its log says so when the port was taken.
  const prometheus = await onFreePort(launch, (error) => /address already in use/i.test(String(error)));
  const { url, child, exited } = prometheus;
  const log = () => prometheus.log;
  const api = async <T>(pathAndQuery: string): Promise<T> => {
    const body = (await (await fetch(`${url}/api/v1/${pathAndQuery}`)).json()) as { status: string; data: T; error?: string };
    if (body.status !== "success") throw new Error(`Prometheus refused ${pathAndQuery}: ${body.error ?? ""}`);
    return body.data;
  };
  return {
    url,
    log,
    api,
    scalar: async (query) => {
      const data = await api<{ result: Array<{ value: [number, string] }> }>(`query?query=${encodeURIComponent(query)}`);
      return data.result.length === 1 ? data.result[0]!.value[1] : null;
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/** A Prometheus text exposition as series (name and labels, as written) to value; comments and blank lines skipped. */
export function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const cut = line.lastIndexOf(" ");
    out.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return out;
}
