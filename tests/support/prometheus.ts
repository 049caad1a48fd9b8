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
