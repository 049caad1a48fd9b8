import { mkdirSync, statSync } from "node:fs";
import path from "node:path";

/**
 * Creates `dir` and its missing parents, one level at a time. Node's own `mkdir(…, {recursive: true})` never
 * returns where the parent exists but refuses new entries with ENOENT (`/proc/anything`): it retries the parent
 * forever. Here every refusal throws at once (with the folder it concerns), and a parent that is a file is
 * ENOTDIR, not a misleading EEXIST.
 */
export function makeDirs(dir: string, mode?: number): void {
  const missing: string[] = [];
  for (let at = path.resolve(dir); ; ) {
    let isFolder: boolean;
    try {
      isFolder = statSync(at).isDirectory();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      missing.push(at);
      const up = path.dirname(at);
      if (up === at) break;
      at = up;
      continue;
    }
    if (!isFolder) throw Object.assign(new Error(`ENOTDIR: not a directory, ${at}`), { code: "ENOTDIR", path: at });
    break;
  }
  for (const folder of missing.reverse()) {
    try {
      mkdirSync(folder, mode === undefined ? undefined : { mode });
    } catch (error) {
      // Made meanwhile by another process: fine, as long as it is a folder (checked by the next level's mkdir).
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
}
