import type { FormatScope, LockScope } from "./types";

export interface ScopeEvidence {
  /** The operator's declaration for the pattern the key falls under, if any. */
  declared: LockScope | null;
  /** The format's own scope: single-instance by design, or to be inferred. */
  format: FormatScope;
  /** Configured lock nodes. */
  nodes: number;
  /** Nodes (up) that hold a value for the key now, whichever value (a split vote is still several nodes). */
  holding: number;
  /** The scope this lock read as at its previous sample; null when it is new. */
  previous: LockScope | null;
}

/**
 * Whether a lock is a Redlock over the node set (`quorum`: it needs a majority, and reads `partial` without
 * one) or a lock on one instance by design (`single`: held while its one node holds it). In order:
 * - the operator's declaration for the pattern;
 * - a format that is single-instance by design (Redisson, ShedLock);
 * - with one node, every lock is single;
 * - a key held on two or more nodes is a Redlock (with different values there, one whose vote is split);
 * - a value on one node only is a single-instance lock (the SETNX lock, redis-py) unless it was seen as a
 *   Redlock before: a Redlock that is losing its keys stays `quorum`, so it reads `partial`, not healthy.
 */
export function inferScope(evidence: ScopeEvidence): LockScope {
  if (evidence.declared) return evidence.declared;
  if (evidence.format !== "inferred") return evidence.format;
  if (evidence.nodes <= 1) return "single";
  if (evidence.holding >= 2) return "quorum";
  return evidence.previous === "quorum" ? "quorum" : "single";
}
