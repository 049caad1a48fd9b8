import type { HolderIdentity } from "./identity.ts";

/** How one node answered one round of a script. */
export interface NodeVote {
  /** Position of the node's client in the array given to the engine. */
  index: number;
  /**
   * for: did it; against: refused (the resource is held, or not ours); error: failed or timed out;
   * pending: had not answered when the round was already decided by the others.
   */
  vote: "for" | "against" | "error" | "pending";
  error?: Error;
}

/** A node that refused because a resource is held, with what it holds. */
export interface HeldBy {
  index: number;
  resource: string;
  /** The value held, null when the node could not read it (e.g. the key is not a string). */
  value: string | null;
  /** Decoded from the value when an engine made it; null for foreign values. */
  holder: HolderIdentity | null;
  /** Remaining TTL on that node, -1 if none, null if unknown. */
  pttlMs: number | null;
}

/** "Taken": a quorum could not be reached because other holders hold the resource(s). */
export class ResourceHeldError extends Error {
  constructor(
    readonly resources: readonly string[],
    readonly heldBy: readonly HeldBy[],
    readonly votes: readonly NodeVote[],
    readonly attempts: number,
  ) {
    const first = heldBy[0];
    const who = first?.holder ? ` by ${first.holder.label ?? "?"}@${first.holder.host ?? "?"}:${first.holder.pid ?? "?"}` : "";
    super(`Resource ${JSON.stringify(first?.resource ?? resources[0])} is held${who} (after ${attempts} attempt${attempts === 1 ? "" : "s"})`);
    this.name = "ResourceHeldError";
  }
}

/**
 * "Broken": too few nodes answered for a quorum, or too few agreed while too few refused to tell that the lock
 * is gone (an extension: some nodes still hold it, others do not, others failed), or they answered too slowly
 * for the lock to have any validity left (`reason: "too-slow"`). The message names every node that did not
 * agree, and why.
 */
export class NodesFailedError extends Error {
  constructor(
    readonly resources: readonly string[],
    readonly votes: readonly NodeVote[],
    readonly quorum: number,
    readonly attempts: number,
    readonly reason: "errors" | "too-slow" = "errors",
  ) {
    let agreed = 0;
    let answered = 0;
    const why: string[] = [];
    for (const v of votes) {
      if (v.vote === "for") agreed += 1;
      if (v.vote === "for" || v.vote === "against") answered += 1;
      if (v.vote === "against") why.push(`node ${v.index}: refused`);
      else if (v.vote === "error") why.push(`node ${v.index}: ${v.error?.message ?? "failed"}`);
      else if (v.vote === "pending") why.push(`node ${v.index}: had not answered when the round was decided`);
    }
    const detail = why.length > 0 ? ` (${why.join("; ")})` : "";
    super(
      reason === "too-slow"
        ? `The nodes answered too slowly: no validity left (after ${attempts} attempt${attempts === 1 ? "" : "s"})`
        : answered < quorum
          ? `Only ${answered} of ${votes.length} nodes answered, quorum is ${quorum}${detail}`
          : `Only ${agreed} of ${votes.length} nodes agreed, quorum is ${quorum}${detail}`,
    );
    this.name = "NodesFailedError";
  }
}

/** What one node could tell about the fences of a fenced acquisition's resources. */
export interface FenceNodeEvidence {
  index: number;
  /**
   * trusted: it answered with its fence marker (it kept its fences); untrusted: it answered without one (it
   * came back empty, or was never seeded), so its fences do not count; damaged: a `fence:` key holds
   * something that is not a decimal fence; error: it failed or timed out; pending: no answer yet.
   */
  state: "trusted" | "untrusted" | "damaged" | "error" | "pending";
  /** The highest fence it reported, when it answered. */
  fence: string | null;
  error?: Error;
}

/**
 * A fenced acquisition could not be sure its fence is higher than every fence handed out before, so it
 * handed out none (and released what it had taken). `reason`: `untrusted`, fewer than a quorum of nodes
 * that answered kept their fences (see docs/engine.md for the remedy); `commit`, the new fence could not be
 * recorded on a quorum of such nodes; `damaged`, a `fence:` key holds something that is not a fence.
 */
export class FenceUnavailableError extends Error {
  constructor(
    readonly resources: readonly string[],
    readonly reason: "untrusted" | "commit" | "damaged",
    readonly nodes: readonly FenceNodeEvidence[],
    readonly quorum: number,
    readonly attempts: number,
  ) {
    const trusted = nodes.filter((n) => n.state === "trusted").length;
    const detail = nodes
      .filter((n) => n.state !== "trusted")
      .map((n) => `node ${n.index}: ${n.state === "error" ? (n.error?.message ?? "failed") : n.state}`)
      .join("; ");
    const what =
      reason === "commit"
        ? `the fence was recorded on ${trusted} node(s) that kept their fences, quorum is ${quorum}`
        : reason === "damaged"
          ? "a fence key holds something that is not a fence"
          : `only ${trusted} of ${nodes.length} nodes can vouch for their fences, quorum is ${quorum}`;
    super(`No fence for ${JSON.stringify(resources)} can be issued safely: ${what}${detail ? ` (${detail})` : ""}`);
    this.name = "FenceUnavailableError";
  }
}

