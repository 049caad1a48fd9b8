import type { WatcherStatus } from "./types";

/** How a node is shown in the header: one pill. */
export interface PillNode {
  id: string;
  /** What the pill is called to a screen reader and in its title: the node id, with its deployment where the console watches several (ids repeat across them). */
  name: string;
  up: boolean;
  /** How it is not up (`notUpText`). */
  notUp: string;
  /** Not up because its locks are still being read: shown amber, not red. */
  reading?: boolean;
  notifications: WatcherStatus["notifications"];
  /**
   * Up, but some of its locks are not watched (lock patterns its ACL user refuses, a cluster's unserved slots), or it
   * is a read-only replica now: shown amber.
   */
  partial?: boolean;
  title: string;
  /**
   * What a screen reader reads for the pill (its `aria-label`): the node, up or how not, and, where its dot is amber
   * though it is up, why, as its title says it.
   */
  label: string;
}

/** A node that is a replica now, as the header and the nodes panel name it. */
export function replicaText(replica: NonNullable<WatcherStatus["readOnly"]>): string {
  return `a ${replica.writable ? "writable" : "read-only"} replica${replica.primary === null ? "" : ` of ${replica.primary}`}`;
}

/** What a replica means for the locks on it. */
export function replicaConsequence(replica: NonNullable<WatcherStatus["readOnly"]>): string {
  return replica.writable
    ? "a lock written there stays there, never seen by its primary or the primary's clients, and the console releases nothing there"
    : "no lock can be taken or released there";
}

/**
 * How a node whose readings do not count is shown: still reading its locks (start-up, a reconnect: not down),
 * not answering, or down.
 */
export function notUpText(node: Pick<WatcherStatus, "reading" | "answering">): string {
  return node.reading ? "reading its locks" : node.answering ? "down" : "not answering";
}

/** A node that answers but takes no write (a read-only replica): it counts for no quorum, as no lock can be taken there. */
const readOnlyNow = (n: Pick<WatcherStatus, "up" | "readOnly">): boolean => n.up && n.readOnly !== undefined && n.readOnly !== null && !n.readOnly.writable;

/** The header's pills, overall status and summary from the live stream's node statuses. */
export function nodePills(statuses: readonly WatcherStatus[], nodesUp?: number): { nodes: PillNode[]; status: "ok" | "degraded" | "down"; summary: string } {
  const total = statuses.length;
  const up = nodesUp ?? statuses.filter((n) => n.up).length;
  const readOnly = statuses.filter(readOnlyNow).length;
  // Each deployment's quorum is a majority of its own nodes: where the console watches several, a majority of
  // all of them says nothing (three of five nodes up is no quorum for a Redlock set that has one of its three). A
  // read-only replica answers (it is up: its locks are shown) but takes no lock: it counts for no quorum.
  const deployments = new Map<string, WatcherStatus[]>();
  for (const n of statuses) deployments.set(n.deployment ?? "", [...(deployments.get(n.deployment ?? "") ?? []), n]);
  const several = deployments.size > 1;
  const majority = (count: number) => Math.floor(count / 2) + 1;
  const lostOn = several ? [...deployments].filter(([, own]) => own.filter((n) => n.up && !readOnlyNow(n)).length < majority(own.length)).map(([name]) => name) : [];
  const downOn = several ? [...deployments].filter(([, own]) => own.filter((n) => n.up).length < majority(own.length)).map(([name]) => name) : [];
  const quorumOk = several ? lostOn.length === 0 : up - readOnly >= majority(total);
  const answering = several ? downOn.length === 0 : up >= majority(total);
  const nodes = statuses.map((n): PillNode => {
    const notUp = notUpText(n);
    // Why a node that is up is not wholly well: its title and what a screen reader reads of it both say it.
    const reasons = [
      n.refusedPatterns?.length ? `refuses the console the lock patterns ${[...new Set(n.refusedPatterns.map((r) => r.glob))].join(", ")}` : null,
      n.unservedSlots ? `${n.unservedSlots} ${n.unservedSlots === 1 ? "slot" : "slots"} served by no primary (their locks unreadable)` : null,
      n.readOnly ? `${replicaText(n.readOnly)} now: ${replicaConsequence(n.readOnly)}` : null,
    ].filter((r) => r !== null);
    const name = several ? `${n.deployment ?? ""} ${n.nodeId}` : n.nodeId;
    return {
      id: n.nodeId,
      name,
      up: n.up,
      notUp,
      reading: n.reading !== undefined,
      notifications: n.notifications,
      partial: reasons.length > 0,
      title: `${name} · ${n.up ? `${n.latencyMs ?? "?"} ms round trip` : notUp} · notifications ${n.notifications}${reasons.map((r) => ` · ${r}`).join("")}`,
      label: pillLabel(name, n.up, notUp, n.notifications, reasons),
    };
  });
  const degraded = nodes.some((n) => !n.up || n.notifications === "unavailable" || n.partial);
  // A node whose locks are still being read (start-up, a reconnect) is not down: it is not counted yet.
  const reading = statuses.filter((n) => !n.up && n.reading).length;
  // Several deployments, as /api/health says them: down only when every one lost its quorum (the others' locks are
  // still shown), degraded when any is not ok.
  // (Down is fewer than a quorum answering; a quorum lost to read-only replicas is degraded: their locks are shown.)
  const status =
    reading > 0 ? "degraded" : several && downOn.length > 0 ? (downOn.length === deployments.size ? "down" : "degraded") : !answering ? "down" : degraded || !quorumOk ? "degraded" : "ok";
  const quorum = quorumOk ? "ok" : several ? `lost on ${lostOn.join(", ")}` : "lost";
  const upText = `${up}/${total} up${readOnly > 0 ? `, ${readOnly} read-only` : ""}`;
  const summary = reading > 0 ? `${upText} · reading the locks of ${reading} ${reading === 1 ? "node" : "nodes"}` : `${upText} · quorum ${quorum} · ${status}`;
  return { nodes, status, summary };
}

/**
 * What a screen reader reads for a node's pill: the node, up or how not, and, where its dot is amber though it is
 * up, why (notifications unavailable, then `reasons`).
 */
export function pillLabel(name: string, up: boolean, notUp: string, notifications: string, reasons: readonly string[] = []): string {
  if (!up) return `${name} ${notUp}`;
  const why = [...(notifications === "unavailable" ? ["notifications unavailable (periodic SCAN)"] : []), ...reasons];
  return `${name} up${why.length > 0 ? `, degraded: ${why.join("; ")}` : ""}`;
}
