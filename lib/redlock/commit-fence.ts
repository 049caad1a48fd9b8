import { COMMIT_FENCE_LUA } from "./commit-fence.lua.ts";
import { reportErrors, votesOf, type Engine } from "./engine.ts";
import { FenceUnavailableError, type FenceNodeEvidence } from "./errors.ts";
import { parseCommitReply, type Failure } from "./replies.ts";
import { runRound } from "./round.ts";
import { defineScript } from "./script.ts";

const COMMIT_FENCE = defineScript(COMMIT_FENCE_LUA);

/**
 * Records fence F on the nodes (commit-fence). The lock is handed out only when a quorum holds it with F in
 * its value and a quorum recorded F with their marker present (a node that lost its data since the acquire
 * round has no marker: its record does not count).
 */
export async function commitFence(engine: Engine, resources: readonly string[], value: string, lockValue: string, fence: string, attempt: number): Promise<Failure | null> {
  const quorum = engine.quorum;
  const commit = await runRound(engine.clients, COMMIT_FENCE, {
    keys: resources,
    args: [value, lockValue, fence],
    timeoutMs: engine.settings.nodeTimeoutMs,
    parse: parseCommitReply,
    // Early on success only: a failing commit waits for every node, since a node that holds the lock and
    // one that recorded F with its marker need not be the same.
    early: engine.commitEarly,
    onLate: (index, outcome) => {
      if (outcome.state === "error") engine.nodeError(index, outcome.error, "commit-fence");
    },
  });
  reportErrors(engine, commit, "commit-fence");
  let holders = 0;
  let marked = 0;
  let replied = 0;
  const evidence: FenceNodeEvidence[] = commit.map((o, index): FenceNodeEvidence => {
    if (o.state === "error") return { index, state: "error", fence: null, error: o.error };
    if (o.state === "pending") return { index, state: "pending", fence: null };
    replied += 1;
    if (o.value.held) holders += 1;
    if (o.value.marked) marked += 1;
    return { index, state: o.value.damaged ? "damaged" : o.value.marked ? "trusted" : "untrusted", fence: o.value.damaged ? null : fence };
  });
  if (holders >= quorum && marked >= quorum) return null;
  const votes = votesOf(commit, (reply) => reply.held);
  if (holders < quorum) return { reason: replied < quorum ? "nodes-failed" : "conflict", votes };
  return { reason: "nodes-failed", votes, fence: new FenceUnavailableError(resources, "commit", evidence, quorum, attempt) };
}