/** The lock is no longer held on a quorum: it expired, or another holder or an operator took it. */
export class LockLostError extends Error {
  constructor(
    readonly resources: readonly string[],
    readonly value: string,
    readonly votes: readonly NodeVote[],
    message = `Lock on ${JSON.stringify(resources)} is no longer held`,
  ) {
    super(message);
    this.name = "LockLostError";
  }
}

/** An operator (or any `forceRelease` caller) deleted the lock. */
export class LockRevokedError extends LockLostError {
  constructor(resources: readonly string[], value: string, readonly resource: string) {
    super(resources, value, [], `Lock on ${JSON.stringify(resource)} was force-released`);
    this.name = "LockRevokedError";
  }
}

/** `extend()` on a lock whose validity has already run out: extending it could extend someone else's. */
export class LockExpiredError extends Error {
  constructor(readonly resources: readonly string[], readonly expiredForMs: number) {
    super(`Lock on ${JSON.stringify(resources)} expired ${Math.round(expiredForMs)} ms ago and cannot be extended`);
    this.name = "LockExpiredError";
  }
}

/** `acquire()` stopped waiting because its signal aborted; `cause` is the signal's reason. */
export class AcquireAbortedError extends Error {
  constructor(readonly resources: readonly string[], readonly attempts: number, cause: unknown) {
    super(`Acquisition of ${JSON.stringify(resources)} aborted after ${attempts} attempt${attempts === 1 ? "" : "s"}`, { cause });
    this.name = "AbortError";
  }
}

/** A node did not answer within the per-node timeout; counted as that node's failed vote. */
export class NodeTimeoutError extends Error {
  constructor(readonly index: number, readonly timeoutMs: number) {
    super(`Node ${index} did not answer within ${timeoutMs} ms`);
    this.name = "NodeTimeoutError";
  }
}

/**
 * A node's connection dropped while a release (or `forceRelease`) was out, and its answer said nothing was
 * deleted: the client sent the script again once it reconnected, and that second run cannot tell whether the
 * first one deleted the lock (its answer was lost with the connection) or whether the lock was gone before.
 * Counted as that node's failed vote (`forceRelease`: its `error` result), never as a sign that the lock was lost.
 */
export class AnswerLostError extends Error {
  constructor(readonly index: number) {
    super(`Node ${index}'s connection dropped while the release was out; the answer that came is of the release sent again, which cannot tell whether the first one deleted the lock`);
    this.name = "AnswerLostError";
  }
}

/** The naive lock's release found a value that is not ours: the lock expired and maybe changed hands. */
export class NaiveLockLostError extends Error {
  constructor(readonly resource: string, readonly token: string, readonly found: string | null) {
    super(`Lock ${JSON.stringify(resource)} is no longer ours (${found === null ? "absent" : "held by another value"})`);
    this.name = "NaiveLockLostError";
  }
}

/** The naive lock could not be taken before `timeoutMs`. */
export class NaiveLockTimeoutError extends Error {
  constructor(readonly resource: string, readonly attempts: number, readonly holder: string | null) {
    super(`Lock ${JSON.stringify(resource)} not acquired after ${attempts} attempts`);
    this.name = "NaiveLockTimeoutError";
  }
}

export const toError = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

/**
 * A lock over several resources on a Redis Cluster client whose resources the cluster puts in different
 * hash slots (one script cannot touch them together), or a resource whose companion keys cannot follow it
 * into its slot (a `}` outside any hash tag). Thrown before anything is sent.
 */
export class CrossSlotError extends TypeError {
  constructor(
    readonly resources: readonly string[],
    /** The hash slot of each resource, in order. */
    readonly slots: readonly number[],
  ) {
    const named = resources.map((r, i) => `${JSON.stringify(r)} (slot ${slots[i]})`).join(", ");
    super(
      new Set(slots).size > 1
        ? `Resources ${named} are in different hash slots of the cluster: a lock over several resources on a cluster needs them in one slot; give them a common hash tag, e.g. "{orders}:a" and "{orders}:b"`
        : `Resource ${named} has a \`}\` outside a hash tag, so the lock's companion keys cannot be placed in its slot on a cluster; rename it or give it a hash tag, e.g. "{orders}:a"`,
    );
    this.name = "CrossSlotError";
  }
}
