import "server-only";
import { setTimeout as sleep } from "node:timers/promises";
import { DEFAULT_READ_LIMITS, decodeReading, formatByName, isScriptRefused, readLockKeys, type FormatName, type FormatReading, type NodeReleaseResult } from "@/lib/locks/formats";
import { COMPANION_REFUSED } from "@/lib/locks/formats/lockscope";
import { isNeverLock, lockKeyFilter } from "@/lib/locks/formats/defaults";
import { globMatcher } from "@/lib/locks/glob";
import { prevailingValue } from "@/lib/locks/leading-value";
import { decodeLockValue, keySlot, REVOKE_CHANNEL } from "@lockscope/redlock";
import { slotIn, unservedSlots } from "@/lib/locks/cluster";
import { readReplicationInfo } from "@/lib/locks/replication";
import { getAuditStore } from "./audit/current";
import { AuditNotDurableError } from "./audit/store";
import { newAuditId } from "./audit/records";
import type { AuditEntry, AuditHolder, AuditNodeResult, AuditOutcome } from "./audit/types";
import { clientIp, type Principal } from "./auth";
import { getConfig } from "./config";
import { ApiError, nodeFailureText, refusesKey } from "./errors";
import { peekGlobal } from "./global";
import { whenReady } from "./health";
import { lockReplication } from "./deployments/replication";
import { noteForceRelease, withdrawForceRelease } from "./live";
import { getLogger } from "./logger";
import { counter } from "./metrics";
import { connectionDrops, getDeploymentNodes, quorumOf, type DeploymentNodes, type LockNode } from "./nodes";
import { getPatternStore, type PatternsState } from "./patterns";

export interface ReleaseInput {
  resource: string;
  /** The deployment whose nodes to act on; absent: the only one, or the one that holds the resource. */
  deployment?: string;
  reason: string;
  /** The holder id the operator was looking at (a lock value, a Redisson holder field, a semaphore member); absent: the single holder. */
  token?: string;
  principal: Principal;
  request: Request;
}

export interface ReleaseResult {
  /** The holder was deleted on at least one node. */
  released: true;
  /** `partial`: nodes that held it did not confirm the delete, too many for the lock to be over (see `outcomeOf`). */
  outcome: "released" | "partial";
  deployment: string;
  format: FormatName;
  nodes: Array<{ id: string; result: AuditNodeResult["result"] }>;
  /** Who was told: only this engine's holders hear a revocation; `waiters`: a wake message went out to the library's waiters. */
  notified: { holder: boolean; waiters: boolean };
  auditId: string;
  /** False when the audit store did not take the outcome: the entry reads `pending` until the console's retries get it in. */
  outcomeRecorded: boolean;
  /**
   * Where the lock lives on a primary with replicas (a Sentinel or cluster deployment, a standalone instance with
   * replicas): whether each replica has copied the delete. A failover to one that has not brings the lock back.
   */
  replication?: ReleaseReplication;
}

/** The release's copies, WAIT-style (see `lockReplication`): `hasRelease` once the replica acknowledged the delete. */
export interface ReleaseReplication {
  slot?: number;
  primary: string;
  replicas: Array<{ address: string; state: string; lagBytes: number; hasRelease: boolean }>;
}

/** What a node held when the console looked. */
/** `scriptsRefused`: the node refuses scripts (EVAL disabled, renamed or not granted), which a force release runs. */
type NodeRead = { id: string; state: "ok"; reading: FormatReading | null } | { id: string; state: "error"; error: string; scriptsRefused?: true; unservedSlot?: number };

/** Formats where several holders share the lock at once: releasing "whatever is held" would pick one at random. */
const MULTI_HOLDER: ReadonlySet<FormatName> = new Set<FormatName>(["redis-semaphore", "redisson-rw"]);

let matcherFor: { state: PatternsState; match: (key: string) => boolean } | null = null;

/** The patterns in force (as the live view watches them), so what it shows as a lock and what can be released never disagree. */
export function isLockKey(resource: string): boolean {
  const state = getPatternStore().current();
  if (matcherFor?.state !== state) matcherFor = { state, match: lockKeyFilter(state.patterns.map((p) => p.glob)) };
  return matcherFor.match(resource);
}

async function readNode(node: LockNode, resource: string): Promise<NodeRead> {
  // Right after start (or a reconnect) a node's connection may still be coming up: wait a moment for it
  // rather than report a healthy node as down (commands fail fast while it is not ready).
  if (!(await whenReady(node.client, getConfig().nodeTimeoutMs))) return { id: node.id, state: "error", error: "not connected" };
  if (node.cluster) {
    // A slot whose primary failed with no replica promoted: the cluster answers for it only after its tries (its
    // client waits through every CLUSTERDOWN), and no try can read or delete the key there.
    const slot = keySlot(resource);
    if (slotIn(unservedSlots(node.cluster.topology.shards), slot)) return { id: node.id, state: "error", error: `hash slot ${slot} has no primary serving it`, unservedSlot: slot };
  }
  try {
    const [reading] = await readLockKeys(node.client, [resource]);
    return { id: node.id, state: "ok", reading: reading ? decodeReading(reading, { now: Date.now() }) : null };
  } catch (error) {
    return { id: node.id, state: "error", error: (error instanceof Error ? error.message : String(error)).slice(0, 200), ...(isScriptRefused(error) ? { scriptsRefused: true as const } : {}) };
  }
}

