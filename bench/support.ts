/**
 * What the benchmarks share: medians over runs, quantiles over samples, a scratch directory for the
 * redis-server nodes they start (lib/redis-node kills the nodes it started when the process exits), and the
 * processes' `/proc` figures.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

/** The whole number given as `name` on the command line (`--held 1000`), `fallback` when absent; at least `least`. */
export function numberArg(argv: readonly string[], name: string, fallback: number, least: number): number {
  const at = argv.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(argv[at + 1]);
  if (!Number.isInteger(value) || value < least) throw new TypeError(`Expected \`${name}\` to be a whole number of at least ${least}, got \`${argv[at + 1]}\``);
  return value;
}

/** The median of `xs`; NaN when empty. */
export const median = (xs: number[]): number => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** The `q` quantile (0..1) of the first `count` samples, by index `floor(q × count)`; NaN when empty. */
export function quantile(samples: Float64Array | number[], count: number, q: number): number {
  if (count === 0) return NaN;
  const sorted = samples.slice(0, count).sort((a, b) => a - b);
  return sorted[Math.min(count - 1, Math.floor(q * count))]!;
}

/**
 * The median of every field over the runs, with the runs themselves. A run that completed no wait has no
 * wait quantiles (NaN): a field's median is over the runs that have it, and NaN when none has.
 */
export function summarize<T extends object>(runs: T[]): T & { runs: T[] } {
  const result = { runs } as Record<string, unknown>;
  for (const key of Object.keys(runs[0]!)) result[key] = median(runs.map((r) => (r as Record<string, number>)[key]!).filter((x) => !Number.isNaN(x)));
  return result as T & { runs: T[] };
}

/** `x` with `digits` decimals, or "n/a" when it is not a finite number (a quantile of no samples, a ratio to 0). */
export const fixed = (x: number, digits: number): string => (Number.isFinite(x) ? x.toFixed(digits) : "n/a");

/** A scratch directory for the benchmark's nodes, removed when the process exits (Ctrl-C included). */
export function scratchDir(): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-bench-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  // Ctrl-C, or `kill` of this process, would otherwise end it without running exit hooks (these, lib/redis-node's
  // and a benchmark's own, which stop what it started).
  process.once("SIGINT", () => process.exit(130));
  process.once("SIGTERM", () => process.exit(143));
  return dir;
}

/**
 * `/proc/<pid>/stat`: the command name, and the fields after it (the name may contain spaces): [1] is the
 * parent pid, [11] and [12] utime and stime, [13] and [14] the same of the children it has reaped.
 */
export function readStat(pid: number | string): { name: string; fields: string[] } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return { name: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")), fields: stat.slice(stat.lastIndexOf(")") + 2).split(" ") };
}

/** Every process running now, from one pass over `/proc` (one that exits meanwhile is left out). */
export function processes(): Array<{ pid: number; name: string; fields: string[] }> {
  const found: Array<{ pid: number; name: string; fields: string[] }> = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      found.push({ pid: Number(entry), ...readStat(entry) });
    } catch {
      // exited meanwhile
    }
  }
  return found;
}
