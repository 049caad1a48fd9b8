import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";

function newestMtime(dir: string): number {
  let newest = 0;
  if (!existsSync(dir)) return 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name.startsWith(".")) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(full));
    else newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

/** True when `.next/BUILD_ID` exists and is newer than every source the bundle is made from. */
export function buildIsFresh(root: string): boolean {
  const buildId = path.join(root, ".next", "BUILD_ID");
  if (!existsSync(buildId)) return false;
  const sources = ["app", "components", "lib", "server", "public"].map((d) => newestMtime(path.join(root, d)));
  for (const f of ["next.config.js", "package.json", "package-lock.json", "instrumentation.ts", "tsconfig.json"]) {
    const p = path.join(root, f);
    if (existsSync(p)) sources.push(statSync(p).mtimeMs);
  }
  return statSync(buildId).mtimeMs >= Math.max(...sources);
}

/**
 * Builds the production bundle when it is missing or older than the sources. Builds are serialised with
 * `flock` where it exists (tests and a console starting at once must not write `.next/` together).
 * Returns false when the build failed.
 */
export function ensureBuild(root: string): boolean {
  if (buildIsFresh(root)) return true;
  process.stdout.write(existsSync(path.join(root, ".next", "BUILD_ID")) ? "lockscope: sources changed since the last build; building…\n" : "lockscope: no production build yet; building…\n");
  const nextBin = path.join(root, "node_modules", "next", "dist", "bin", "next");
  const haveFlock = spawnSync("flock", ["--version"], { stdio: "ignore" }).status === 0;
  const [command, args] = haveFlock
    ? ["flock", [path.join(root, ".next-build.lock"), process.execPath, nextBin, "build"]]
    : [process.execPath, [nextBin, "build"]];
  const result = spawnSync(command, args, { cwd: root, stdio: "inherit", env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1" } });
  return result.status === 0;
}
