/**
 * The audit log's wire shapes: what the API answers and the browser reads. The server's audit store writes and
 * reads these; they live in lib/ so client components can import them without pulling in server code.
 */

/**
 * Where a release ended. `pending`: the intent was recorded and no outcome followed (the console died mid-release).
 * `partial`: deleted on some nodes, while nodes that held it did not confirm, too many for the lock to be over.
 */
export type AuditOutcome = "pending" | "released" | "partial" | "conflict" | "absent" | "failed" | "refused";

/** What one node did with the release. */
export interface AuditNodeResult {
  id: string;
  result: "pending" | "deleted" | "absent" | "mismatch" | "error";
  /** Why the node failed, for `error` only (a Redis error message, never a credential). */
  error?: string;
}

export interface AuditHolder {
  label: string | null;
  host: string | null;
  pid: number | null;
  fence: string | null;
}

/**
 * One operator action, as the contract's `AuditEntry`. `token` is the lock value that was targeted (it
 * names the lock, it grants nothing); the operator's own credentials never appear here.
 */
export interface AuditEntry {
  /** `<epoch ms, 13 digits>-<12 hex>`: unique across console instances and ordered by time as a string. */
  id: string;
  /** Epoch ms on the console's clock when the action started. */
  at: number;
  actor: string;
  role: "viewer" | "operator";
  /** `patterns-changed`: an operator changed the lock patterns (`resource` names the new list, `token` is null). */
  action: "force-release" | "patterns-changed";
  resource: string;
  /** A force release's deployment: the one whose nodes it acted on (the console may watch several). */
  deployment?: string;
  token: string | null;
  holder: AuditHolder | null;
  reason: string;
  outcome: AuditOutcome;
  nodes: AuditNodeResult[];
  ip: string;
  userAgent: string | null;
  /** Epoch ms on the console's clock (as `at`) when the action ended and its outcome was known; absent while pending. */
  finishedAt?: number;
}

export interface AuditFilters {
  /** Substring of the resource, case-insensitive. */
  resource?: string;
  /** Substring of the actor, case-insensitive. */
  actor?: string;
  /**
   * The deployment an entry names, exactly: its force releases. Entries that name none (lock-pattern changes, which
   * apply to every deployment, and releases recorded before deployments were named) are left out.
   */
  deployment?: string;
  /** Epoch ms, inclusive. */
  from?: number;
  /** Epoch ms, exclusive. */
  to?: number;
}

export interface AuditPage {
  entries: AuditEntry[];
  /** Pass as `before` for the next (older) page; null on the last page. */
  next: string | null;
  /** Where the entries came from: the nodes' stream, this console's file when no node answered, or PostgreSQL. */
  source: "stream" | "file" | "postgres";
  /**
   * With `source` "stream": the lock nodes whose stream could not be read, when fewer than a quorum of nodes
   * were read. Entries other console instances wrote may then be missing (they are sure to be on a quorum, not on
   * the nodes read). Absent when a quorum was read.
   */
  missingNodes?: string[];
}

/** `GET /api/audit`'s answer: a page, and the deployments the console watches (in its configuration's order). */
export interface AuditAnswer extends AuditPage {
  deployments: string[];
}
