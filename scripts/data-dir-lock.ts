import { createHash } from "node:crypto";
import { realpathSync, rmSync } from "node:fs";
import net from "node:net";
import path from "node:path";

/**
 * One console per data folder: its embedded nodes, secrets and audit file belong to one process. The lock
 * is a listening Unix socket, which the kernel takes away the moment the process ends, however it ends
 * (a SIGKILL, a crash), so a dead console never leaves a lock behind:
 * - on Linux, in the abstract namespace, named after the folder's real path: nothing on disk, and binding
 *   is atomic, so of two launchers starting together exactly one gets it;
 * - elsewhere, a socket file in the folder; one nobody answers on is left over from a dead console and is
 *   replaced.
 * A launcher that finds the lock held connects, reads a line naming the holder, and touches nothing.
 */

export type DataDirLock = { held: true; release(): void } | { held: false; holder: string };

function socketAddress(dir: string): string {
  const real = realpathSync(dir);
  if (process.platform === "linux") return `\0lockscope-data-${createHash("sha256").update(real).digest("hex")}`;
  return path.join(real, "console.sock");
}

function listen(address: string, holder: string): Promise<net.Server | NodeJS.ErrnoException> {
  return new Promise((resolve) => {
    const server = net.createServer((socket) => {
      socket.on("error", () => {});
      socket.end(`${holder}\n`);
    });
    server.once("error", (error: NodeJS.ErrnoException) => resolve(error));
    server.listen(address, () => {
      // The lock must not keep a process alive that has nothing else to do.
      server.unref();
      resolve(server);
    });
  });
}

/** Asks the holder who it is; null when nobody answers (a socket file left by a dead console). */
function askHolder(address: string): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = net.connect(address);
    let text = "";
    const done = (answer: string | null) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(2000, () => done(text.trim() || "a process that does not answer"));
    socket.on("data", (chunk) => (text += chunk.toString("utf8")));
    socket.once("end", () => done(text.trim() || "another process"));
    socket.once("error", (error: NodeJS.ErrnoException) => done(error.code === "ECONNREFUSED" || error.code === "ENOENT" ? null : `unknown (${error.code})`));
  });
}

/**
 * Takes the data folder's lock for this process, or says who holds it. `holder` is the line a second
 * launcher prints (this process's pid and address).
 */
export async function lockDataDir(dir: string, holder: string): Promise<DataDirLock> {
  const address = socketAddress(dir);
  for (let attempt = 0; attempt < 3; attempt++) {
    const outcome = await listen(address, holder);
    if (outcome instanceof net.Server) {
      return { held: true, release: () => outcome.close() };
    }
    if (outcome.code !== "EADDRINUSE") throw outcome;
    const other = await askHolder(address);
    if (other !== null) return { held: false, holder: other };
    // A socket file nobody listens on (only outside Linux): its console died; take its place.
    rmSync(address, { force: true });
  }
  return { held: false, holder: "another process (the lock could not be taken)" };
}
