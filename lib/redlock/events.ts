/** In-process events of a `Redlock` instance, for metrics. Payloads are built only when someone listens. */
export interface RedlockEvents {
  acquired: [{ resources: readonly string[]; fence: string | null; waitMs: number; attempts: number; validityMs: number }];
  /** `validityMarginMs`: validity left at release (negative: released after it had expired). */
  released: [{ resources: readonly string[]; heldMs: number; validityMarginMs: number }];
  extended: [{ resources: readonly string[]; ttlMs: number; validityMs: number }];
  "extend-failed": [{ resources: readonly string[]; error: Error }];
  /**
   * An extension found the lock missing on these nodes (they came back empty after a restart, or their key
   * expired early) while a quorum still held it, and wrote it back there.
   */
  restored: [{ resources: readonly string[]; nodes: readonly number[] }];
  /** The lock is gone before its holder released it: expired, taken, deleted or force-released. */
  lost: [{ resources: readonly string[]; reason: Error }];
  /**
   * `validity`: a quorum granted but too slowly for any validity to be left. `nodes-failed`: too few nodes
   * answered, or (fenced) too few of them could vouch for the fences.
   */
  "attempt-failed": [{ resources: readonly string[]; attempt: number; reason: "conflict" | "nodes-failed" | "validity" }];
  "node-error": [{ index: number; error: Error; operation: "acquire" | "commit-fence" | "release" | "extend" | "leave-queue" | "subscribe" }];
}
