import { keySlot } from "@lockscope/redlock";

/**
 * A Redis Cluster's topology as `CLUSTER SHARDS` describes it, and what changed between two readings: the
 * primaries to watch (keyspace notifications are per node), and failovers (a primary's slots now served by
 * what was its replica). Pure: readings in, topology and changes out.
 */

export interface ClusterMember {
  id: string;
  /** `host:port` as the cluster announces it. */
  address: string;
  host: string;
  port: number;
  role: "primary" | "replica";
  /** "online", "failed" or "loading". */
  health: string;
  /** The member's replication offset: for a replica, how much of its primary's stream it has. */
  offset: number;
}

export interface ClusterShard {
  /** Inclusive slot ranges `[from, to]`. */
  slots: Array<[number, number]>;
  primary: ClusterMember | null;
  replicas: ClusterMember[];
}

/** What a failover moved: `from`'s slots are now served by `to`, which was its replica. */
export interface ClusterFailover {
  from: ClusterMember;
  to: ClusterMember;
  slots: Array<[number, number]>;
}

const text = (value: unknown, fallback: string): string => (typeof value === "string" ? value : Buffer.isBuffer(value) ? value.toString("utf8") : fallback);

const fieldsOf = (flat: unknown): Map<string, unknown> => {
  const out = new Map<string, unknown>();
  if (!Array.isArray(flat)) return out;
  for (let i = 0; i + 1 < flat.length; i += 2) out.set(String(flat[i]), flat[i + 1]);
  return out;
};

/**
 * `CLUSTER SHARDS` (Redis 7) as shards; members without an address or an id are left out. A node that listens on
 * TLS and plain TCP both has both ports listed: `tls` (the console connects with TLS) takes its TLS port, as
 * `CLUSTER SLOTS` over TLS tells the cluster client.
 */