function holderOf(value: string | null): AuditHolder | null {
  if (value === null) return null;
  const identity = decodeLockValue(value);
  if (!identity) return null;
  return { label: identity.label, host: identity.host, pid: identity.pid, fence: identity.fence };
}

/** Who holds it now, for a 409: the leading reading's format and holders, and each node's fingerprint. */
function currentHolder(reads: ReadonlyArray<{ id: string; reading: FormatReading | null }>) {
  const leading = prevailingValue(reads.map((r) => r.reading?.fingerprint ?? null));
  const reading = reads.find((r) => r.reading !== null && r.reading.fingerprint === leading)?.reading ?? null;
  const first = reading?.holders[0]?.id ?? null;
  return {
    token: reading && reading.holders.length === 1 ? first : null,
    format: reading?.format ?? null,
    holders: reading?.holders ?? [],
    holder: holderOf(reading?.format === "lockscope" ? first : null),
    nodes: reads.map((r) => ({ id: r.id, token: r.reading?.fingerprint ?? null })),
  };
}

const releases = () => counter("lockscope_force_releases_total", "Force releases asked for by operators, by outcome.", ["outcome"]);

/**
 * `unsure`: on some node whether the release deleted the holder is unknown. Then "nothing was deleted" (a
 * conflict, an absent lock, a plain failure) cannot be said: without a confirmed delete it is `failed`.
 */
function outcomeOf(results: ReadonlyArray<AuditNodeResult>, unsure: boolean, heldBefore: ReadonlyArray<boolean | null>, quorum: number): AuditOutcome {
  const deleted = results.filter((r) => r.result === "deleted").length;
  if (deleted > 0) {
    // `partial`: nodes that had the holder before (or could not be read then) did not confirm its delete, and
    // enough of them to hold it still: a quorum, or every node that held it where fewer did (a lock on one node).
    const had = heldBefore.filter((h) => h !== false).length;
    const left = results.filter((r, i) => r.result === "error" && heldBefore[i] !== false).length;
    return left > 0 && left >= Math.min(quorum, had) ? "partial" : "released";
  }
  if (unsure) return "failed";
  if (results.some((r) => r.result === "mismatch")) return "conflict";
  if (results.every((r) => r.result === "absent")) return "absent";
  return "failed";
}

/**
 * Force-releases a lock for an operator, whatever library took it. Order matters and each step is a promise
 * to the operator: only lock keys (404 otherwise, untouched); a format the console cannot release safely is a
 * 422 before anything is written; a stale holder id is a 409; the audit intent must be durable before anything
 * is deleted (503 otherwise); then the format's own release on every node (compare by holder id; this engine's
 * also revokes the holder's `using()` signal and advances the fence; Redisson's wakes its waiters the way
 * Redisson does); then the outcome is recorded.
 */
