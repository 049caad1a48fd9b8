import "server-only";
import { lockKeyMatcher } from "@/lib/locks/glob";
import { prevailingValue } from "@/lib/locks/merge";
import { decodeLockValue, forceRelease, type ForceReleaseNodeResult } from "@lockscope/redlock";
import { getAuditStore } from "./audit/current";
import { AuditNotDurableError } from "./audit/store";
import { newAuditId } from "./audit/records";
import type { AuditEntry, AuditHolder, AuditNodeResult, AuditOutcome } from "./audit/types";
import { clientIp, type Principal } from "./auth";
import { getConfig } from "./config";
import { ApiError } from "./errors";
import { peekGlobal, singleton } from "./global";
import { whenReady } from "./health";
import { noteForceRelease } from "./live";
import { getLogger } from "./logger";
import { counter } from "./metrics";
import { getNodes, quorumOf, type LockNode } from "./nodes";

export interface ReleaseInput {
  resource: string;
  reason: string;
  /** The lock value the operator was looking at; absent: release whatever is held. */
  token?: string;
  principal: Principal;
  request: Request;
}

export interface ReleaseResult {
  released: true;
  nodes: Array<{ id: string; result: AuditNodeResult["result"] }>;
  auditId: string;
}

/** What a node held when the console looked. */
type NodeRead = { id: string; state: "ok"; value: string | null; nonString: boolean } | { id: string; state: "error"; error: string };

/** The live view's own matcher, so what it shows as a lock and what can be released never disagree. */
export function isLockKey(resource: string): boolean {
  return singleton("release-lock-key-matcher", () => lockKeyMatcher(getConfig().lockPatterns))(resource);
}

async function readNode(node: LockNode, resource: string): Promise<NodeRead> {
  // Right after start (or a reconnect) a node's connection may still be coming up: wait a moment for it
  // rather than report a healthy node as down (commands fail fast while it is not ready).
  if (!(await whenReady(node.client, getConfig().nodeTimeoutMs))) return { id: node.id, state: "error", error: "not connected" };
  try {
    return { id: node.id, state: "ok", value: await node.client.get(resource), nonString: false };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    // A hash or other non-string lock (some libraries use them) exists but has no value to compare.
    if (message.startsWith("WRONGTYPE")) return { id: node.id, state: "ok", value: null, nonString: true };
    return { id: node.id, state: "error", error: message.slice(0, 200) };
  }
}

function holderOf(value: string | null): AuditHolder | null {
  if (value === null) return null;
  const identity = decodeLockValue(value);
  if (!identity) return null;
  return { label: identity.label, host: identity.host, pid: identity.pid, fence: identity.fence };
}


function currentHolder(values: Array<{ id: string; value: string | null }>) {
  const token = prevailingValue(values.map((v) => v.value));
  return {
    token,
    holder: holderOf(token),
    nodes: values.map((v) => ({ id: v.id, token: v.value })),
  };
}

const releases = () => counter("lockscope_force_releases_total", "Force releases asked for by operators, by outcome.", ["outcome"]);

function outcomeOf(results: ReadonlyArray<AuditNodeResult>): AuditOutcome {
  if (results.some((r) => r.result === "deleted")) return "released";
  if (results.some((r) => r.result === "mismatch")) return "conflict";
  if (results.every((r) => r.result === "absent")) return "absent";
  return "failed";
}

/**
 * Force-releases a lock for an operator. Order matters and each step is a promise to the operator:
 * only lock keys (404 otherwise, untouched); a stale token is a 409 before anything is written; the audit
 * intent must be durable before anything is deleted (503 otherwise); then compare-and-delete (or delete)
 * on every node, which also revokes the holder's `using()` signal and advances the fence; then the
 * outcome is recorded.
 */
