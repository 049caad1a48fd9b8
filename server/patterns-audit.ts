import "server-only";
import { getAuditStore } from "./audit/current";
import type { AuditEntry } from "./audit/types";
import { setPatternsAuditor, type PatternEntry } from "./patterns";

const listed = (patterns: readonly PatternEntry[]) => patterns.map((p) => (p.scope ? `${p.glob} (${p.scope})` : p.glob)).join(", ");

/**
 * Lock-pattern changes go to the same audit log as force releases, through its public API: the intent must be
 * durable before the change applies (a refused intent refuses the change), then its outcome follows. The
 * entry's `resource` names the new list and `reason` carries the operator's words with the list it replaced.
 */
export function registerPatternsAuditor(): void {
  setPatternsAuditor({
    async recordIntent(change) {
      const entry: AuditEntry = {
        id: change.id,
        at: change.at,
        actor: change.actor,
        role: change.role,
        action: "patterns-changed",
        // Whole, however long (at most 32 patterns of 200 characters): the entry is how an operator later finds
        // which pattern a change took away.
        resource: `patterns: ${listed(change.patterns)}`,
        token: null,
        holder: null,
        reason: `${change.reason} (was: ${listed(change.previous)})`,
        outcome: "pending",
        nodes: [],
        ip: change.ip,
        userAgent: change.userAgent,
      };
      await getAuditStore().recordIntent(entry);
    },
    async recordOutcome(id, outcome) {
      // The audit log's outcomes name a release's end; an applied change is "released" in its closed set.
      await getAuditStore().recordOutcome(id, outcome === "applied" ? "released" : "failed", [], Date.now());
    },
  });
}