export async function releaseLock(input: ReleaseInput): Promise<ReleaseResult> {
  const { resource, reason, token, principal, request } = input;
  const config = getConfig();
  // The patterns as the consoles share them now: another console may have changed them since this one last read
  // them (it reads them every few seconds).
  await getPatternStore().refresh();
  if (!isLockKey(resource)) {
    if (isNeverLock(resource)) {
      throw new ApiError("not_found", `\`${preview(resource)}\` is a key kept beside a lock (its fence, waiting queue, lease or this console's own), not a lock; nothing was touched.`);
    }
    throw new ApiError("not_found", `\`${preview(resource)}\` is not a lock key under the lock patterns (${patternList()}); nothing was touched.`);
  }
  const { deployment, nodes, reads } = await releaseTarget(resource, input.deployment);
  const answered = reads.filter((r): r is Extract<NodeRead, { state: "ok" }> => r.state === "ok");
  if (answered.length === 0) {
    // Nodes that refuse scripts answered, but a force release is a script on every node: no retry helps.
    const scriptsRefused = reads.filter((r) => r.state === "error" && r.scriptsRefused === true).map((r) => r.id);
    if (scriptsRefused.length > 0) {
      const one = scriptsRefused.length === 1;
      const silent = reads.filter((r) => !scriptsRefused.includes(r.id)).map((r) => r.id);
      throw new ApiError(
        "unprocessable",
        `${scriptsRefused.join(", ")} ${one ? "refuses" : "refuse"} scripts (EVAL and EVALSHA disabled, renamed or not granted to the console's Redis user)${silent.length > 0 ? `, and ${silent.join(", ")} did not answer` : ""}: a force release runs a script on every node, so this lock cannot be released by the console; nothing was touched.`,
        { scriptsRefused },
      );
    }
    const unserved = reads.find((r) => r.state === "error" && r.unservedSlot !== undefined);
    if (unserved?.state === "error" && reads.length === 1) {
      throw new ApiError(
        "unavailable",
        `\`${preview(resource)}\` is in hash slot ${unserved.unservedSlot}, which no primary of the cluster serves now (its primary failed, and no replica was promoted): it cannot be read or released until one serves it; nothing was touched.`,
      );
    }
    throw new ApiError("unavailable", "No lock node answered, so the lock cannot be released; nothing was touched.");
  }
  const holding = answered.filter((r): r is { id: string; state: "ok"; reading: FormatReading } => r.reading !== null);
  if (holding.length === 0) {
    // A node whose ACL refuses the console's Redis user the key answered, but cannot be read: it may hold the lock,
    // and no retry changes that until its ACL does.
    const refused = reads.filter((r) => r.state !== "ok" && refusesKey(r.error)).map((r) => r.id);
    // A node that does not answer may hold it still (the lock's page shows it so, as last read): that is no
    // lock gone, but one that cannot be released now.
    const silent = reads.filter((r) => r.state !== "ok" && !refused.includes(r.id)).map((r) => r.id);
    if (refused.length > 0) {
      const rule = keyRuleFor(resource);
      const one = refused.length === 1;
      throw new ApiError(
        "unprocessable",
        `${refused.join(", ")} ${one ? "refuses" : "refuse"} the console's Redis user the key \`${preview(resource)}\` (the user needs \`${rule}\` there), so ${one ? "it" : "they"} may hold it, and no node the console may read does${silent.length > 0 ? ` (${silent.join(", ")} did not answer)` : ""}: nothing was touched. Add the rule to the console's Redis user on ${refused.join(", ")}, then try again.`,
        { refused, rule },
      );
    }
    if (silent.length > 0) {
      throw new ApiError(
        "unavailable",
        `No node that answered holds \`${preview(resource)}\`, and ${silent.join(", ")} did not answer, so it may still hold it: nothing was touched. Try again once ${silent.length === 1 ? "it answers" : "they answer"}.`,
      );
    }
    const where = getDeploymentNodes().length > 1 ? ` of ${input.deployment === undefined ? "any deployment" : `deployment \`${deployment}\``}` : "";
    releases().inc({ outcome: "absent" });
    throw new ApiError("not_found", `No node${where} holds \`${preview(resource)}\`: it was released or expired already.`);
  }
  const leadingPrint = prevailingValue(holding.map((r) => r.reading.fingerprint));
  const leading = (holding.find((r) => r.reading.fingerprint === leadingPrint) ?? holding[0])!.reading;
  const format = formatByName(leading.format);
  if (format.release === null) {
    throw new ApiError(
      "unprocessable",
      `\`${preview(resource)}\` is a ${leading.redisType} whose layout no lock format here knows, so the console cannot release it safely; nothing was touched.`,
    );
  }
  let holderId: string;
  // A string value whose text cannot stand for it (longer than the read bound, or not valid UTF-8) is deleted
  // by its digest: that of the value the token names (its fingerprint), else of the value most nodes hold.
  let valueDigest = leading.valueDigest;
  if (token !== undefined) {
    const named = holding.find((r) => r.reading.format === leading.format && r.reading.valueDigest !== undefined && r.reading.fingerprint === token);
    if (named) {
      holderId = named.reading.holders[0]?.id ?? "";
      valueDigest = named.reading.valueDigest;
    } else {
      const held = (r: FormatReading) => r.format === leading.format && r.holders.some((h) => h.id === token);
      let holder = held(leading) ? leading : holding.find((r) => held(r.reading))?.reading;
      // A semaphore is read up to its 64 newest members, a Redisson read-write lock up to 64 of its fields (one HSCAN
      // step): a holder past them is asked for by name before saying it is gone.
      const unread = holding.filter(
        (r) => r.reading.format === leading.format && (isSemaphoreSet(r.reading) || isReadWriteHash(r.reading)) && r.reading.warnings.includes("truncated"),
      );
      if (!holder && unread.length > 0 && (await someNodeHasHolder(nodes, unread, resource, token, false))) {
        holder = unread[0]?.reading;
      }
      if (!holder) {
        // The node's token of a value too long to compare names it all the same: not a lock that changed hands.
        const tooLong = holding.find((r) => tooLongToCompare(r.reading) && r.reading.fingerprint === token);
        if (tooLong) throw tooLongToRelease(resource);
        // (Refused before anything is asked of the nodes: counted, as every force release asked for, not audited.)
        releases().inc({ outcome: "conflict" });
        throw new ApiError("conflict", "The lock changed hands since you looked: no node has that holder any more. Nothing was deleted.", { current: currentHolder(answered) });
      }
      if (tooLongToCompare(holder)) throw tooLongToRelease(resource);
      holderId = token;
      valueDigest = holder.valueDigest;
    }
  } else if (
    (MULTI_HOLDER.has(leading.format) && leading.redisType !== "string") ||
    leading.holders.length > 1 ||
    (leading.redisType !== "string" && leading.warnings.includes("truncated"))
  ) {
    // Never guessed: taking the first of several holders would release (for a lock hash, delete) the others too.
    throw new ApiError("unprocessable", severalHolders(resource, leading));
  } else if (tooLongToCompare(leading)) {
    throw tooLongToRelease(resource);
  } else {
    const first = leading.holders[0];
    if (!first) throw new ApiError("not_found", `No holder of \`${preview(resource)}\` is left to release; nothing was touched.`);
    holderId = first.id;
  }

  // A semaphore member that is not valid UTF-8 is read, shown and given back with U+FFFD in place of its bytes, a
  // text no member has: the release (ZREM by that text) would remove nothing and find the lock "changed hands".
  const members = holding.filter((r) => isSemaphoreSet(r.reading) && r.reading.holders.some((h) => h.id === holderId));
  if (holderId.includes("\uFFFD") && members.length > 0 && !(await someNodeHasHolder(nodes, members, resource, holderId, true))) {
    throw new ApiError(
      "unprocessable",
      `The holder \`${preview(holderId)}\` of \`${preview(resource)}\` is not valid UTF-8 on the nodes (the console shows such bytes as U+FFFD), so the console cannot name it to take it out; nothing was touched. Remove that member on the nodes yourself (ZREM) once you are sure whose it is.`,
    );
  }

  const entry: AuditEntry = {
    id: newAuditId(),
    at: Date.now(),
    actor: principal.actor,
    role: principal.role,
    action: "force-release",
    resource,
    deployment,
    // (With a digest, the value deleted is named by it: the text alone may be shared by other values.)
    token: valueDigest === undefined ? holderId : `${holderId} (sha1 ${valueDigest})`,
    holder: holderOf(leading.format === "lockscope" ? holderId : null),
    reason,
    outcome: "pending",
    nodes: nodes.map((n) => ({ id: n.id, result: "pending" })),
    ip: clientIp(request.headers),
    userAgent: request.headers.get("user-agent")?.slice(0, 300) ?? null,
  };
  const audit = getAuditStore();
  const log = getLogger();
  try {
    await audit.recordIntent(entry);
  } catch (error) {
    if (error instanceof AuditNotDurableError) {
      releases().inc({ outcome: "refused" });
      log.warn({ action: "force-release", auditId: entry.id, actor: entry.actor, outcome: "refused", why: error.why }, "operator action");
      throw new ApiError("unavailable", `The audit log cannot record this release, so nothing was deleted: ${error.why}.`);
    }
    throw error;
  }

  // Checked again as late as it can be, and nothing awaited between this check and the scripts going out: the
  // patterns may have changed (on this console or another) since the first check, while the nodes were read and
  // the intent written, and no key outside the patterns is ever deleted.
  // Read with them: which nodes are replicas now, never asked (see `replicaOf`).
  const [, replicas] = await Promise.all([getPatternStore().refresh(), Promise.all(nodes.map(replicaOf))]);
  if (!isLockKey(resource)) {
    const notAsked = nodes.map((n) => ({ id: n.id, result: "error" as const, error: "not asked: the key was no longer under the lock patterns when the release was to run; nothing was deleted" }));
    const { durable: outcomeRecorded } = await audit.recordOutcome(entry.id, "failed", notAsked, Date.now());
    releases().inc({ outcome: "failed" });
    log.warn({ action: "force-release", auditId: entry.id, actor: entry.actor, outcome: "failed", why: "lock patterns changed" }, "operator action");
    throw new ApiError(
      "not_found",
      `\`${preview(resource)}\` is no longer under the lock patterns (${patternList()}): they changed while the release was being made, so nothing was deleted.`,
      { auditId: entry.id, outcomeRecorded },
    );
  }

  // Told to the live view before any node is asked: the nodes that answer first delete the keys, and their
  // notifications end the lock while a node that does not answer still holds the release up (seconds). The
  // lock then ends as force-released, with the operator's words, whenever its end is seen; the note is taken
  // back below if nothing was released. (One permit holder taken out of several does not end the lock: its
  // timeline shows the holder leaving.)
  const noted = leading.holders.length === 1 && peekGlobal("live-runtime") !== undefined;
  // The value released, as the live view names values (a reading's fingerprint): where the token names another
  // value than the one most nodes hold (a stray value on one node), the note and the notice name that one, so that
  // the lock going on is not shown force-released when its own holder ends it.
  const releasedValue =
    holding.find(
      (r) =>
        r.reading.format === leading.format &&
        r.reading.holders.some((h) => h.id === holderId) &&
        (valueDigest === undefined || r.reading.valueDigest === valueDigest),
    )?.reading.fingerprint ?? leading.fingerprint;
  if (noted) noteForceRelease(resource, { value: releasedValue, actor: entry.actor, reason }, deployment);
  const budgetMs = Math.max(config.nodeTimeoutMs, 250) * 2;
  // The release's own answers, one per node; null when the release threw (a bug, or an argument a format
  // refused) after the intent was written: then no node's result is known, and each is read again below.
  let answers: NodeReleaseResult[] | null = null;
  let notified = { holder: false, waiters: false };
  const dropsBefore = nodes.map((n) => connectionDrops(n.client));
  const asked = nodes.filter((_, i) => replicas[i] === null);
  try {
    if (asked.length > 0) {
      const result = await format.release(
        asked.map((n) => n.client),
        resource,
        holderId,
        { nodeTimeoutMs: budgetMs, valueDigest },
      );
      // (Indexed by the nodes asked; from here on by all the deployment's nodes.)
      answers = result.nodes.map((r) => ({ ...r, index: nodes.indexOf(asked[r.index] as LockNode) }));
      notified = result.notified;
    } else {
      answers = [];
    }
  } catch (error) {
    log.error({ action: "force-release", auditId: entry.id, format: format.name, err: error }, "force release failed in the console");
  }
  const target = { format: leading.format, holderId };
  const settled = await Promise.all(
    nodes.map(async (node, index): Promise<Settled> => {
      const replica = replicas[index];
      if (replica) return { result: { id: node.id, result: "error", error: replicaText(replica) }, unsure: false };
      const answer = answers?.find((r) => r.index === index);
      if (answer && answer.result === "error") {
        // The client's message may carry Redis internals (script sha, line): the server log keeps it, the
        // audit entry (which every viewer reads and exports) gets a plain sentence.
        log.warn({ action: "force-release", auditId: entry.id, node: node.id, error: answer.error.slice(0, 500) }, "force release failed on a node");
      }
      // An answer other than "deleted" that came across a dropped connection may be a second run's (the client sent
      // the script again), after a first that deleted the lock and whose answer was lost with the connection.
      const resent = answer !== undefined && answer.result !== "deleted" && connectionDrops(node.client) !== dropsBefore[index];
      if (answer && !resent && !(answer.result === "error" && unanswered(answer.error))) return { result: auditNodeResult(node.id, answer, format.name, resource), unsure: false };
      // No answer came, or not the first run's: the script may have run there after all (a node that answered late),
      // or not at all. Read the node again before saying anything about it.
      const cause =
        answers === null
          ? "the release failed in the console before this node answered (details in the console's log)"
          : resent
            ? "its connection dropped while the release was out, so its answer may be that of the script sent again"
            : "did not answer in time";
      const after = await readAgain(node, resource, performance.now() + Math.max(2_000, budgetMs * 2));
      return settleUnanswered(node.id, cause, target, reads[index], after);
    }),
  );
  const nodeResults = settled.map((s) => s.result);
  const unsure = settled.filter((s) => s.unsure).map((s) => s.result.id);
  const outcome = outcomeOf(
    nodeResults,
    unsure.length > 0,
    nodes.map((_, i) => holds(reads[i], target)),
    quorumOf(nodes.length),
  );
  // The nodes have acted: an outcome the store does not take now is retried until it does (see OutcomeRetryingStore),
  // and the operator is told, in every answer below that names the entry.
  const { durable: outcomeRecorded } = await audit.recordOutcome(entry.id, outcome, nodeResults, Date.now());
  releases().inc({ outcome });
  if (noted && outcome === "released") {
    // Again, now that it is done: a lock still shown held (its notifications lost) is read at once.
    noteForceRelease(resource, { value: releasedValue, actor: entry.actor, reason }, deployment);
  } else if (noted) {
    withdrawForceRelease(resource, deployment);
  }
  if (outcome === "released" && leading.holders.length === 1 && format.name !== "lockscope") {
    // This engine's release script publishes the revocation itself. For other formats the console says it on
    // the same channel, so that every other console over these nodes shows the lock force-released rather
    // than released. No holder of another library listens there; the message only names the released value.
    const message = JSON.stringify({ v: 1, resource, value: releasedValue });
    await Promise.all(
      nodes.map((n) => n.client.publish(REVOKE_CHANNEL, message).catch((error: unknown) => log.debug({ node: n.id, err: String(error) }, "revocation notice not published"))),
    );
  }
  const deleted = nodeResults.filter((r) => r.result === "deleted").length;
  log.info(
    { action: "force-release", auditId: entry.id, actor: entry.actor, role: entry.role, ip: entry.ip, deployment, format: format.name, outcome, deleted, quorum: quorumOf(nodes.length), outcomeRecorded },
    "operator action",
  );

  if (outcome === "conflict") {
    // The lock changed hands between the look and the delete: the compare spared the new holder.
    const after = await Promise.all(nodes.map((n) => readNode(n, resource)));
    const current = currentHolder(after.map((r) => ({ id: r.id, reading: r.state === "ok" ? r.reading : null })));
    throw new ApiError("conflict", "The lock changed hands while releasing: no node had that holder any more. Nothing was deleted.", {
      current,
      auditId: entry.id,
      outcomeRecorded,
    });
  }
  if (outcome === "absent") {
    throw new ApiError("not_found", `No node held \`${preview(resource)}\` any more when the release ran; nothing was deleted.`, { auditId: entry.id, outcomeRecorded });
  }
  const wrong = (answers ?? []).filter((r) => r.result === "wrongtype");
  if (outcome === "failed" && wrong.length > 0 && answers?.every((r) => r.result === "wrongtype" || r.result === "absent")) {
    const types = [...new Set(wrong.map((r) => (r.result === "wrongtype" && r.redisType ? r.redisType : "another layout")))];
    throw new ApiError(
      "unprocessable",
      `\`${preview(resource)}\` changed layout since it was read (now ${types.join(", ")}, not a ${format.name} lock): nothing was touched.`,
      { auditId: entry.id, nodes: nodeResults, outcomeRecorded },
    );
  }
  if (outcome === "failed") {
    const why = answers === null ? "The release failed in the console (details in its log). " : "";
    if (unsure.length > 0) {
      throw new ApiError(
        "unavailable",
        `${why}No lock node confirmed the release, and whether it deleted \`${preview(resource)}\` on ${unsure.join(", ")} is unknown: read the lock again before retrying. See the audit entry for each node.`,
        { auditId: entry.id, nodes: nodeResults, outcomeRecorded },
      );
    }
    const onReplicas = nodes.filter((_, i) => replicas[i] !== null).map((n) => n.id);
    if (onReplicas.length === nodes.length) {
      const one = onReplicas.length === 1;
      throw new ApiError(
        "unavailable",
        `${onReplicas.join(", ")} ${one ? "is a replica" : "are replicas"} now, not ${one ? "a primary" : "primaries"}: a delete there would not reach ${one ? "its primary" : "their primaries"}, which ${one ? "keeps" : "keep"} the lock, so no node was asked and nothing was deleted. ${
          getDeploymentNodes().find((d) => d.deployment.name === deployment)?.deployment.kind === "sentinel"
            ? "The deployment is failing over: try again once the console follows the new primary."
            : "Point the console at the primary (or describe the deployment as a Sentinel one), then release it there."
        }`,
        { auditId: entry.id, nodes: nodeResults, outcomeRecorded },
      );
    }
    throw new ApiError("unavailable", `${why}No lock node completed the release; nothing was deleted. See the audit entry for each node's error.`, {
      auditId: entry.id,
      nodes: nodeResults,
      outcomeRecorded,
    });
  }
  // The delete is on the primary; replication is asynchronous, so a replica promoted before it copied the delete
  // would serve the lock again, to its old holder and to nobody's knowledge. Said in the answer, as the lock's page
  // says it of a held lock (the replicas' acknowledgements are waited for up to 1.2 s). The primary's INFO is read
  // again for it, not taken from `replicaOf`'s reading: that one's offset is from before the delete, and a replica
  // that acknowledged it may still lack the delete.
  const copies = await lockReplication(resource, deployment).catch(() => null);
  const replication: ReleaseReplication | undefined =
    copies === null
      ? undefined
      : {
          ...(copies.slot === undefined ? {} : { slot: copies.slot }),
          primary: copies.primary,
          replicas: copies.replicas.map(({ address, state, lagBytes, hasLock }) => ({ address, state, lagBytes, hasRelease: hasLock })),
        };
  if (replication && replication.replicas.some((r) => !r.hasRelease)) {
    log.warn(
      { action: "force-release", auditId: entry.id, deployment, primary: replication.primary, replicasWithout: replication.replicas.filter((r) => !r.hasRelease).map((r) => r.address) },
      "force release not copied to every replica yet: a failover to one without it would bring the lock back",
    );
  }
  return {
    released: true,
    outcome: outcome === "partial" ? "partial" : "released",
    deployment,
    format: format.name,
    // (A node's `error` is the plain sentence the audit entry has: whether it is unknown or known not deleted.)
    nodes: nodeResults.map(({ id, result: r, error }) => (r === "error" && error !== undefined ? { id, result: r, error } : { id, result: r })),
    notified,
    auditId: entry.id,
    outcomeRecorded,
    ...(replication ? { replication } : {}),
  };
}