export async function releaseLock(input: ReleaseInput): Promise<ReleaseResult> {
  const { resource, reason, token, principal, request } = input;
  const config = getConfig();
  if (!isLockKey(resource)) {
    throw new ApiError(
      "not_found",
      `\`${preview(resource)}\` is not a lock key under LOCK_PATTERNS (${config.lockPatterns.join(", ")}); nothing was touched.`,
    );
  }
  const nodes = getNodes();
  const reads = await Promise.all(nodes.map((n) => readNode(n, resource)));
  const answered = reads.filter((r): r is Extract<NodeRead, { state: "ok" }> => r.state === "ok");
  if (answered.length === 0) {
    throw new ApiError("unavailable", "No lock node answered, so the lock cannot be released; nothing was touched.");
  }
  const heldSomewhere = answered.some((r) => r.value !== null || r.nonString);
  if (!heldSomewhere) {
    const unreachable = reads.length - answered.length;
    throw new ApiError(
      "not_found",
      `No node holds \`${preview(resource)}\`: it was released or expired already${unreachable > 0 ? ` (${unreachable} node(s) did not answer)` : ""}.`,
    );
  }
  if (token !== undefined && !answered.some((r) => r.value === token)) {
    const current = currentHolder(answered);
    throw new ApiError("conflict", "The lock changed hands since you looked: no node holds that token any more. Nothing was deleted.", { current });
  }

  const targeted = token ?? prevailingValue(answered.map((r) => r.value));
  const entry: AuditEntry = {
    id: newAuditId(),
    at: Date.now(),
    actor: principal.actor,
    role: principal.role,
    action: "force-release",
    resource,
    token: targeted,
    holder: holderOf(targeted),
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
      log.warn({ action: "force-release", auditId: entry.id, actor: entry.actor, outcome: "refused", why: error.message }, "operator action");
      throw new ApiError("unavailable", error.message);
    }
    throw error;
  }

  const result = await forceRelease(
    nodes.map((n) => n.client),
    resource,
    { token: token ?? null, nodeTimeoutMs: Math.max(config.nodeTimeoutMs, 250) * 2 },
  );
  const nodeResults: AuditNodeResult[] = result.nodes.map((r) => {
    const id = nodes[r.index]?.id ?? `node-${r.index}`;
    if (r.result === "error" && r.error !== undefined) {
      // The client's message may carry Redis internals (script sha, line): the server log keeps it, the
      // audit entry (which every viewer reads and exports) gets a plain sentence.
      log.warn({ action: "force-release", auditId: entry.id, node: id, error: r.error.slice(0, 500) }, "force release failed on a node");
    }
    return auditNodeResult(id, r);
  });
  const outcome = outcomeOf(nodeResults);
  await audit.recordOutcome(entry.id, outcome, nodeResults);
  releases().inc({ outcome });
  if (outcome === "released" && peekGlobal("live-runtime") !== undefined) {
    // The live view also learns it from the revocation message; telling it here puts the operator's
    // name and reason on the lock's timeline at once.
    noteForceRelease(resource, { value: targeted, actor: entry.actor, reason });
  }
  const deleted = nodeResults.filter((r) => r.result === "deleted").length;
  log.info(
    { action: "force-release", auditId: entry.id, actor: entry.actor, role: entry.role, ip: entry.ip, outcome, deleted, quorum: quorumOf(nodes.length) },
    "operator action",
  );

  if (outcome === "conflict") {
    // The lock changed hands between the look and the delete: the compare-and-delete spared the new holder.
    const current = currentHolder(result.previousValues.map((value, index) => ({ id: nodes[index]?.id ?? `node-${index}`, value })));
    throw new ApiError("conflict", "The lock changed hands while releasing: no node held that token any more. Nothing was deleted.", {
      current,
      auditId: entry.id,
    });
  }
  if (outcome === "absent") {
    throw new ApiError("not_found", `No node held \`${preview(resource)}\` any more when the release ran; nothing was deleted.`, { auditId: entry.id });
  }
  const notStrings = result.nodes.filter((r) => r.result === "not-string");
  if (outcome === "failed" && notStrings.length > 0 && result.nodes.every((r) => r.result === "not-string" || r.result === "absent")) {
    throw new ApiError(
      "unprocessable",
      `\`${preview(resource)}\` is not a string lock (${[...new Set(notStrings.map((r) => r.detail ?? "another type"))].join(", ")}): force release only deletes string locks; nothing was touched.`,
      { auditId: entry.id, nodes: nodeResults },
    );
  }
  if (outcome === "failed") {
    throw new ApiError("unavailable", "No lock node completed the release; nothing was deleted. See the audit entry for each node's error.", {
      auditId: entry.id,
      nodes: nodeResults,
    });
  }
  return { released: true, nodes: nodeResults.map(({ id, result: r }) => ({ id, result: r })), auditId: entry.id };
}

/** One node's result as the audit log keeps it: a plain sentence for anything but the three usual results. */
function auditNodeResult(id: string, r: ForceReleaseNodeResult): AuditNodeResult {
  switch (r.result) {
    case "deleted":
    case "absent":
    case "mismatch":
      return { id, result: r.result };
    case "not-string":
      return { id, result: "error", error: `holds a ${r.detail ?? "non-string key"}, not a string lock: left untouched` };
    case "wrong-type":
      return { id, result: "error", error: `${r.detail ?? "a companion key has another type"}, which the release would write: nothing was written` };
    case "error":
      return { id, result: "error", error: plainNodeError(r.error) };
  }
}

/** A node's failure in words a viewer can act on, without the client's or Redis's internals. */
function plainNodeError(raw: string | undefined): string {
  if (raw === undefined || raw === "no answer" || /did not answer within/.test(raw)) return "did not answer in time";
  if (/ECONNREFUSED|ECONNRESET|Connection is closed|Stream isn't writeable|enableOfflineQueue/i.test(raw)) return "not reachable";
  if (/^NOAUTH|^WRONGPASS|^NOPERM/.test(raw)) return "refused the console's credentials";
  return "the release script failed on this node (details in the console's log)";
}

/** A resource name for a message: long or unprintable names are cut and escaped. */
function preview(resource: string): string {
  const cut = resource.length > 120 ? `${resource.slice(0, 120)}…` : resource;
  return JSON.stringify(cut).slice(1, -1);
}
