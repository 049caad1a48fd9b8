/**
 * Decisions about one lock node as the live view watches it, kept pure: each takes what the console knew,
 * what it just read and the time, and returns what it knows now. The watcher around them owns the
 * connections and timers.
 */

/** What INFO server said, and what the console concluded about restarts. */
export interface NodeRunFacts {
  /** The server's run id (changes on every start), null until read. */
  runId: string | null;
  uptimeSec: number | null;
  /** Epoch ms when `uptimeSec` was read. */
  uptimeReadAt: number;
  /** Epoch ms when the node started again while this console watched it; null when no restart was witnessed. */
  restartedAt: number | null;
}

export const INITIAL_RUN_FACTS: NodeRunFacts = Object.freeze({ runId: null, uptimeSec: null, uptimeReadAt: 0, restartedAt: null });

/**
 * A new INFO server reading. A run id other than the one read before, of a server that started after that
 * reading, is a restart the console witnessed (a restart with no write in between is invisible to the keys,
 * and uptime alone cannot tell one that happened before the console started watching). `replaced`: another run
 * id of a server that was already running, another server behind the same connection (a Sentinel failover's
 * promoted replica, which the console can reach before the failover is announced).
 */
export function nextRunFacts(
  prev: NodeRunFacts,
  reading: { runId: string | null; uptimeSec: number | null },
  now: number,
): { facts: NodeRunFacts; restarted: boolean; replaced: boolean } {
  const changed = prev.runId !== null && reading.runId !== null && reading.runId !== prev.runId;
  const startedAt = now - (reading.uptimeSec ?? 0) * 1000;
  // A server that was already running when the previous one was last read is another server, not a restart:
  // a Sentinel failover's promoted replica (uptime is whole seconds: a second of slack).
  const restarted = changed && startedAt + 1000 >= prev.uptimeReadAt;
  const restartedAt = restarted ? startedAt : changed ? null : prev.restartedAt;
  return {
    facts: { runId: reading.runId ?? prev.runId, uptimeSec: reading.uptimeSec, uptimeReadAt: now, restartedAt },
    restarted,
    replaced: changed && !restarted,
  };
}

/** The node's uptime now, counted on from the last reading; null before one. */
export function uptimeMsAt(facts: NodeRunFacts, now: number): number | null {
  return facts.uptimeSec === null ? null : facts.uptimeSec * 1000 + Math.max(0, now - facts.uptimeReadAt);
}

/**
 * A node without persistence that restarted sooner ago than the longest TTL seen on it forgot locks that may
 * still be valid: one can be granted to a second client while the first still holds it. A restart the console
 * witnessed (the run id changed) is one; so is a start before the console began watching (a deploy or a host
 * reboot restarts both) when some lock held now was acquired before the node started (`oldestLockAt`): the
 * node came up during that lock's life. (Nodes started together with the console, before any lock, are not.)
 */
export function restartRisk(facts: NodeRunFacts, persistent: boolean, longestTtlMs: number, now: number, oldestLockAt: number | null = null): boolean {
  if (persistent || longestTtlMs <= 0) return false;
  const uptime = uptimeMsAt(facts, now) ?? (facts.restartedAt === null ? null : now - facts.restartedAt);
  if (uptime === null || uptime >= longestTtlMs) return false;
  if (facts.restartedAt !== null) return true;
  // Uptime is whole seconds: the node started up to a second before `now - uptime`. Only a lock acquired before
  // the earliest start is surely older than the node; one taken in its first second (an application and its
  // Redis started together) would otherwise page for the lock's whole TTL.
  return oldestLockAt !== null && oldestLockAt < now - uptime - 1000;
}

/**
 * Whether a node answers. It stops answering when a command sent to it has waited longer than the per-node
 * deadline (a frozen or overloaded server keeps the connection open and answers nothing); it answers again
 * only once a command succeeds after that (a command that timed out proves nothing, and leaves nothing
 * waiting).
 */
export function nextAnswering(
  prev: { answering: boolean; since: number },
  seen: { oldestWaitingSince: number | null; lastAnswerAt: number | null },
  now: number,
  deadlineMs: number,
): { answering: boolean; since: number } {
  if (seen.oldestWaitingSince !== null && now - seen.oldestWaitingSince > deadlineMs) return prev.answering ? { answering: false, since: now } : prev;
  if (prev.answering) return prev;
  return seen.lastAnswerAt !== null && seen.lastAnswerAt > prev.since ? { answering: true, since: now } : prev;
}

export type NotificationStatus = "on" | "enabled-by-console" | "unavailable";

/**
 * The outcome of one check of `notify-keyspace-events`: `missing` the flags to add ("" when none), or
 * `refused` when CONFIG could not be read or set. `lost` is true when notifications the watcher relied on
 * were off for a while (someone switched them off at runtime): what changed meanwhile was never announced,
 * so the node must be reconciled.
 */
export function nextNotificationStatus(
  prev: { status: NotificationStatus; enabledByConsole: boolean; checked: boolean },
  check: { refused: true } | { refused: false; missing: string; setOk: boolean },
): { status: NotificationStatus; enabledByConsole: boolean; lost: boolean } {
  const relied = prev.checked && prev.status !== "unavailable";
  if (check.refused) return { status: "unavailable", enabledByConsole: prev.enabledByConsole, lost: relied };
  if (check.missing === "") return { status: prev.enabledByConsole ? "enabled-by-console" : "on", enabledByConsole: prev.enabledByConsole, lost: false };
  if (!check.setOk) return { status: "unavailable", enabledByConsole: prev.enabledByConsole, lost: relied };
  return { status: "enabled-by-console", enabledByConsole: true, lost: relied };
}