/**
 * The deployment a release acts on, with what each of its nodes holds now. Named: that one (a 400 naming the
 * deployments for a name the console does not watch). Not named: the only one; with several, the one whose
 * nodes hold the key, read now on every deployment; a key held on several is a 409 naming them, and one held on
 * one while another deployment's node does not answer a 503, so that a release never deletes a key on a
 * deployment the operator did not mean.
 */
async function releaseTarget(resource: string, name: string | undefined): Promise<{ deployment: string; nodes: LockNode[]; reads: NodeRead[] }> {
  const all = getDeploymentNodes();
  const readAll = async (d: DeploymentNodes) => ({ deployment: d.deployment.name, nodes: d.nodes, reads: await Promise.all(d.nodes.map((n) => readNode(n, resource))) });
  if (name !== undefined) {
    const named = all.find((d) => d.deployment.name === name);
    if (!named) {
      const names = all.map((d) => d.deployment.name);
      throw new ApiError("bad_request", `No deployment is named \`${name.slice(0, 60)}\`: this console watches ${names.map((n) => `\`${n}\``).join(", ")}; nothing was touched.`, { deployments: names });
    }
    return readAll(named);
  }
  if (all.length === 1) return readAll(all[0] as DeploymentNodes);
  const targets = await Promise.all(all.map(readAll));
  const holding = targets.filter((t) => t.reads.some((r) => r.state === "ok" && r.reading !== null));
  if (holding.length > 1) {
    const names = holding.map((t) => t.deployment);
    throw new ApiError(
      "conflict",
      `\`${preview(resource)}\` is held on ${names.length} deployments (${names.join(", ")}): say which to release with ?deployment=${names[0]} (or ${names.slice(1).join(", ")}); nothing was touched.`,
      { deployments: names },
    );
  }
  const only = holding[0];
  // None holds it: every deployment's reads together say whether it is gone or the nodes did not answer.
  if (!only) return { deployment: all.map((d) => d.deployment.name).join(", "), nodes: targets.flatMap((t) => t.nodes), reads: targets.flatMap((t) => t.reads) };
  // A deployment with a node that could not be read may hold the key too: releasing on the one that answered would
  // be a guess, and the operator may mean the other. Named, the release goes ahead there.
  const unread = targets.filter((t) => t !== only && t.reads.some((r) => r.state !== "ok"));
  if (unread.length > 0) {
    const names = unread.map((t) => t.deployment);
    const which = unread.map((t) => `${t.deployment}: ${t.reads.filter((r) => r.state !== "ok").map((r) => r.id).join(", ")}`).join("; ");
    throw new ApiError(
      "unavailable",
      `\`${preview(resource)}\` is held on ${only.deployment}, and ${names.join(" and ")} did not answer (${which}), so ${names.length === 1 ? "it" : "they"} may hold it too: say which to release with ?deployment=${only.deployment}; nothing was touched.`,
      { deployments: [only.deployment], unanswered: names },
    );
  }
  return only;
}

