import "server-only";
import Redis, { type RedisOptions } from "ioredis";
import type { Logger } from "pino";
import type { Deployment } from "@/lib/deployment-config";
import { readInSlots } from "@/lib/locks/cluster";
import { lostInFailover, releasesUndone, type SeenLock } from "@/lib/locks/failover";
import { decodeReading, readLockKeysAsAllowed } from "@/lib/locks/formats";
import { isLive, type Lock } from "@/lib/locks/types";
import { declared, initialiseFor } from "../metrics";
import { addressOf, authOptions, ipAddressOf, tlsOptions } from "./connection";
import { subscribeToSwitches } from "./sentinel";
import type { LockClient } from "./types";

/** Keys read per command on the new primary. */
const READ_BATCH = 500;

/** Options of the one-off connection that reads the promoted primary. */
export const FAILOVER_READ_OPTIONS = (timeoutMs: number) =>
  ({
    connectionName: "lockscope:failover",
    disableClientInfo: true,
    lazyConnect: true,
    maxRetriesPerRequest: 1,
    commandTimeout: Math.max(1_000, timeoutMs * 4),
    retryStrategy: () => null,
  }) as const;

export interface FailoverTarget {
  /** The locks the console shows now (its last view of the old primary). */
  locks: (now: number) => Lock[];
  /**
   * Says on a lock's timeline that the failover lost it, and ends it as lost (not released) where the promoted
   * replica's reading ends it; `seenAt`: when the console's view was taken, at the failover's announcement.
   */
  noteLost: (lock: SeenLock, detail: string, seenAt: number) => void;
  /** Says on a lock's timeline that it was held across the failover (the promoted replica had it). */
  noteSurvived: (resource: string, detail: string) => void;
  /** The locks shown force-released now (ended so, not taken again since), each with the value released. */
  forceReleased: () => SeenLock[];
  /** Says on a lock's timeline that the failover undid its force release (the promoted replica holds the value released). */
  noteReleaseUndone: (resource: string, detail: string) => void;
}

/** A node's reader reached another server, already running, where it had read another (see the watcher's `onServerReplaced`). */
export interface ServerChange {
  /** `host:port` of the server read before, null when unknown. */
  from: string | null;
  /** The address the reader reached. */
  to: { host: string; port: number };
  runIdBefore: string | null;
  runIdAfter: string | null;
}

/** The console's view of the locks held now (before the watcher reconciles with a promoted primary), optionally of some keys only. */
export function seenLocks(target: FailoverTarget, now: number, include: (resource: string) => boolean = () => true): SeenLock[] {
  return target
    .locks(now)
    .filter((l) => isLive(l.state) && l.token !== null && include(l.resource))
    .map((l) => ({ resource: l.resource, token: l.token as string, expiresAt: l.expiresAt }));
}

/** The locks shown force-released now (see `FailoverTarget.forceReleased`), optionally of some keys only. */
export function forceReleasedLocks(target: FailoverTarget, include: (resource: string) => boolean = () => true): SeenLock[] {
  return target.forceReleased().filter((l) => include(l.resource));
}

/**
 * After a failover from `from` to `to`: reads the locks the console saw (`seen`) on the promoted primary
 * (`conn`, not yet connected; closed after), and reports every one it does not hold as lost in failover
 * (timeline, metric, one log line), and the others as held across it. `forced`: the locks the console saw
 * force-released, read there too: one the promoted replica holds with the value released is a release the failover
 * undid (timeline, metric, one log line). `batching`: `slot` for a cluster node,
 * which refuses keys of several hash slots in one script or transaction (one read per slot, as the watcher
 * reads a cluster); `any` for a Sentinel primary (one read per batch). Never rejects.
 */
