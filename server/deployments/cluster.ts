import "server-only";
import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import Redis, { Cluster, type ClusterOptions, type RedisOptions } from "ioredis";
import type { Logger } from "pino";
import { keySlot } from "@lockscope/redlock";
import { maskRedisUrl } from "@/lib/config";
import { clusterFailovers, parseClusterShards, parseClusterSlots, primaryAddresses, readInSlots, servingShards, slotIn, topologySignature, type ClusterShard } from "@/lib/locks/cluster";
import { readLockKeys, type ReadLimits } from "@/lib/locks/formats";
import { replyOf } from "../errors";
import { initialiseFor } from "../metrics";
import type { LockNode } from "../nodes";
import { followPasswordFile, urlOptions } from "./connection";
import { compareAfterFailover, FAILOVER_READ_OPTIONS, forceReleasedLocks, seenLocks, type FailoverTarget } from "./failover";
import type { DeploymentDriver } from "./types";

/** How often the topology (`CLUSTER SHARDS`) is read: failovers, resharding and new primaries are followed this fast. */
export const TOPOLOGY_POLL_MS = 1_000;

/** Options of a cluster client from the console's per-connection options: the cluster's own, and the rest per node. */
function clusterOptions(options: RedisOptions, nodeOptions: RedisOptions): ClusterOptions {
  const { enableOfflineQueue, enableAutoPipelining, lazyConnect, retryStrategy, maxRetriesPerRequest, ...perNode } = options;
  return {
    ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
    ...(enableAutoPipelining !== undefined ? { enableAutoPipelining } : {}),
    ...(lazyConnect !== undefined ? { lazyConnect } : {}),
    ...(retryStrategy ? { clusterRetryStrategy: (times: number) => retryStrategy(times) ?? null } : {}),
    // Commands refused while a failover is under way are tried again a moment later, on the new primary.
    retryDelayOnClusterDown: 200,
    retryDelayOnFailover: 200,
    retryDelayOnTryAgain: 100,
    maxRedirections: 16,
    slotsRefreshInterval: TOPOLOGY_POLL_MS,
    slotsRefreshTimeout: Math.max(1_000, Number(options.commandTimeout ?? 1_000)),
    redisOptions: { ...nodeOptions, ...perNode, ...(maxRetriesPerRequest !== undefined ? { maxRetriesPerRequest } : {}) },
  };
}

/**
 * A Redis Cluster, given seed nodes: one endpoint for the whole cluster (its locks are single-instance
 * locks sharded by key: each is held where its slot's primary holds it), opened as a cluster client that
 * follows MOVED/ASK. The watcher reaches every primary by its address through `connectTo`.
 */
export const clusterDriver: DeploymentDriver<"cluster"> = {
  kind: "cluster",
  endpoints: (d) => {
    const seeds = d.seeds.map((url) => {
      const u = new URL(url);
      return { host: u.hostname.replace(/^\[|\]$/g, ""), port: u.port === "" ? 6379 : Number(u.port) };
    });
    // Every node of a cluster takes the same credentials and TLS settings as the first seed's URL.
    const first = d.seeds[0] ?? "redis://127.0.0.1:6379";
    const nodeOptions = urlOptions(first, d.tls, d.auth);
    return [
      {
        label: `cluster://${d.seeds.map((s) => maskRedisUrl(s).replace(/^rediss?:\/\//, "")).join(",")}`,
        url: null,
        connect: (options) => {
          const client = new Cluster(seeds, clusterOptions(options, nodeOptions));
          // (Each node's connection is made from these options, the password file read then.)
          if (client.options.redisOptions) followPasswordFile(client.options.redisOptions, "password", d.auth, first);
          return client;
        },
        connectTo: (host, port, options) => {
          const client = new Redis({ host, port, ...nodeOptions, ...options });
          followPasswordFile(client.options, "password", d.auth, first);
          return client;
        },
      },
    ];
  },
};

/**
 * Whether a command was refused for good (an ACL's NOPERM, a command or subcommand the server does not have or
 * renamed away), rather than failing for now (a timeout, LOADING, BUSY); also when a cluster client reports the
 * refusal after its tries (`replyOf`).
 */
export function isCommandRefused(error: unknown): error is Error {
  const reply = replyOf(error);
  return reply !== null && /^NOPERM|unknown (sub)?command/i.test(reply);
}

export interface TopologyChange {
  before: ClusterShard[];
  after: ClusterShard[];
}

/**
 * The cluster's topology, read every second with `CLUSTER SHARDS` through the console's cluster client:
 * `change` is emitted (before the console acts on it) whenever the primaries or the slots they serve
 * change; `shards` is the last reading. One per cluster deployment, shared by the watcher (which subscribes
 * to every primary), the failover comparison and the lock page.
 */
export class ClusterTopology extends EventEmitter<{ change: [TopologyChange] }> {
  shards: ClusterShard[] = [];
  private signature = "";
  private readonly timer: NodeJS.Timeout;
  private reading = false;

  /** CLUSTER SHARDS was refused: the topology comes from CLUSTER SLOTS. */
  slotsOnly = false;

  constructor(
    private readonly client: Cluster,
    private readonly onSlotsOnly: (reason: string) => void = () => {},
  ) {
    super();
    this.timer = setInterval(() => void this.read(), TOPOLOGY_POLL_MS);
    this.timer.unref();
    void this.read();
  }