/** A node's part in the release as the audit keeps it; `unsure`: whether the release deleted there is unknown. */
interface Settled {
  result: AuditNodeResult;
  unsure: boolean;
}

/**
 * A node's error that says its answer did not come, not that the script failed there: a timeout, or the
 * connection lost with the script sent. The script may have run on that node all the same.
 */
function unanswered(error: string): boolean {
  return /^no answer|did not answer within|Command timed out|Connection is closed|ECONNRESET/i.test(error);
}

/**
 * Reads a node until it answers or `deadline` (performance.now()) passes. The read goes on the connection the
 * release script went on, and Redis answers one connection's commands in order: an answer shows the node after
 * the script ran there (or after it was lost on the way).
 */
async function readAgain(node: LockNode, resource: string, deadline: number): Promise<NodeRead> {
  for (;;) {
    const read = await readNode(node, resource);
    const left = deadline - performance.now();
    if (read.state === "ok" || left <= 0) return read;
    await sleep(Math.min(100, left));
  }
}

/** Whether a node's reading has the holder: null when the node could not be read. */
function holds(read: NodeRead | undefined, target: { format: FormatName; holderId: string }): boolean | null {
  if (read?.state !== "ok") return null;
  return read.reading !== null && read.reading.format === target.format && read.reading.holders.some((h) => h.id === target.holderId);
}