export async function compareAfterFailover(
  ctx: { deployment: string; target: FailoverTarget; log: Logger; seenAt: number },
  seen: readonly SeenLock[],
  forced: readonly SeenLock[],
  from: string,
  to: string,
  conn: Redis,
  batching: "slot" | "any" = "slot",
): Promise<void> {
  declared<"deployment">("lockscope_failovers_total").inc({ deployment: ctx.deployment });
  conn.on("error", () => undefined);
  try {
    await conn.connect();
    const onNewPrimary = new Map<string, string | null>();
    const asked = [...seen, ...forced];
    for (let i = 0; i < asked.length; i += READ_BATCH) {
      const batch = asked.slice(i, i + READ_BATCH).map((lock) => lock.resource);
      // Read and decoded as the live view reads them, so that what is compared is what the store keeps as a
      // lock's token: the value of a string lock, the holders' fingerprint of a hash or sorted set (Redisson,
      // redis-semaphore). A key that is gone reads as null: not the lock the console saw.
      const readings = batching === "slot" ? await readInSlots(batch, (keys) => readLockKeysAsAllowed(conn, keys)) : await readLockKeysAsAllowed(conn, batch);
      const now = Date.now();
      for (const reading of readings) onNewPrimary.set(reading.key, decodeReading(reading, { now })?.fingerprint ?? null);
    }
    const lost = lostInFailover(seen, onNewPrimary, Date.now());
    for (const lock of seen) {
      if (onNewPrimary.get(lock.resource) === lock.token) ctx.target.noteSurvived(lock.resource, `held across the failover from ${from} to ${to}: the promoted replica has it`);
    }
    for (const lock of lost) {
      ctx.target.noteLost(lock, `held on ${from} with its lease running; the promoted replica ${to} does not have it (written after the replica's last copy)`, ctx.seenAt);
    }
    declared<"deployment">("lockscope_locks_lost_in_failover_total").inc({ deployment: ctx.deployment }, lost.length);
    const undone = releasesUndone(forced, onNewPrimary);
    for (const lock of undone) {
      ctx.target.noteReleaseUndone(
        lock.resource,
        `the force release was undone by the failover from ${from} to ${to}: the promoted replica had not copied it, and holds the lock again for the holder it was released from`,
      );
    }
    declared<"deployment">("lockscope_force_releases_undone_total").inc({ deployment: ctx.deployment }, undone.length);
    if (undone.length > 0) {
      ctx.log.warn({ deployment: ctx.deployment, from, to, resources: undone.slice(0, 20).map((l) => l.resource), undone: undone.length }, "failover undid force releases: the promoted replica had not copied them");
    }
    const fields = { deployment: ctx.deployment, from, to, held: seen.length, lost: lost.length };
    if (lost.length > 0) ctx.log.warn(fields, "failover lost locks: the promoted replica did not have them");
    else ctx.log.info(fields, "failover: the promoted replica holds every lock the console saw");
  } catch (error) {
    ctx.log.warn({ deployment: ctx.deployment, from, to, err: error instanceof Error ? error.message : String(error) }, "failover: could not read the new primary; lost locks unknown");
  } finally {
    conn.disconnect();
  }
}

/**
 * Follows a Sentinel deployment's failovers: subscribed to `+switch-master` on every sentinel, it takes the
 * console's view the moment one is announced (before the watcher has reconnected to the new primary and
 * reconciled), reads those locks on the new primary, and reports every lock the new primary does not hold
 * as lost in failover (timeline, metric, one log line). The watchers follow the new primary on their own (the
 * Sentinel driver moves their connections when a sentinel announces the switch: `SwitchWatch`). The sentinel
 * leading a failover names the promoted replica to clients from the moment it reconfigures the other replicas,
 * seconds before it announces the switch: a watcher that reconnects then reaches the new primary first, and says
 * so (`primaryReached`) before it reads it; the failover is compared then, once.
 */
export class SentinelFailoverMonitor {
  private readonly subscribers: Redis[];
  /**
   * The new primary last compared with (`host:port`): each failover is compared once, whichever way it was seen
   * first (every sentinel's announcement, the watcher reaching it). Only the last one: a failover back to a primary
   * compared with before (A→B, B→A, A→B) is another failover, compared again however soon it comes.
   */
  private lastComparedWith: string | null = null;
  /** The new primary as last named (`host:port`, a host name where the sentinels announce names). */
  private lastNamed: string | null = null;
  private stopped = false;

  constructor(
    private readonly deployment: Extract<Deployment, { kind: "sentinel" }>,
    private readonly target: FailoverTarget,
    private readonly log: Logger,
    private readonly timeoutMs: number,
  ) {
    initialiseFor("lockscope_failovers_total", { deployment: [deployment.name] });
    initialiseFor("lockscope_locks_lost_in_failover_total", { deployment: [deployment.name] });
    initialiseFor("lockscope_force_releases_undone_total", { deployment: [deployment.name] });
    this.subscribers = subscribeToSwitches(deployment, "lockscope:failover", (event) => this.compare(`${event.from.host}:${event.from.port}`, event.to));
  }

