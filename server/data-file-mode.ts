import "server-only";
import { chmodSync, constants, statSync } from "node:fs";
import { singleton } from "./global";
import { getLogger } from "./logger";

/**
 * Makes one of the console's own files (the audit log, the operator token, the session key, the sign-outs, the
 * losses, the lock patterns) readable by its owner alone, as the console creates them. One that already exists
 * with looser permissions (left by an older version, or copied) is tightened to 0600 when the console opens it,
 * and the log says which file, once (never what it holds). An absent file is left to be created 0600.
 */
export function tightenDataFile(file: string, knownMode?: number): void {
  let full: number;
  try {
    // (`knownMode`: the caller's own fresh stat of the file, its type bits with it, so it is not read twice.)
    full = knownMode ?? statSync(file).mode;
  } catch {
    return;
  }
  // Only a regular file: something else at the path (a folder mounted there, a FIFO) is not the console's to
  // change; reading it fails, and the console says so.
  if ((full & constants.S_IFMT) !== constants.S_IFREG) return;
  const mode = full & 0o777;
  if ((mode & 0o077) === 0) return;
  const told = singleton("data-file-mode-told", () => new Set<string>());
  try {
    chmodSync(file, 0o600);
  } catch (error) {
    // Not the owner, or a read-only mount: say so once, and go on with the file as it is.
    if (told.has(file)) return;
    told.add(file);
    getLogger().warn({ file, mode: mode.toString(8), err: (error as NodeJS.ErrnoException).code ?? String(error) }, "a console data file others can read could not be tightened to 0600");
    return;
  }
  getLogger().warn({ file, was: mode.toString(8) }, "a console data file others could read was tightened to 0600");
}
