/**
 * What a failover lost. Replication is asynchronous: a lock written to a primary that dies before its
 * replica copied it is gone once the replica is promoted, and another client can take it while the first
 * still believes it holds it. Pure: the console's last view and the new primary's reading go in, the
 * locks lost come out.
 */

/** A lock as the console last saw it on the old primary. */
export interface SeenLock {
  resource: string;
  token: string;
  /** Epoch ms (server clock) when its lease ends; null without a TTL. */
  expiresAt: number | null;
}

/** `+switch-master <name> <old ip> <old port> <new ip> <new port>`, as a sentinel publishes it. */
export interface SwitchMaster {
  master: string;
  from: { host: string; port: number };
  to: { host: string; port: number };
}

export function parseSwitchMaster(message: string): SwitchMaster | null {
  const parts = message.trim().split(/\s+/);
  if (parts.length !== 5) return null;
  const [master, fromHost, fromPort, toHost, toPort] = parts as [string, string, string, string, string];
  const from = Number(fromPort);
  const to = Number(toPort);
  if (!Number.isInteger(from) || !Number.isInteger(to)) return null;
  return { master, from: { host: fromHost, port: from }, to: { host: toHost, port: to } };
}

/**
 * The locks lost in a failover: held when the console last looked (`seen`, which leaves out whatever it
 * saw released or expire), still within their lease when the new primary was read at `readAt`, and not
 * held there with the same token. A lock whose lease ran out meanwhile is not counted: it may have expired
 * as well as been lost, and nobody relies on it any more either way.
 */
export function lostInFailover(seen: readonly SeenLock[], onNewPrimary: ReadonlyMap<string, string | null>, readAt: number): SeenLock[] {
  return seen.filter((lock) => (lock.expiresAt === null || lock.expiresAt > readAt) && onNewPrimary.get(lock.resource) !== lock.token);
}

/**
 * The force releases a failover undid: locks the console saw force-released (`forced`, each with the value it
 * released, and not taken again since) whose promoted replica holds that very value. The replica had not copied the
 * delete when the primary failed, and serves the lock again, to the holder it was released from.
 */
export function releasesUndone(forced: readonly SeenLock[], onNewPrimary: ReadonlyMap<string, string | null>): SeenLock[] {
  return forced.filter((lock) => onNewPrimary.get(lock.resource) === lock.token);
}
