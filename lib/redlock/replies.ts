// How the engine reads the nodes' answers: the acquire script's and the plain first try's, commit-fence's
// and the release script's replies, and what a round of them says (votes, holders, fences, split votes).
import type { FenceUnavailableError, FenceNodeEvidence, HeldBy, NodeVote } from "./errors.ts";
import { decodeLockValue } from "./identity.ts";
import type { NodeOutcome } from "./round.ts";

/**
 * @internal What a node told a fenced acquisition about the resources' fences: its highest one, and whether
 * it has its fence marker (it kept its fences: see reseed.ts).
 */
export interface FenceKnowledge {
  fence: string;
  marked: boolean;
}

/**
 * @internal One node's answer to the acquire script, or to the plain first try ("unchecked": SET NX was
 * refused there; the acquire script runs next on that node and answers with one of the others). `known`:
 * the node's fence knowledge (fenced acquisitions only, on every reply, null otherwise). "damaged": a fence
 * key of resource `index` holds something that is not a fence (nothing was taken there).
 */
export type AcquireReply =
  | { kind: "granted"; known: FenceKnowledge | null }
  | { kind: "held"; index: number; value: string | null; pttlMs: number; known: FenceKnowledge | null }
  | { kind: "queued"; index: number; head: string; known: FenceKnowledge | null }
  | { kind: "damaged"; index: number; known: null }
  | { kind: "unchecked"; known: null };

export const GRANTED: AcquireReply = Object.freeze({ kind: "granted", known: null });
export const UNCHECKED: AcquireReply = Object.freeze({ kind: "unchecked", known: null });

const FENCE_PATTERN = /^(0|[1-9][0-9]{0,39})$/;

/** The fence knowledge at `at` in a fenced reply (a fence the script validated, and the marker or nil). */
function knowledgeAt(reply: unknown[], at: number): FenceKnowledge | null {
  if (reply.length <= at) return null;
  const fence = reply[at];
  if (typeof fence !== "string" || !FENCE_PATTERN.test(fence)) throw new Error(`Unexpected fence in the acquire script's reply: ${String(fence)}`);
  return { fence, marked: typeof reply[at + 1] === "string" };
}

export function parseSetReply(raw: unknown): AcquireReply {
  if (raw === "OK") return GRANTED;
  if (raw === null) return UNCHECKED;
  throw new Error(`Unexpected reply to SET NX PX: ${JSON.stringify(raw)}`);
}

export function parseAcquireReply(raw: unknown): AcquireReply {
  // The common reply (taken, unfenced) is the integer 1: no object is made for it.
  if (raw === 1) return GRANTED;
  if (!Array.isArray(raw)) throw new Error(`Unexpected reply from the acquire script: ${String(raw)}`);
  const reply = raw as unknown[];
  switch (reply[0]) {
    case 1:
      return { kind: "granted", known: knowledgeAt(reply, 1) };
    case 0:
      return {
        kind: "held",
        index: Number(reply[1]) - 1,
        value: typeof reply[2] === "string" ? reply[2] : null,
        pttlMs: typeof reply[3] === "number" ? reply[3] : -2,
        known: knowledgeAt(reply, 4),
      };
    case 2:
      return { kind: "queued", index: Number(reply[1]) - 1, head: String(reply[2]), known: knowledgeAt(reply, 3) };
    case 3:
      return { kind: "damaged", index: Number(reply[1]) - 1, known: null };
    default:
      throw new Error(`Unexpected reply from the acquire script: ${String(reply[0])}`);
  }
}

/** @internal */
export const isGranted = (reply: AcquireReply): boolean => reply.kind === "granted";
/** @internal A fenced round may resolve early on a quorum of nodes that granted and kept their fences. */
export const isGrantedAndMarked = (reply: AcquireReply): boolean => reply.kind === "granted" && reply.known !== null && reply.known.marked;
export const parseNumber = (raw: unknown): number => {
  if (typeof raw !== "number") throw new Error(`Unexpected reply: ${String(raw)}`);
  return raw;
};