/**
 * What a node whose answer to the release did not come did there, from what it held before the release and
 * holds now (read after the script, see `readAgain`). `cause` says why its answer is missing. Pure: no I/O.
 */
function settleUnanswered(
  id: string,
  cause: string,
  target: { format: FormatName; holderId: string },
  before: NodeRead | undefined,
  after: NodeRead,
): Settled {
  const unknown = (error: string): Settled => ({ result: { id, result: "error", error }, unsure: true });
  const heldAfter = holds(after, target);
  if (heldAfter === null) return unknown(`${cause}, and could not be read again: whether the lock was deleted there is unknown`);
  if (heldAfter) return { result: { id, result: "error", error: `${cause}; read again, it still holds that holder: not deleted there` }, unsure: false };
  const heldBefore = holds(before, target);
  const now = after.state === "ok" ? after.reading : null;
  if (heldBefore === null) return unknown(`${cause}; read again, it does not hold that holder, but it could not be read before the release: whether the release deleted it is unknown`);
  // It never had that holder: the compare would have left it alone.
  if (!heldBefore) return { result: { id, result: now === null ? "absent" : "mismatch" }, unsure: false };
  // The holder is gone. With the key gone, or one holder out of several, that is what the release does (a lock
  // hash of another format with several holder fields loses only the named one: only those that held beside it
  // are left); a single-holder lock now held by someone else may have changed hands before the script ran.
  const beside = new Set(before?.state === "ok" ? (before.reading?.holders.map((h) => h.id) ?? []) : []);
  const onlyThoseBeside = now !== null && now.format === target.format && beside.size > 1 && now.holders.every((h) => beside.has(h.id));
  if (now === null || MULTI_HOLDER.has(target.format) || onlyThoseBeside) return { result: { id, result: "deleted" }, unsure: false };
  return unknown(`${cause}; read again, another holder has it now: whether the release deleted that holder first is unknown`);
}

