import type { WatcherStatus } from "./types";

/** How a node is shown in the header: one pill. */
export interface PillNode {
  id: string;
  up: boolean;
  /** How it is not up (`notUpText`). */
  notUp: string;
  /** Not up because its locks are still being read: shown amber, not red. */
  reading?: boolean;
  notifications: WatcherStatus["notifications"];
  /** Up, but some of its locks are not watched (lock patterns its ACL user refuses, a cluster's unserved slots): shown amber. */
  partial?: boolean;
  title: string;
}

/**
 * How a node whose readings do not count is shown: still reading its locks (start-up, a reconnect: not down),
 * not answering, or down.
 */
export function notUpText(node: Pick<WatcherStatus, "reading" | "answering">): string {
  return node.reading ? "reading its locks" : node.answering ? "down" : "not answering";
}

/** The header's pills, overall status and summary from the live stream's node statuses. */
export function nodePills(statuses: readonly WatcherStatus[], nodesUp?: number): { nodes: PillNode[]; status: "ok" | "degraded" | "down"; summary: string } {
  const total = statuses.length;
  const up = nodesUp ?? statuses.filter((n) => n.up).length;
  const quorumOk = up >= Math.floor(total / 2) + 1;
  const nodes = statuses.map((n): PillNode => {
    const notUp = notUpText(n);
    const refused = n.refusedPatterns?.length ? ` · refuses the console the lock patterns ${[...new Set(n.refusedPatterns.map((r) => r.glob))].join(", ")}` : "";
    const unserved = n.unservedSlots ? ` · ${n.unservedSlots} ${n.unservedSlots === 1 ? "slot" : "slots"} served by no primary (their locks unreadable)` : "";
    return { id: n.nodeId, up: n.up, notUp, reading: n.reading !== undefined, notifications: n.notifications, partial: refused !== "" || unserved !== "", title: `${n.nodeId} · ${n.up ? `${n.latencyMs ?? "?"} ms round trip` : notUp} · notifications ${n.notifications}${refused}${unserved}` };
  });
  const degraded = nodes.some((n) => !n.up || n.notifications === "unavailable" || n.partial);
  // A node whose locks are still being read (start-up, a reconnect) is not down: it is not counted yet.
  const reading = statuses.filter((n) => !n.up && n.reading).length;
  const status = reading > 0 ? "degraded" : !quorumOk ? "down" : degraded ? "degraded" : "ok";
  const summary = reading > 0 ? `${up}/${total} up · reading the locks of ${reading} ${reading === 1 ? "node" : "nodes"}` : `${up}/${total} up · quorum ${quorumOk ? "ok" : "lost"} · ${status}`;
  return { nodes, status, summary };
}
