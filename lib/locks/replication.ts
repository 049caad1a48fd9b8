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

export function parseReplicationInfo(info: string): ReplicationState {
  const fields = new Map<string, string>();
  for (const line of info.split(/\r?\n/)) {
    const at = line.indexOf(":");
    if (at > 0) fields.set(line.slice(0, at), line.slice(at + 1).trim());
  }
  const role = fields.get("role");
  const offset = Number(fields.get(role === "slave" ? "slave_repl_offset" : "master_repl_offset"));
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
  const state: ReplicationState = { role: role === "master" ? "master" : role === "slave" ? "replica" : null, offset: known, replicas };
  if (role === "slave") {
    state.linkUp = fields.get("master_link_status") === "up";
    const host = fields.get("master_host");
    const port = fields.get("master_port");
    if (host !== undefined && port !== undefined) state.primary = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  }
  return state;
}