/**
 * The primary a node follows where it is a replica now (its URL names a replica, or a failover demoted it; null where
 * it does not say), else null. A replica is never asked to release, read-only or not: a read-only one refuses the
 * delete, and a writable one (`replica-read-only no`) would make it there alone, never on its primary, which keeps
 * the lock. A cluster's client sends the release to the key's primary itself. A node whose role cannot be read (INFO
 * refused, or a reply that names no role) is asked: a read-only replica still refuses the delete.
 */
async function replicaOf(node: LockNode): Promise<{ primary: string | null } | null> {
  if (node.cluster) return null;
  try {
    const { role } = readReplicationInfo(await node.client.info("replication"));
    return role.kind === "replica" ? { primary: role.primary } : null;
  } catch {
    return null;
  }
}

function replicaText(replica: { primary: string | null }): string {
  const of = replica.primary === null ? "" : ` of ${replica.primary}`;
  return `is a replica${of} now, not a primary (a failover demoted it, or its URL names a replica): a read-only replica refuses the delete, and a writable one would keep it to itself while its primary keeps the lock, so it was not asked; nothing was deleted there`;
}

/** One node's result as the audit log keeps it: a plain sentence for anything but the three usual results. */
function auditNodeResult(id: string, r: NodeReleaseResult, format: FormatName, resource: string): AuditNodeResult {
  switch (r.result) {
    case "deleted":
    case "absent":
    case "mismatch":
      return { id, result: r.result };
    case "wrongtype":
      return { id, result: "error", error: `holds ${r.redisType ? `a ${r.redisType}` : "a key"} that is not a ${format} lock (or a companion key of another type): left untouched` };
    case "error":
      return { id, result: "error", error: plainNodeError(r.error, resource) };
  }
}