  /** Reads the topology now (also called when a node's connection drops, so a failover is seen early). */
  async read(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    try {
      const shards = await this.readShards();
      if (primaryAddresses(shards).length === 0) return;
      const signature = topologySignature(shards);
      const before = this.shards;
      this.shards = shards;
      if (signature !== this.signature) {
        this.signature = signature;
        // The client's own slot map follows too (MOVED would teach it, one command late).
        this.client.refreshSlotsCache();
        this.emit("change", { before, after: shards });
      }
    } catch {
      // A node away or the cluster mid-failover: the next reading tells.
    } finally {
      this.reading = false;
    }
  }

  /**
   * `CLUSTER SHARDS`; where the server refuses it (before Redis 7.0: an unknown subcommand; an ACL without it),
   * `CLUSTER SLOTS` from then on, which tells no member's health or replication offset.
   */
  private async readShards(): Promise<ClusterShard[]> {
    if (!this.slotsOnly) {
      try {
        return parseClusterShards(await this.client.call("CLUSTER", "SHARDS"), { tls: this.client.options.redisOptions?.tls !== undefined });
      } catch (error) {
        // (Only a refusal: a passing error, LOADING or BUSY, is read again at the next reading.)
        if (!isCommandRefused(error)) throw error;
        this.slotsOnly = true;
        this.onSlotsOnly(error.message);
      }
    }
    return parseClusterSlots(await this.client.call("CLUSTER", "SLOTS"));
  }

  /** Resolves true once the topology has been read (false after `timeoutMs`). */
  async known(timeoutMs: number): Promise<boolean> {
    if (this.shards.length > 0) return true;
    const first = new Promise<boolean>((resolve) => this.once("change", () => resolve(true)));
    return Promise.race([first, new Promise<boolean>((resolve) => setTimeout(() => resolve(this.shards.length > 0), timeoutMs).unref())]);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/**
 * Follows a cluster's failovers: when the topology shows a primary's slots served by what was its replica,
 * it takes the console's view of the locks in those slots at once (before the watcher reconnects to the new
 * primary and reconciles), reads them on the promoted replica, and reports every one it does not hold as
 * lost in failover, as for Sentinel (see failover.ts).
 */
export class ClusterFailoverMonitor {
  private readonly onChange = (change: TopologyChange) => this.compare(change);

  constructor(
    private readonly deployment: string,
    private readonly cluster: NonNullable<LockNode["cluster"]>,
    private readonly target: FailoverTarget,
    private readonly log: Logger,
    private readonly timeoutMs: number,
  ) {
    initialiseFor("lockscope_failovers_total", { deployment: [deployment] });
    initialiseFor("lockscope_locks_lost_in_failover_total", { deployment: [deployment] });
    initialiseFor("lockscope_force_releases_undone_total", { deployment: [deployment] });
    cluster.topology.on("change", this.onChange);
  }

  private compare({ before, after }: TopologyChange): void {
    const now = Date.now();
    for (const failover of clusterFailovers(before, after)) {
      const inSlots = (resource: string) => slotIn(failover.slots, keySlot(resource));
      const seen = seenLocks(this.target, now, inSlots);
      const forced = forceReleasedLocks(this.target, inSlots);
      const conn = this.cluster.connectTo(failover.to.host, failover.to.port, FAILOVER_READ_OPTIONS(this.timeoutMs));
      void compareAfterFailover({ deployment: this.deployment, target: this.target, log: this.log, seenAt: now }, seen, forced, failover.from.address, failover.to.address, conn);
    }
  }

  stop(): void {
    this.cluster.topology.off("change", this.onChange);
  }
}

/** The cluster client's own connection to the node at `address` (`host:port`), if it has one yet. */
export function clusterNodeAt(client: Cluster, address: string): Redis | undefined {
  return client.nodes("all").find((n) => `${n.options.host}:${n.options.port}` === address);
}

/**
 * Discovery's walk of a cluster: every primary's keys in turn (the cursor is `<primary>:<its cursor>:<walk>`, the
 * primaries in address order), and reads one hash slot at a time. `<walk>` names the primaries and their slots
 * the pass started with: once they change (a failover, a primary added or lost, slots moved), the next step
 * fails and the pass starts again, since the cursor would go on over another primary's keys, or a moved slot's
 * keys would be passed over, while the pass read as complete.
 */
export function clusterDiscovery(client: Cluster, topology: ClusterTopology) {
  return {
    scan: async (cursor: string, count: number): Promise<[string, string[]]> => {
      const primaries = primaryAddresses(topology.shards);
      const walk = createHash("sha1")
        .update(JSON.stringify(servingShards(topology.shards).map((s) => [s.primary?.address, s.slots])))
        .digest("hex")
        .slice(0, 16);
      const m = /^(\d+):(\d+):([0-9a-f]+)$/.exec(cursor);
      if (m && m[3] !== walk) throw new Error("the cluster's primaries or their slots changed during the scan (a failover, a primary added or lost, a slot moved); scanning again shortly");
      const at = m ? Number(m[1]) : 0;
      const conn = clusterNodeAt(client, primaries[at] ?? "");
      if (!conn) {
        client.refreshSlotsCache();
        throw new Error("the cluster's topology is changing; scanning again shortly");
      }
      const [next, keys] = await conn.scan(m ? (m[2] as string) : "0", "COUNT", count);
      if (next !== "0") return [`${at}:${next}:${walk}`, keys];
      return [at + 1 < primaries.length ? `${at + 1}:0:${walk}` : "0", keys];
    },
    read: (keys: string[], limits: Partial<ReadLimits>) => readInSlots(keys, (batch) => readLockKeys(client, batch, limits)),
  };
}
