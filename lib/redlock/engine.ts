import type { RedlockClient } from "./client.ts";
import type { DropClock } from "./drops.ts";
import type { NodeVote } from "./errors.ts";
import type { RedlockEvents } from "./events.ts";
import type { LockOwner } from "./lock.ts";
import type { Notifications } from "./notifications.ts";
import type { AcquireReply, CommitReply, ReleaseReply } from "./replies.ts";
import type { NodeOutcome, RoundOptions } from "./round.ts";
import type { ResolvedSettings } from "./settings.ts";

/** @internal Background re-seeds of nodes that lost their fences (reseed.ts's FenceRepairs). */
export interface FenceRepairer {
  /** Re-seed node `index` soon (it answered without its fence marker). */
  schedule(index: number): void;
  /** Seed and mark every node (none has a marker); rejects with FenceUnavailableError when one fails. */
  bootstrap(resources: readonly string[]): Promise<unknown>;
  /** Stops background repairs from being tried again (the engine is closing). */
  stop(): void;
}

// The engine core is a leaf: it imports the operations' reply types and nothing of the operations
// themselves, which all import it.

/** @internal What the operations (acquire, release, extend, using) share from their `Redlock`. */
export interface Engine {
  readonly clients: readonly RedlockClient[];
  /** When each client's connection last dropped (see `dropClock`), in the order of `clients`. */
  readonly drops: readonly DropClock[];
  readonly settings: ResolvedSettings;
  readonly quorum: number;
  /** A client is a Redis Cluster client: every resource of one lock must be in one hash slot. */
  readonly clustered: boolean;
  /** `encodeIdentityTail(host, label)` for the instance's label, computed once. */
  readonly identityTail: string;
  /** The first characters of every waiter id this instance makes (see `randomId`). */
  readonly instanceTag: string;
  readonly notifications: Notifications;
  readonly owner: LockOwner;
  listening(event: keyof RedlockEvents): boolean;
  emit<K extends keyof RedlockEvents>(event: K, ...payload: RedlockEvents[K]): void;
  nodeError(index: number, error: Error, operation: RedlockEvents["node-error"][0]["operation"]): void;
  /** Late answers of acquire / release rounds, made once per engine (rounds are the hot path). */
  readonly onLateAcquire: NonNullable<RoundOptions<AcquireReply>["onLate"]>;
  readonly onLateRelease: NonNullable<RoundOptions<ReleaseReply>["onLate"]>;
  /** The acquire round's early-resolution rule (on a quorum of grants), made once per engine. */
  readonly acquireEarly: NonNullable<RoundOptions<AcquireReply>["early"]>;
  /** Fenced: on a quorum of grants from nodes that kept their fences. */
  readonly fencedAcquireEarly: NonNullable<RoundOptions<AcquireReply>["early"]>;
  /** Commit-fence: on a quorum of nodes that hold the lock and kept their fences. */
  readonly commitEarly: NonNullable<RoundOptions<CommitReply>["early"]>;
  /** Background re-seeds of nodes that lost their fences. */
  readonly fenceRepairs: FenceRepairer;
  /** The release round's early-resolution rule for one resource (deleted = 1 is a vote for). */
  readonly releaseEarly: NonNullable<RoundOptions<ReleaseReply>["early"]>;
  /** `acquireModes(settings)`, built once per engine. */
  readonly acquireModes: readonly string[];
}

/** Validity left after a round that started at `roundStart`: TTL minus elapsed time minus drift. */
export function driftMs(settings: ResolvedSettings, ttlMs: number): number {
  // 2 ms: Redis expires keys with 1 ms precision, on top of the configured clock drift.
  return Math.round(settings.driftFactor * ttlMs) + 2;
}

export function votesOf<T>(outcomes: ReadonlyArray<NodeOutcome<T>>, isFor: (value: T) => boolean): NodeVote[] {
  return outcomes.map((outcome, index): NodeVote => {
    if (outcome.state === "ok") return { index, vote: isFor(outcome.value) ? "for" : "against" };
    if (outcome.state === "error") return { index, vote: "error", error: outcome.error };
    return { index, vote: "pending" };
  });
}

/**
 * Reports the errors of a round as `node-error` events; `nodes` maps the outcomes to the engine's node
 * indexes when the round ran on some nodes only (see RoundOptions.nodes).
 */
export function reportErrors<T>(
  engine: Engine,
  outcomes: ReadonlyArray<NodeOutcome<T>>,
  operation: RedlockEvents["node-error"][0]["operation"],
  nodes?: readonly number[],
): void {
  if (!engine.listening("node-error")) return;
  outcomes.forEach((outcome, index) => {
    if (outcome.state === "error") engine.nodeError(nodes?.[index] ?? index, outcome.error, operation);
  });
}