  /**
   * The watcher reached another primary than the one it read (`from`; null when unknown) before reading it: a
   * failover, announced or not yet. Compared now, unless its announcement was compared already.
   */
  primaryReached(change: ServerChange): void {
    this.compare(change.from ?? "the previous primary", change.to);
  }

  private compare(from: string, toServer: { host: string; port: number }): void {
    if (this.stopped) return;
    const named = `${toServer.host}:${toServer.port}`;
    // The same announcement again (every sentinel sends it): nothing new, not even a view to take.
    if (named === this.lastNamed) return;
    this.lastNamed = named;
    const now = Date.now();
    // Taken at once, before the watcher reconciles with the new primary and the view changes.
    const seen = seenLocks(this.target, now);
    const forced = forceReleasedLocks(this.target);
    // Told apart by address: sentinels that announce host names (`announce-hostnames yes`) name the new primary by
    // its name, the watcher by the address its socket reached; the name is resolved first, or one failover would be
    // compared (and its lost locks counted) twice.
    const reached = (host: string) => {
      const to = `${host}:${toServer.port}`;
      // Every sentinel announces the same switch, and the watcher may have reached the new primary first: once.
      if (this.lastComparedWith === to || this.stopped) return;
      this.lastComparedWith = to;
      this.compareWith(from, toServer, named, now, seen, forced);
    };
    const ip = ipAddressOf(toServer.host);
    if (ip !== null) reached(ip);
    else void addressOf(toServer.host).then(reached);
  }

  private compareWith(from: string, toServer: { host: string; port: number }, to: string, now: number, seen: SeenLock[], forced: SeenLock[]): void {
    const conn = new Redis({
      host: toServer.host,
      port: toServer.port,
      ...authOptions(this.deployment.auth, null),
      ...(this.deployment.tls ? { tls: tlsOptions(this.deployment.tls) } : {}),
      ...FAILOVER_READ_OPTIONS(this.timeoutMs),
    });
    void compareAfterFailover({ deployment: this.deployment.name, target: this.target, log: this.log, seenAt: now }, seen, forced, from, to, conn, "any");
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.allSettled(this.subscribers.map((s) => s.quit()));
    for (const s of this.subscribers) s.disconnect();
  }
}

/**
 * Follows a standalone instance's endpoint to another server: a managed service's primary endpoint or a virtual IP
 * moved to a promoted replica. Nothing announces it: the watcher knows it by the run id of a server that was already
 * running (see `nextRunFacts`) and says so before it reads that server; the console's view is then compared with
 * what the server behind the endpoint holds, as for Sentinel.
 */
export class EndpointFailoverMonitor {
  constructor(
    private readonly deployment: string,
    private readonly endpoint: { label: string; connect: (options: RedisOptions) => LockClient },
    private readonly target: FailoverTarget,
    private readonly log: Logger,
    private readonly timeoutMs: number,
  ) {
    initialiseFor("lockscope_failovers_total", { deployment: [deployment] });
    initialiseFor("lockscope_locks_lost_in_failover_total", { deployment: [deployment] });
    initialiseFor("lockscope_force_releases_undone_total", { deployment: [deployment] });
  }

  serverReplaced(change: ServerChange): void {
    const now = Date.now();
    // Taken at once, before the watcher reads the new server and the view changes.
    const seen = seenLocks(this.target, now);
    const forced = forceReleasedLocks(this.target);
    // Through the endpoint, as the watcher reached it: the address behind it may be a proxy's.
    const conn = this.endpoint.connect(FAILOVER_READ_OPTIONS(this.timeoutMs));
    if (!(conn instanceof Redis)) {
      conn.disconnect();
      return;
    }
    const runId = (id: string | null) => (id === null ? "unknown" : id.slice(0, 12));
    // (The same endpoint before and after: the servers behind it are told apart by their run ids.)
    const from = `${this.endpoint.label} (run id ${runId(change.runIdBefore)})`;
    const to = `${this.endpoint.label} (run id ${runId(change.runIdAfter)})`;
    void compareAfterFailover({ deployment: this.deployment, target: this.target, log: this.log, seenAt: now }, seen, forced, from, to, conn, "any");
  }

  /** (Nothing to close: each comparison closes its own connection.) */
  stop(): void {}
}