/**
 * @internal Why an attempt failed. `fence`: a fenced attempt that had a quorum but no fence it could hand out safely
 * (it becomes the error when it is the last attempt, or at once when `fatal`: no retry can help).
 */
export type Failure = {
  reason: "conflict" | "nodes-failed" | "validity";
  votes: NodeVote[];
  fence?: FenceUnavailableError;
  fatal?: boolean;
};

/** @internal One node's answer to commit-fence: it holds the lock (with the fence in its value); it has its marker. */
export interface CommitReply {
  held: boolean;
  marked: boolean;
  damaged: boolean;
}

export function parseCommitReply(raw: unknown): CommitReply {
  if (!Array.isArray(raw)) throw new Error(`Unexpected reply from the commit-fence script: ${String(raw)}`);
  const reply = raw as unknown[];
  return { held: reply[0] === 1, marked: typeof reply[1] === "string", damaged: reply[0] === -1 };
}

/** @internal */
export const heldAndMarked = (reply: CommitReply): boolean => reply.held && reply.marked;

/** @internal One node's answer to the release script. */
export interface ReleaseReply {
  /** How many of the resources this node deleted. */
  deleted: number;
  /** Someone was waiting for one of them: the release handed it over or woke the head waiter. */
  waited: boolean;
}

/** Per node, what a fenced round's replies told about its fences. */
export function evidenceOf(outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>): FenceNodeEvidence[] {
  return outcomes.map((o, index): FenceNodeEvidence => {
    if (o.state === "error") return { index, state: "error", fence: null, error: o.error };
    if (o.state === "pending") return { index, state: "pending", fence: null };
    if (o.value.kind === "damaged") return { index, state: "damaged", fence: null };
    const known = o.value.known;
    return { index, state: known?.marked ? "trusted" : "untrusted", fence: known?.fence ?? null };
  });
}

/** No other holder has the lock on a quorum of nodes: contenders split a free lock. */
export function isSplitVote(outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>, quorum: number): boolean {
  const holders = new Map<string, number>();
  for (const o of outcomes) {
    if (o.state !== "ok") continue;
    if (o.value.kind === "held" && o.value.value !== null) {
      const count = (holders.get(o.value.value) ?? 0) + 1;
      if (count >= quorum) return false;
      holders.set(o.value.value, count);
    }
  }
  return true;
}

export function countGranted(outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>): number {
  let granted = 0;
  for (const o of outcomes) if (o.state === "ok" && o.value.kind === "granted") granted += 1;
  return granted;
}

export const PENDING_OUTCOME: NodeOutcome<AcquireReply> = Object.freeze({ state: "pending" as const });
export const GRANTED_OUTCOME: NodeOutcome<AcquireReply> = Object.freeze({ state: "ok" as const, value: GRANTED });

export function shortestPttl(outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>): number {
  let shortest = -1;
  for (const o of outcomes) {
    if (o.state === "ok" && o.value.kind === "held" && o.value.pttlMs >= 0 && (shortest < 0 || o.value.pttlMs < shortest)) shortest = o.value.pttlMs;
  }
  return shortest;
}

export function heldByOf(resources: readonly string[], outcomes: ReadonlyArray<NodeOutcome<AcquireReply>>): HeldBy[] {
  const heldBy: HeldBy[] = [];
  outcomes.forEach((o, index) => {
    if (o.state !== "ok" || o.value.kind === "granted") return;
    // ("unchecked" never gets here: the acquire script answered for those nodes.)
    const resource = ("index" in o.value ? resources[o.value.index] : undefined) ?? resources[0]!;
    if (o.value.kind === "held") {
      heldBy.push({
        index,
        resource,
        value: o.value.value,
        holder: o.value.value === null ? null : decodeLockValue(o.value.value),
        pttlMs: o.value.pttlMs === -2 ? null : o.value.pttlMs,
      });
    } else {
      heldBy.push({ index, resource, value: null, holder: null, pttlMs: null });
    }
  });
  return heldBy;
}
