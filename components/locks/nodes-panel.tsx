"use client";

import type { ReplicationState } from "@/lib/locks/replication";
import { replicaConsequence, replicaText } from "@/lib/locks/node-pills";
import { notUpText, useHealth, type HealthNode } from "../node-status";
import { useLiveNodes, useNow } from "./use-live-locks";
import { formatDuration } from "./format";
import { LoadError } from "./lock-rows";
import { MessageText } from "../message-text";
import { TableHead, TableScroll } from "../table-scroll";

/** What the live view adds to each node in /api/health. */
interface NodeFacts extends HealthNode {
  watcher?: { up: boolean; lastEventAt: number | null; lastEventAgeMs: number | null; reconnects: number; gaps: number };
  persistence?: { appendonly: string | null; save: string | null };
  uptimeSec?: number | null;
  longestTtlMs?: number | null;
  restartRisk?: boolean | null;
  clockSkewMs?: number | null;
  /** Keys under the patterns found on the node whose names are not UTF-8 text (not shown: see the warning). */
  keyNamesNotText?: number;
  /** Lock patterns the node does not let the console's Redis user watch, and the ACL rule each needs. */
  refusedPatterns?: Array<{ glob: string; rule: string }>;
  /** A cluster's slots that no primary serves now (a shard lost, no replica promoted), in ranges. */
  unservedSlots?: Array<[number, number]>;
  /** `INFO replication`, read every 2 s (absent while the node cannot be read). */
  replication?: ReplicationState;
  /** A Redis Cluster (one node to the console): its shards, each with its replicas. */
  cluster?: { shards: Array<{ primary: string | null; replicas: Array<{ address: string; health: string; lagBytes: number | null }> }> };
}

/** Bytes as the panel shows them: `0 B`, `145 B`, `12.3 KB`, `4.1 MB`. */
function bytesText(n: number): string {
  if (n < 1_000) return `${n} B`;
  if (n < 1_000_000) return `${(n / 1_000).toFixed(1)} KB`;
  return `${(n / 1_000_000).toFixed(1)} MB`;
}

/**
 * Where the node's locks are copied and how far each copy is behind: writes a replica has not acknowledged
 * are the window in which a failover would lose a lock.
 */
function ReplicationCell({ node }: { node: NodeFacts }) {
  if (node.cluster) {
    const replicas = node.cluster.shards.flatMap((s) => s.replicas);
    const behind = Math.max(0, ...replicas.map((r) => r.lagBytes ?? 0));
    const unhealthy = replicas.filter((r) => r.health !== "online").length;
    const bare = node.cluster.shards.filter((s) => s.replicas.length === 0).length;
    const warn = unhealthy > 0 || bare > 0;
    return (
      <td className={`wraps${warn ? " warn-text" : ""}`}>
        {warn && <span aria-hidden>⚠ </span>}
        {node.cluster.shards.length} {node.cluster.shards.length === 1 ? "shard" : "shards"}, {replicas.length} {replicas.length === 1 ? "replica" : "replicas"}
        {replicas.length > 0 && `, most behind ${bytesText(behind)}`}
        {unhealthy > 0 && `; ${unhealthy} not online`}
        {bare > 0 && `; ${bare} ${bare === 1 ? "shard" : "shards"} without a replica`}
      </td>
    );
  }
  const r = node.replication;
  if (!r || r.role === null) return <td className="muted">—</td>;
  if (r.role === "replica") {
    // The console's URL names this node, but it follows another now (a failover demoted it): the state cell says
    // it is read-only (no lock can be taken or released there); this one, whose replica and how its link is.
    return (
      <td className="wraps warn-text">
        <span aria-hidden>⚠ </span>a replica{r.primary ? ` of ${r.primary}` : ""} now, its link to {r.primary ? "it" : "its primary"} {r.linkUp ? "up" : "down"}
      </td>
    );
  }
  if (r.replicas.length === 0) {
    // A Sentinel deployment's primary without a replica: a failover has nothing to promote. (Elsewhere, a
    // Redlock node or a standalone instance, none is the design.)
    if (!node.url.startsWith("sentinel://")) return <td className="wraps">no replica</td>;
    return (
      <td className="wraps warn-text">
        <span aria-hidden>⚠ </span>no replica: a failover has nothing to promote, and the locks are on this primary alone
      </td>
    );
  }
  return (
    <td className="wraps">
      <ul className="replicas" aria-label={`Replicas of ${node.id}`}>
        {r.replicas.map((replica) => (
          <li key={replica.address} className={replica.state === "online" ? undefined : "warn-text"}>
            <span className="mono">{replica.address}</span> {replica.state}, {bytesText(replica.lagBytes)} behind
          </li>
        ))}
      </ul>
    </td>
  );
}

