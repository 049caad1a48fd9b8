import { createHash } from "node:crypto";
import { realpathSync, rmSync } from "node:fs";
import net from "node:net";
import path from "node:path";

/**
 * One console per data folder: its embedded nodes, secrets and audit file belong to one process. The lock
 * is a listening Unix socket, which the kernel takes away the moment the process ends, however it ends
 * (a SIGKILL, a crash), so a dead console never leaves a lock behind:
 * - on Linux, first in the abstract namespace, named after the folder's real path: nothing on disk, and
 *   binding is atomic, so of two launchers starting together exactly one gets it;
 * - then (on Linux too) a socket file in the folder; one nobody answers on is left over from a dead console
 *   and is replaced. The abstract namespace belongs to a network namespace: two containers (or pods) that
 *   mount the same folder each have their own, and only the file in the folder, which both see, tells the
 *   second that the first is there.
 * A launcher that finds the lock held connects, reads a line naming the holder, and touches nothing. (Two
 * machines that mount one folder over the network cannot reach each other's socket: nothing here stops them.)
 */

export type DataDirLock = { held: true; release(): void } | { held: false; holder: string };

const abstractAddress = (real: string) => `\0lockscope-data-${createHash("sha256").update(real).digest("hex")}`;
const fileAddress = (real: string) => path.join(real, "console.sock");

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

/** Listens on `address`, or says who does; a socket file nobody answers on is replaced. */
async function take(address: string, holder: string): Promise<{ held: true; server: net.Server } | { held: false; holder: string }> {
  for (let attempt = 0; attempt < 3; attempt++) {
    const outcome = await listen(address, holder);
    if (outcome instanceof net.Server) return { held: true, server: outcome };
    if (outcome.code !== "EADDRINUSE") throw outcome;
    const other = await askHolder(address);
    if (other !== null) return { held: false, holder: other };
    // A socket file nobody listens on: its console died; take its place.
    rmSync(address, { force: true });
  }
  return { held: false, holder: "another process (the lock could not be taken)" };
}

/**
 * Takes the data folder's lock for this process, or says who holds it. `holder` is the line a second
 * launcher prints (this process's pid and address).
 */
export async function lockDataDir(dir: string, holder: string): Promise<DataDirLock> {
  const real = realpathSync(dir);
  const servers: net.Server[] = [];
  const release = () => servers.forEach((server) => server.close());
  if (process.platform === "linux") {
    const outcome = await take(abstractAddress(real), holder);
    if (!outcome.held) return outcome;
    servers.push(outcome.server);
  }
  let file: Awaited<ReturnType<typeof take>>;
  try {
    file = await take(fileAddress(real), holder);
  } catch (error) {
    // A folder that cannot hold a socket (a path too long for one, a file system without them): on Linux the
    // abstract socket still keeps out a second console of this machine's network namespace.
    if (servers.length > 0) return { held: true, release };
    throw error;
  }
  if (!file.held) {
    release();
    return file;
  }
  servers.push(file.server);
  return { held: true, release };
}
