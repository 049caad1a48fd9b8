/** What `INFO replication` says about a node and its replicas: how far behind each replica is. */
export interface ReplicaState {
  address: string;
  state: string;
  /** Replication offset the replica acknowledged. */
  offset: number;
  /** Bytes of the primary's stream the replica has not acknowledged: 0 means it has every write so far. */
  lagBytes: number;
}

export interface ReplicationState {
  role: "master" | "replica" | null;
  /** The primary's replication offset (for a replica: how far it has read). */
  offset: number | null;
  replicas: ReplicaState[];
  /** For a replica: whether its link to the primary is up. */
  linkUp?: boolean;
  /** For a replica: the primary it follows (`host:port`), where it says. */
  primary?: string;
}

/**
 * What a node is, as its `INFO replication` says: a primary; a replica, following `primary` (`host:port`, null
 * where it does not say) over a link up or down, read-only or writable (`replica-read-only no`; null where it does
 * not say); or unknown where the reply names no role the console knows (`why` says what it gave). This is the one
 * place that rule lives: the replication watch, the health and a force release read a node's role from it.
 */
export type NodeRole =
  | { kind: "primary" }
  | { kind: "replica"; primary: string | null; linkUp: boolean; readOnly: boolean | null }
  | { kind: "unknown"; why: string };

/** An `INFO replication` reply read once: the node's role, and its replication (offsets, replicas) for the health. */
export interface ReplicationReading {
  role: NodeRole;
  state: ReplicationState;
}

/** Reads an `INFO replication` reply; never throws: a reply it cannot make sense of gives the role `unknown`. */
export function readReplicationInfo(info: string): ReplicationReading {
  const fields = new Map<string, string>();
  for (const line of info.split(/\r?\n/)) {
    const at = line.indexOf(":");
    if (at > 0) fields.set(line.slice(0, at), line.slice(at + 1).trim());
  }
  const role = roleOf(fields);
  const offset = Number(fields.get(role.kind === "replica" ? "slave_repl_offset" : "master_repl_offset"));
  const known = Number.isFinite(offset) ? offset : null;
  const replicas: ReplicaState[] = [];
  for (const [name, value] of fields) {
    if (!/^slave\d+$/.test(name)) continue;
    const parts = new Map(value.split(",").map((kv) => kv.split("=") as [string, string]));
    const replicaOffset = Number(parts.get("offset"));
    replicas.push({
      address: `${parts.get("ip") ?? "?"}:${parts.get("port") ?? "?"}`,
      state: parts.get("state") ?? "unknown",
      offset: Number.isFinite(replicaOffset) ? replicaOffset : 0,
      lagBytes: known !== null && Number.isFinite(replicaOffset) ? Math.max(0, known - replicaOffset) : 0,
    });
  }
  const state: ReplicationState = { role: role.kind === "primary" ? "master" : role.kind === "replica" ? "replica" : null, offset: known, replicas };
  if (role.kind === "replica") {
    state.linkUp = role.linkUp;
    if (role.primary !== null) state.primary = role.primary;
  }
  return { role, state };
}

/** The replication of an `INFO replication` reply (see `readReplicationInfo`). */
export function parseReplicationInfo(info: string): ReplicationState {
  return readReplicationInfo(info).state;
}

function roleOf(fields: ReadonlyMap<string, string>): NodeRole {
  const role = fields.get("role");
  if (role === "master") return { kind: "primary" };
  if (role !== "slave") return { kind: "unknown", why: !role ? "the reply names no role" : `the reply names the role \`${role.slice(0, 40)}\`, neither master nor slave` };
  const host = fields.get("master_host");
  const port = fields.get("master_port");
  const readOnly = fields.get("slave_read_only");
  return {
    kind: "replica",
    primary: host !== undefined && port !== undefined ? `${host.includes(":") ? `[${host}]` : host}:${port}` : null,
    linkUp: fields.get("master_link_status") === "up",
    readOnly: readOnly === "1" ? true : readOnly === "0" ? false : null,
  };
}