const NOTIFICATIONS_TEXT: Record<HealthNode["notifications"], string> = {
  on: "on",
  "enabled-by-console": "on (enabled by the console)",
  unavailable: "unavailable: periodic SCAN (degraded)",
};

/** Per node: reachability, latency, notifications, last event, reconnects, persistence vs TTLs, clock skew, replication. */
export function NodesPanel() {
  const { data, dataUpdatedAt, error } = useHealth();
  // Up, answering and latency from the live stream (as the header and the counts above); the rest from health.
  const live = useLiveNodes().data?.nodes ?? [];
  // How long since health was read (every 5 s): a node's last event counts on meanwhile, and after the last read
  // where the console stops answering, rather than saying the age it had then.
  const sinceRead = Math.max(0, useNow(1_000) - dataUpdatedAt);
  // A read that failed says so (in the page's words for a session that ended), above the nodes as last read where
  // there are any: the panel neither vanishes nor passes off its last read as current.
  const failed = error ? <LoadError what="the nodes" error={error} /> : null;
  if (!data) {
    if (!failed) return null;
    return (
      <section className="panel nodes-panel" aria-labelledby="nodes-heading">
        <h2 id="nodes-heading">Nodes</h2>
        {failed}
      </section>
    );
  }
  const nodes = data.nodes as NodeFacts[];
  const multi = new Set(nodes.map((n) => n.deployment)).size > 1;
  const skews = nodes.map((n) => n.clockSkewMs).filter((s): s is number => typeof s === "number");
  const spread = skews.length > 1 ? Math.max(...skews) - Math.min(...skews) : null;
  return (
    <section className="panel nodes-panel" aria-labelledby="nodes-heading">
      <h2 id="nodes-heading">Nodes</h2>
      {failed}
      <TableScroll label="Lock nodes, scrollable">
        <table className="nodes-table" aria-label="Lock nodes">
          <TableHead columns={["Node", "Status", "Latency", "Notifications", "Last event", "Reconnects", "Persistence", "Uptime vs longest TTL", "Clock skew", "Replication"]} />
          <tbody>
            {nodes.map((health) => {
              // (Where several deployments are watched, node ids repeat: the watcher is the one of the node's deployment.)
              const watcher = live.find((n) => n.nodeId === health.id && (n.deployment === undefined || n.deployment === health.deployment));
              const name = multi ? `${health.deployment ?? ""} ${health.id}` : health.id;
              const node = watcher ? { ...health, up: watcher.up, latencyMs: watcher.latencyMs ?? health.latencyMs } : health;
              // A replica answers PING, so it is up; but it refuses every write: no lock can be taken or released there.
              const readOnly = watcher ? watcher.readOnly : health.replication?.role === "replica" ? { primary: health.replication.primary ?? null } : undefined;
              const aof = node.persistence?.appendonly;
              const save = node.persistence?.save;
              const persistent = aof === "yes";
              // A node that is not up: its facts are what it said when last read (its uptime no longer counts on).
              const lastRead = node.up ? null : <span className="muted"> (when last read)</span>;
              return (
                <tr key={name} aria-label={name}>
                  <th scope="row">
                    {name} <span className="node-url muted mono">{node.url}</span>
                  </th>
                  <td className={node.up && readOnly ? "wraps warn-text" : undefined}>
                    <span className={`dot ${node.up ? (readOnly ? "degraded" : "up") : watcher?.reading ? "degraded" : "down"}`} aria-hidden />{" "}
                    {node.up ? (readOnly ? `up, ${replicaText(readOnly)}: ${replicaConsequence(readOnly)}` : "up") : !watcher ? "down" : watcher.reading ? `${notUpText(watcher)} (${watcher.reading.keysRead.toLocaleString("en")} keys so far)` : notUpText(watcher)}
                  </td>
                  <td className="mono">{node.latencyMs === null ? "—" : `${node.latencyMs} ms`}</td>
                  <td className={`wraps${node.notifications === "unavailable" ? " warn-text" : ""}`}>
                    {node.notifications === "unavailable" && <span aria-hidden>⚠ </span>}
                    {NOTIFICATIONS_TEXT[node.notifications]}
                    {lastRead}
                  </td>
                  <td className="mono">{node.watcher?.lastEventAgeMs == null ? "none yet" : `${formatDuration(node.watcher.lastEventAgeMs + sinceRead)} ago`}</td>
                  <td className="mono">{node.watcher ? `${node.watcher.reconnects}` : "—"}</td>
                  <td className="wraps">
                    {aof == null ? "unknown" : persistent ? "AOF on" : `AOF off${save ? `, RDB save "${save}"` : ", no RDB save"}`}
                    {aof != null && lastRead}
                  </td>
                  <td className="wraps">
                    {node.uptimeSec == null || !node.up ? "—" : formatDuration(node.uptimeSec * 1000)} vs {node.longestTtlMs ? formatDuration(node.longestTtlMs) : "—"}
                    {node.restartRisk && (
                      <span className="risk" role="note">
                        <span aria-hidden>⚠ </span>
                        <strong>Restart risk:</strong> restarted without persistence sooner than the longest TTL, so a lock may have been granted twice.
                      </span>
                    )}
                  </td>
                  <td className="mono">
                    {node.clockSkewMs == null ? "—" : `${node.clockSkewMs > 0 ? "+" : ""}${node.clockSkewMs} ms`}
                    {node.clockSkewMs != null && lastRead}
                  </td>
                  <ReplicationCell node={node} />
                </tr>
              );
            })}
          </tbody>
        </table>
      </TableScroll>
      {spread !== null && <p className="muted">Clock spread between nodes (from TIME): {spread} ms.</p>}
      {nodes.map((n) => {
        const count = n.keyNamesNotText ?? 0;
        if (count === 0) return null;
        const [keys, names, them] = count === 1 ? ["1 key", "has a name that is", "it"] : [`${count.toLocaleString("en")} keys`, "have names that are", "them"];
        return (
          <p key={`${n.deployment}:${n.id}`} className="warn-text" role="note">
            <span aria-hidden>⚠ </span>
            {`${multi ? `${n.deployment ?? ""} ${n.id}` : n.id}: ${keys} under the lock patterns ${names} not UTF-8 text: the console cannot show or release ${them} (the console's log names one).`}
          </p>
        );
      })}
      {nodes.map((n) => {
        const ranges = n.unservedSlots ?? [];
        if (ranges.length === 0) return null;
        const slots = ranges.map(([from, to]) => (from === to ? `${from}` : `${from}–${to}`)).join(", ");
        return (
          <p key={`unserved:${n.deployment}:${n.id}`} className="warn-text" role="note">
            <span aria-hidden>⚠ </span>
            {`${multi ? `${n.deployment ?? ""} ${n.id}` : n.id}: no primary serves the slots ${slots} (a shard lost, no replica promoted). The cluster serves the others; the locks in these slots are shown as last read, marked unreadable, until a primary serves them again.`}
          </p>
        );
      })}
      {nodes.map((n) => {
        const refused = n.refusedPatterns ?? [];
        if (refused.length === 0) return null;
        const globs = [...new Set(refused.map((r) => `\`${r.glob}\``))];
        const rules = [...new Set(refused.map((r) => `\`${r.rule}\``))];
        return (
          <p key={`refused:${n.deployment}:${n.id}`} className="warn-text" role="note">
            <span aria-hidden>⚠ </span>
            <MessageText
              text={`${multi ? `${n.deployment ?? ""} ${n.id}` : n.id} does not let the console's Redis user watch the lock ${globs.length === 1 ? "pattern" : "patterns"} ${globs.join(", ")}: ${globs.length === 1 ? "its" : "their"} locks are not read on this node. Add ${rules.join(" and ")} to that user's ACL on the node; the console tries again every 30 s.`}
            />
          </p>
        );
      })}
    </section>
  );
}
