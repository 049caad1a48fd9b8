import { freePort } from "@/lib/redis-node";

/**
 * `start` on a free port, and again on another when it failed because the port was taken (`taken` says so of its
 * error), up to five times. A free port is one the system handed out a moment before: another process can take it
 * before the server binds it (the test files run in parallel, and any outgoing connection may be given it).
 * `avoid`: ports never used (a service's standard port, which may be the machine's own).
 */
export async function onFreePort<T>(start: (port: number) => T | Promise<T>, taken: (error: unknown) => boolean, avoid: readonly number[] = []): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    let port = await freePort();
    while (avoid.includes(port)) port = await freePort();
    try {
      return await start(port);
    } catch (error) {
      if (!taken(error) || attempt === 5) throw error;
    }
  }
}
