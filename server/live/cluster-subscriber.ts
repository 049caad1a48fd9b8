import "server-only";
import { EventEmitter } from "node:events";
import type Redis from "ioredis";
import type { RedisOptions } from "ioredis";
import { servedShards } from "@/lib/locks/cluster";
import type { ClusterTopology } from "../deployments/cluster";

/** What the watcher needs of its subscriber connection: an ioredis connection, or a cluster's set of them. */
export interface WatchSubscriber {
  readonly status: string;
  psubscribe(...patterns: string[]): Promise<unknown>;
  punsubscribe(...patterns: string[]): Promise<unknown>;
  subscribe(...channels: string[]): Promise<unknown>;
  /** Answered once every notification sent before it has come (on each connection). */
  ping(): Promise<unknown>;
  quit(): Promise<unknown>;
  disconnect(): void;
  on(event: "ready" | "close" | "error", listener: () => void): unknown;
  /** A cluster's subscriber only: primaries joined (none lost) and took the subscriptions (see `ClusterSubscriber.join`). */
  on(event: "joined", listener: () => void): unknown;
  on(event: "pmessage", listener: (pattern: string, channel: string, message: string) => void): unknown;
  on(event: "message", listener: (channel: string, message: string) => void): unknown;
}

/**
 * A cluster's keyspace subscriber: Redis Cluster publishes a key's keyspace events only on the node that
 * owns the key, so this holds one subscribed connection per primary, following the topology (a failover, a
 * primary added or removed) without a restart. To the watcher it is one connection: `ready` once every
 * primary's connection is up (again, after a change: the watcher then subscribes and reconciles), `close`
 * when one drops. Plain channels (the engine's telemetry) are subscribed on one primary only: a PUBLISH
 * reaches every node of a cluster, so one subscription hears each message once.
 */
export class ClusterSubscriber extends EventEmitter implements WatchSubscriber {
  private readonly connections = new Map<string, Redis>();
  private readonly patterns = new Set<string>();
  private readonly channels = new Set<string>();
  /** Connections to primaries that joined while the others stayed subscribed, until they take the subscriptions. */
  private readonly joining = new Set<Redis>();
  /** The connection the plain channels are subscribed on. */
  private home: string | null = null;
  private stopped = false;
  private wasReady = false;
  private readonly onChange = () => this.sync();

  constructor(
    private readonly topology: ClusterTopology,
    private readonly connectTo: (host: string, port: number, options: RedisOptions) => Redis,
    private readonly options: RedisOptions,
  ) {
    super();
    topology.on("change", this.onChange);
    this.sync();
  }

  get status(): string {
    if (this.stopped) return "end";
    if (this.connections.size === 0) return "connecting";
    for (const c of this.connections.values()) if (c.status !== "ready") return c.status;
    return "ready";
  }

