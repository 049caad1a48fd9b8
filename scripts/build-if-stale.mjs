// Plain JavaScript on purpose: `npm start` runs it before anything is compiled (no tsx, no build yet).
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";

/** Folders and files the production bundle and the compiled launcher are made from. */
const SOURCE_DIRS = ["app", "components", "lib", "server", "public", "scripts"];
const SOURCE_FILES = ["next.config.js", "package.json", "package-lock.json", "instrumentation.ts", "proxy.ts", "tsconfig.json"];
/** What `npm run build` leaves: the Next.js bundle and the launcher compiled to plain JavaScript. */
const OUTPUTS = [path.join(".next", "BUILD_ID"), path.join("dist", "start.mjs")];

/** @param {string} dir @returns {number} */
function newestMtime(dir) {
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

/**
 * True when every output of `npm run build` exists and is newer than every source it is made from.
 * @param {string} root
 */
export function buildIsFresh(root) {
  const outputs = OUTPUTS.map((f) => path.join(root, f));
  if (!outputs.every((f) => existsSync(f))) return false;
  const sources = SOURCE_DIRS.map((d) => newestMtime(path.join(root, d)));
  for (const f of SOURCE_FILES) {
    const p = path.join(root, f);
    if (existsSync(p)) sources.push(statSync(p).mtimeMs);
  }
  const newestSource = Math.max(...sources);
  return outputs.every((f) => statSync(f).mtimeMs >= newestSource);
}

/**
 * Runs `npm run build` when an output is missing or older than the sources: the first `npm start` of a
 * fresh checkout, and the integration tests. Builds are serialised with `flock` where it exists (tests and
 * a console starting at once must not write `.next/` together). Returns false when the build failed.
 * Production never comes here: it starts `dist/start.mjs` (or the standalone folder) directly.
 * @param {string} root
 */
export function ensureBuild(root) {
  if (buildIsFresh(root)) return true;
  process.stdout.write(existsSync(path.join(root, ".next", "BUILD_ID")) ? "lockscope: sources changed since the last build; building…\n" : "lockscope: no production build yet; building…\n");
  const npmCli = process.env.npm_execpath;
  const npm = npmCli && npmCli.endsWith(".js") ? [process.execPath, npmCli] : ["npm"];
  const haveFlock = spawnSync("flock", ["--version"], { stdio: "ignore" }).status === 0;
  const command = [...(haveFlock ? ["flock", path.join(root, ".next-build.lock")] : []), ...npm, "run", "build"];
  const [bin, ...args] = command;
  const result = spawnSync(/** @type {string} */ (bin), args, { cwd: root, stdio: "inherit", env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1" } });
  // Another build may have finished while this one waited for the lock; what counts is a fresh result.
  return result.status === 0 && buildIsFresh(root);
}
