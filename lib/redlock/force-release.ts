import type { ForceReleaseClient } from "./client.ts";
import { doubtAcrossDrops, dropClock } from "./drops.ts";
import { FORCE_RELEASE_LUA } from "./force-release.lua.ts";
import { runRound } from "./round.ts";
import { defineScript } from "./script.ts";
import * as check from "./validate.ts";

const SCRIPT = defineScript(FORCE_RELEASE_LUA);

export interface ForceReleaseOptions {
  /** Compare-and-delete this value; null or absent deletes whatever value is held. @default null */
  token?: string | null;
  /** Per-node budget; a node that does not answer in time reports "error". @default 1000 */
  nodeTimeoutMs?: number;
}

/**
 * `not-string`: the key is a hash, set or other non-string, left untouched (`detail` names its type);
 * `wrong-type`: a companion key (`waitq:`, `waitqd:`, `waitqg:`, `fence:`) holds another type than the
 * engine writes there, so nothing was written on that node (`detail` names it); `error`: the node failed or
 * timed out (`error` has the client's message, which may carry Redis internals: log it, do not show it).
 */
export interface ForceReleaseNodeResult {
  index: number;
  result: "deleted" | "absent" | "mismatch" | "not-string" | "wrong-type" | "error";
  detail?: string;
  error?: string;
  /**
   * `deleted` only: subscribers on this node that heard the head waiter's wake-up (0 when nobody was queued). On
   * a Redis Cluster the message reaches every node, but only subscribers connected to this one are counted.
   */
  wakeHeardBy?: number;
  /** `deleted` only: a waiter was queued for the resource here, and was woken. */
  waiterQueued?: boolean;
  /**
   * `deleted` only: subscribers on this node that heard the revocation on the holder's own engine instance's
   * channel: at least 1 when the holder's process was listening (an engine instance listens while any `using()`
   * routine or waiter of its runs, and 2 s after). A `using()` routine holding the lock then aborts at once; a
   * holder that took it with a plain `acquire` finds out only at its next extend or release, listening or not.
   * 0: nobody there listened, or the value is not this engine's. On a Redis Cluster only subscribers connected to
   * this node count.
   */
  holderHeardBy?: number;
}

export interface ForceReleaseResult {
  nodes: ForceReleaseNodeResult[];
  /** What each node held before (null when absent, unreadable or on error). */
  previousValues: Array<string | null>;
}

const DEFAULTS = Object.freeze({ token: null, nodeTimeoutMs: 1000 });

/**
 * Takes a lock away on every node, for an operator. In the same script per node it publishes a
 * revocation (the holder's `using()` signal aborts at once), wakes the waiters, and advances the
 * resource's fence counter so the next fenced holder outranks the evicted one.
 */
export async function forceRelease(
  clients: readonly ForceReleaseClient[],
  resource: string,
  options: ForceReleaseOptions = {},
): Promise<ForceReleaseResult> {
  const nodes = check.clientList<ForceReleaseClient>("clients", clients, ["evalsha", "eval"]);
  check.resource("resource", resource);
  // A misspelt `token` must not be dropped: without it, whatever value the resource holds is deleted.
  check.optionsObject<ForceReleaseOptions>("forceRelease", options, ["token", "nodeTimeoutMs"]);
  const token = check.nullableString("token", options.token ?? DEFAULTS.token);
  if (token === "") check.fail("token", "a non-empty string or null", token);
  const nodeTimeoutMs = check.timerMs("nodeTimeoutMs", options.nodeTimeoutMs ?? DEFAULTS.nodeTimeoutMs, 1);

  const drops = nodes.map(dropClock);
  const sentAt = performance.now();
  const outcomes = await runRound(nodes, SCRIPT, {
    keys: [resource],
    args: [token ?? ""],
    timeoutMs: nodeTimeoutMs,
    parse: (raw): { status: Exclude<ForceReleaseNodeResult["result"], "error">; previous: string | null; detail: string | null; wokenBy: number | null; queued: boolean; told: number | null } => {
      if (!Array.isArray(raw)) throw new Error(`Unexpected reply ${String(raw)}`);
      const status: unknown = raw[0];
      if (status !== "deleted" && status !== "absent" && status !== "mismatch" && status !== "not-string" && status !== "wrong-type") {
        throw new Error(`Unexpected status ${String(status)}`);
      }
      const previous: unknown = raw[1];
      const detail: unknown = raw[2];
      const wokenBy = status === "deleted" ? Number(raw[3] ?? 0) : null;
      const told = status === "deleted" ? Number(raw[5] ?? 0) : null;
      return { status, previous: typeof previous === "string" ? previous : null, detail: typeof detail === "string" ? detail : null, wokenBy, queued: raw[4] === 1, told };
    },
  });
  // "absent" or "mismatch" from a node whose connection dropped meanwhile may be the answer of the script sent
  // again after a first run that deleted the value: what that node did is unknown.
  doubtAcrossDrops(outcomes, drops, sentAt, (reply) => reply.status === "absent" || reply.status === "mismatch");
  return {
    nodes: outcomes.map((outcome, index): ForceReleaseNodeResult =>
      outcome.state === "ok"
        ? {
            index,
            result: outcome.value.status,
            ...(outcome.value.detail === null ? {} : { detail: outcome.value.detail }),
            ...(outcome.value.wokenBy === null ? {} : { wakeHeardBy: outcome.value.wokenBy, waiterQueued: outcome.value.queued, holderHeardBy: outcome.value.told ?? 0 }),
          }
        : { index, result: "error", error: outcome.state === "error" ? outcome.error.message : "no answer" },
    ),
    previousValues: outcomes.map((outcome) => (outcome.state === "ok" ? outcome.value.previous : null)),
  };
}