/** The ACL key rule the console's Redis user needs for `resource`: that of the first lock pattern that matches it. */
function keyRuleFor(resource: string): string {
  const glob = getPatternStore()
    .current()
    .patterns.map((p) => p.glob)
    .find((g) => globMatcher(g)(resource));
  return `~${glob ?? resource}`;
}

/** A node's failure in words a viewer can act on, without the client's or Redis's internals. */
function plainNodeError(raw: string | undefined, resource: string): string {
  if (raw?.endsWith(COMPANION_REFUSED)) return raw.slice(0, 300);
  if (refusesKey(raw)) return `its ACL does not let the console's Redis user at this key (the user needs \`${keyRuleFor(resource)}\` there): nothing was deleted on this node`;
  return nodeFailureText(raw) ?? "the release script failed on this node (details in the console's log)";
}

/** A redis-semaphore semaphore's reading (a sorted set of permits, whose members the release takes out by name). */
const isSemaphoreSet = (reading: FormatReading): boolean => reading.format === "redis-semaphore" && reading.redisType === "zset";

/** A Redisson read-write lock's reading (a hash of its mode and holder fields, whose holders the release takes out by name). */
const isReadWriteHash = (reading: FormatReading): boolean => reading.format === "redisson-rw" && reading.redisType === "hash";

/**
 * Whether one of the nodes that gave `readings` has the holder `holderId`, compared as the release script compares
 * it: a semaphore's sorted-set member (or, for a MultiSemaphore holder, its first permit `<id>_0`), a read-write
 * lock's hash field other than its `mode`. `unknownHas`: whether a node that cannot be asked counts as having it.
 */
async function someNodeHasHolder(
  nodes: readonly LockNode[],
  readings: ReadonlyArray<{ id: string; reading: FormatReading }>,
  resource: string,
  holderId: string,
  unknownHas: boolean,
): Promise<boolean> {
  const found = await Promise.all(
    nodes.map(async (node) => {
      const reading = readings.find((r) => r.id === node.id)?.reading;
      if (!reading) return false;
      try {
        if (reading.redisType === "hash") return holderId !== "mode" && (await node.client.hexists(resource, holderId)) === 1;
        const [one, firstPermit] = await Promise.all([node.client.zscore(resource, holderId), node.client.zscore(resource, `${holderId}_0`)]);
        return one !== null || firstPermit !== null;
      } catch {
        return unknownHas;
      }
    }),
  );
  return found.some(Boolean);
}

/**
 * A string value cut by the read bound whose digest was not taken (longer than the digest's bound): neither its text
 * nor its size tells it from another value that starts alike, so no release can compare it on the nodes (the
 * release script would compare the whole value with the text shown and find a "mismatch" on every node).
 */
function tooLongToCompare(reading: FormatReading): boolean {
  return reading.redisType === "string" && reading.valueDigest === undefined && reading.warnings.includes("truncated");
}

/** The 422 for a value `tooLongToCompare`: said before the audit intent, since nothing can be done. */
function tooLongToRelease(resource: string): ApiError {
  const bound = `${DEFAULT_READ_LIMITS.maxDigestBytes / 1024} KiB`;
  return new ApiError(
    "unprocessable",
    `\`${preview(resource)}\` holds a value longer than ${bound}: the console compares a value by its digest up to ${bound} only, so it cannot tell this one from another value that starts alike and cannot release it safely; nothing was touched. Delete the key on the nodes yourself once you are sure who holds it.`,
  );
}

/** The 422 for a release without `token` of a lock with several holders: who they are, and how to name one. */
function severalHolders(resource: string, reading: FormatReading): string {
  const shown = reading.holders.slice(0, 5).map((h) => `\`${preview(h.id)}\``);
  const more = reading.holders.length > 5 || reading.warnings.includes("truncated") ? ", and more" : "";
  const who = shown.length > 0 ? `: ${shown.join(", ")}${more}` : "";
  return `\`${preview(resource)}\` is held by several holders at once (${reading.format})${who}. Say which one to release with \`token\` (the holder's id); nothing was touched.`;
}

/** The lock patterns in force, for a message. */
function patternList(): string {
  return getPatternStore()
    .current()
    .patterns.map((p) => p.glob)
    .join(", ");
}

/** A resource name for a message: long or unprintable names are cut and escaped. */
function preview(resource: string): string {
  const cut = resource.length > 120 ? `${resource.slice(0, 120)}…` : resource;
  return JSON.stringify(cut).slice(1, -1);
}