export function parseClusterShards(reply: unknown, options: { tls?: boolean } = {}): ClusterShard[] {
  if (!Array.isArray(reply)) return [];
  return reply.map((raw): ClusterShard => {
    const shard = fieldsOf(raw);
    const bounds = (Array.isArray(shard.get("slots")) ? (shard.get("slots") as unknown[]) : []).map(Number);
    const slots: Array<[number, number]> = [];
    for (let i = 0; i + 1 < bounds.length; i += 2) slots.push([bounds[i] as number, bounds[i + 1] as number]);
    const members: ClusterMember[] = [];
    for (const rawNode of Array.isArray(shard.get("nodes")) ? (shard.get("nodes") as unknown[]) : []) {
      const node = fieldsOf(rawNode);
      // The preferred endpoint (a host name where the cluster prefers them), as CLUSTER SLOTS names the node to
      // the cluster client; its IP address where the endpoint is unknown ("?").
      const endpoint = text(node.get("endpoint"), "");
      const host = endpoint !== "" && endpoint !== "?" ? endpoint : text(node.get("ip"), "");
      const port = Number(options.tls ? (node.get("tls-port") ?? node.get("port")) : (node.get("port") ?? node.get("tls-port")));
      const id = text(node.get("id"), "");
      if (host === "" || !Number.isInteger(port) || id === "") continue;
      members.push({
        id,
        host,
        port,
        address: host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`,
        role: node.get("role") === "master" ? "primary" : "replica",
        health: text(node.get("health"), "unknown"),
        offset: Number(node.get("replication-offset") ?? 0),
      });
    }
    // A failed primary stays listed as master until its replica takes over: the healthy one is the primary.
    const primaries = members.filter((m) => m.role === "primary");
    const primary = primaries.find((m) => m.health === "online") ?? primaries[0] ?? null;
    return { slots, primary, replicas: members.filter((m) => m.role === "replica") };
  });
}

/**
 * `CLUSTER SLOTS` as shards, where `CLUSTER SHARDS` is not to be had (servers before Redis 7.0, or an ACL without
 * it): each slot range with its primary and the replicas that can serve it, grouped by primary. It tells less:
 * every member listed is taken as online (a failed replica is left out; a failed primary stays listed until a
 * replica takes over), offsets are unknown (NaN), and a primary without slots is not listed at all.
 */
export function parseClusterSlots(reply: unknown): ClusterShard[] {
  if (!Array.isArray(reply)) return [];
  const byPrimary = new Map<string, ClusterShard>();
  for (const range of reply) {
    if (!Array.isArray(range) || range.length < 3) continue;
    const [from, to] = [Number(range[0]), Number(range[1])];
    if (!Number.isInteger(from) || !Number.isInteger(to)) continue;
    const members: ClusterMember[] = [];
    for (let i = 2; i < range.length; i++) {
      const raw: unknown = range[i];
      if (!Array.isArray(raw)) continue;
      const host = text(raw[0], "");
      const port = Number(raw[1]);
      const id = text(raw[2], "");
      // ("?" or "": a member whose endpoint is not known.)
      if (host === "" || host === "?" || !Number.isInteger(port) || port <= 0 || id === "") continue;
      const address = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
      members.push({ id, host, port, address, role: i === 2 ? "primary" : "replica", health: "online", offset: Number.NaN });
    }
    const primary = members[0]?.role === "primary" ? members[0] : null;
    if (primary === null) continue;
    const shard = byPrimary.get(primary.id);
    if (shard) {
      shard.slots.push([from, to]);
      for (const r of members.slice(1)) if (!shard.replicas.some((x) => x.id === r.id)) shard.replicas.push(r);
    } else {
      byPrimary.set(primary.id, { slots: [[from, to]], primary, replicas: members.slice(1) });
    }
  }
  for (const shard of byPrimary.values()) shard.slots.sort((a, b) => a[0] - b[0]);
  return [...byPrimary.values()];
}

/** The shards that serve slots, ordered by their first slot (an empty shard serves nothing to watch). */
export function servingShards(shards: readonly ClusterShard[]): ClusterShard[] {
  return shards.filter((s) => s.slots.length > 0 && s.primary !== null).sort((a, b) => (a.slots[0]?.[0] ?? 0) - (b.slots[0]?.[0] ?? 0));
}

/** The shards that serve slots with their primary online, ordered by their first slot. */
export function servedShards(shards: readonly ClusterShard[]): ClusterShard[] {
  return servingShards(shards).filter((s) => s.primary?.health === "online");
}

/**
 * The slots of the shards whose primary is not online (failed, and no replica promoted): a cluster that serves
 * the slots it still covers (`cluster-require-full-coverage no`) answers for every other slot meanwhile.
 */
export function unservedSlots(shards: readonly ClusterShard[]): Array<[number, number]> {
  return servingShards(shards)
    .filter((s) => s.primary?.health !== "online")
    .flatMap((s) => s.slots);
}

/** The addresses of the primaries that serve slots, sorted: what the watcher subscribes to. */
export function primaryAddresses(shards: readonly ClusterShard[]): string[] {
  return servingShards(shards)
    .map((s) => (s.primary as ClusterMember).address)
    .sort();
}

/**
 * What tells two readings of a topology apart for the console: each shard's primary (its id, its address, its
 * health) and slots. A primary back at a new address with its id (a container given a new IP, its volume kept)
 * is a change: the watcher must subscribe there. The order `CLUSTER SHARDS` lists the shards in is not: it moves
 * as nodes come and go, and would only make changes of nothing.
 */
export function topologySignature(shards: readonly ClusterShard[]): string {
  return JSON.stringify(shards.map((s) => JSON.stringify([s.primary?.id ?? "", s.primary?.address ?? "", s.primary?.health ?? "", s.slots])).sort());
}

export function shardOfSlot(shards: readonly ClusterShard[], slot: number): ClusterShard | null {
  return shards.find((s) => s.primary !== null && s.slots.some(([from, to]) => slot >= from && slot <= to)) ?? null;
}

/**
 * The failovers between two readings: a primary of `before` whose slots a member that was its replica in
 * `before` now serves as primary. (A primary that only lost slots to another primary was resharded, not
 * failed over.)
 */
export function clusterFailovers(before: readonly ClusterShard[], after: readonly ClusterShard[]): ClusterFailover[] {
  const out: ClusterFailover[] = [];
  for (const old of before) {
    if (!old.primary || old.slots.length === 0) continue;
    const replicaIds = new Set(old.replicas.map((r) => r.id));
    const now = after.find((s) => s.primary !== null && replicaIds.has(s.primary.id) && s.slots.length > 0);
    if (now?.primary && now.primary.id !== old.primary.id) out.push({ from: old.primary, to: now.primary, slots: old.slots });
  }
  return out;
}

export const slotIn = (slots: ReadonlyArray<[number, number]>, slot: number): boolean => slots.some(([from, to]) => slot >= from && slot <= to);

/**
 * Reads `keys` with `read` one hash slot at a time (a script or a MULTI may only touch keys of one slot on
 * a cluster), the batches sent at once; the results come back in the order of `keys`.
 */
export async function readInSlots<T>(keys: readonly string[], read: (batch: string[]) => Promise<T[]>): Promise<T[]> {
  const bySlot = new Map<number, number[]>();
  keys.forEach((key, i) => {
    const slot = keySlot(key);
    const at = bySlot.get(slot);
    if (at) at.push(i);
    else bySlot.set(slot, [i]);
  });
  const out = new Array<T>(keys.length);
  await Promise.all(
    [...bySlot.values()].map(async (indexes) => {
      const results = await read(indexes.map((i) => keys[i] as string));
      indexes.forEach((i, j) => (out[i] = results[j] as T));
    }),
  );
  return out;
}