  /** Opens connections to new primaries and closes those to nodes that are not primaries any more. */
  private sync(): void {
    if (this.stopped) return;
    // A primary the cluster marked failed, with no replica promoted, is not waited for: the cluster may go on
    // serving the other slots (with `cluster-require-full-coverage no`), and their notifications with them.
    const wanted = new Map(servedShards(this.topology.shards).map((s) => [s.primary!.address, s.primary!]));
    let removed = false;
    const added: Redis[] = [];
    for (const [address, conn] of this.connections) {
      if (wanted.has(address)) continue;
      removed = true;
      this.connections.delete(address);
      this.joining.delete(conn);
      conn.disconnect();
    }
    for (const [address, member] of wanted) {
      if (this.connections.has(address)) continue;
      const conn = this.connectTo(member.host, member.port, this.options);
      added.push(conn);
      this.connections.set(address, conn);
      conn.on("error", () => undefined);
      conn.on("pmessage", (pattern: string, channel: string, message: string) => this.emit("pmessage", pattern, channel, message));
      conn.on("message", (channel: string, message: string) => {
        if (address === this.home) this.emit("message", channel, message);
      });
      conn.on("ready", () => {
        if (this.joining.has(conn)) void this.join(conn, address);
        else this.checkReady();
      });
      conn.on("close", () => {
        if (this.connections.get(address) !== conn) return;
        this.joining.delete(conn);
        // Read the topology now: a primary that went away is most often being failed over.
        void this.topology.read();
        if (this.wasReady) {
          this.wasReady = false;
          this.emit("close");
        }
      });
    }
    const home = [...wanted.keys()].sort()[0] ?? null;
    if (home !== this.home) {
      this.home = home;
      if (this.channels.size > 0) void this.subscribeHome().catch(() => undefined);
    }
    // Primaries added while none was lost (a replica promoted for a primary that failed earlier, with the others
    // serving on: `cluster-require-full-coverage no`; a new shard): the other connections' notifications never
    // stopped, so this is no new connection to the watcher, which would count a second reconnect and gap for one
    // failover and take every lock out of view again. Each joins on its own (see `join`).
    if (!removed && added.length > 0 && this.wasReady) {
      for (const conn of added) this.joining.add(conn);
      return;
    }
    // A primary lost is a new connection to the watcher: it subscribes and reconciles again.
    // (Slots moving between the same primaries change nothing here: the keys' events follow them.)
    if ((removed || added.length > 0) && this.wasReady) {
      this.wasReady = false;
      // (Those still joining come up with the rest: the watcher subscribes every connection anew.)
      this.joining.clear();
      this.emit("close");
    }
    this.checkReady();
  }

  private checkReady(): void {
    if (this.stopped || this.wasReady || this.status !== "ready") return;
    this.wasReady = true;
    this.emit("ready");
  }

  /**
   * A primary that joined (see `sync`) takes every subscription the others have, then `joined` is said: the watcher
   * reads the keys again (those in the new primary's slots changed unheard until now). A connection that fails to
   * take them is replaced, as a lost primary's is: the watcher subscribes and reconciles anew.
   */
  private async join(conn: Redis, address: string): Promise<void> {
    try {
      if (this.patterns.size > 0) await conn.psubscribe(...this.patterns);
      if (address === this.home && this.channels.size > 0) await conn.subscribe(...this.channels);
    } catch {
      if (this.stopped || this.connections.get(address) !== conn) return;
      this.connections.delete(address);
      this.joining.delete(conn);
      conn.disconnect();
      if (this.wasReady) {
        this.wasReady = false;
        this.joining.clear();
        this.emit("close");
      }
      this.sync();
      return;
    }
    if (this.connections.get(address) !== conn) return;
    // (No longer joining: a primary was lost meanwhile, and this one comes up with the rest.)
    if (!this.joining.delete(conn)) this.checkReady();
    else this.emit("joined");
  }

  private async subscribeHome(): Promise<void> {
    const conn = this.home === null ? undefined : this.connections.get(this.home);
    if (conn && this.channels.size > 0) await conn.subscribe(...this.channels);
  }

  async psubscribe(...patterns: string[]): Promise<unknown> {
    for (const p of patterns) this.patterns.add(p);
    return Promise.all([...this.connections.values()].map((c) => c.psubscribe(...patterns)));
  }

  async punsubscribe(...patterns: string[]): Promise<unknown> {
    for (const p of patterns) this.patterns.delete(p);
    return Promise.all([...this.connections.values()].map((c) => c.punsubscribe(...patterns)));
  }

  async subscribe(...channels: string[]): Promise<unknown> {
    for (const c of channels) this.channels.add(c);
    return this.subscribeHome();
  }

  async ping(): Promise<unknown> {
    return Promise.all([...this.connections.values()].map((c) => c.ping()));
  }

  async quit(): Promise<unknown> {
    this.stopped = true;
    this.topology.off("change", this.onChange);
    return Promise.allSettled([...this.connections.values()].map((c) => c.quit()));
  }

  disconnect(): void {
    this.stopped = true;
    this.topology.off("change", this.onChange);
    for (const c of this.connections.values()) c.disconnect();
  }
}
