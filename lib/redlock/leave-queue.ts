import { reportErrors, type Engine } from "./engine.ts";
import { lockValueId } from "./identity.ts";
import { LEAVE_QUEUE_LUA } from "./leave-queue.lua.ts";
import { parseNumber, type AcquireReply } from "./replies.ts";
import { runRound, type RoundOptions } from "./round.ts";
import { defineScript } from "./script.ts";

const LEAVE_QUEUE = defineScript(LEAVE_QUEUE_LUA);

/**
 * @internal The engine's handler for late answers of acquire rounds. A node that refused after the round
 * had already succeeded on a quorum queued this (now holding) acquisition there: it leaves that queue at
 * once, or its stale entry would be named as the next waiter (fair mode: block the queue) until it lapses.
 * A late answer from a node without its fence marker schedules that node's re-seed.
 */
export function lateAcquireHandler(engine: () => Engine): NonNullable<RoundOptions<AcquireReply>["onLate"]> {
  return (index, outcome, options, succeeded) => {
    if (outcome.state === "error") {
      engine().nodeError(index, outcome.error, "acquire");
      return;
    }
    // A node found without its fence marker is re-seeded whether its answer came in time or late: a node
    // that restarted empty and always answers last would otherwise never be repaired.
    if (outcome.state === "ok" && outcome.value.known?.marked === false) engine().fenceRepairs.schedule(index);
    // (A plain first try that was refused queued nothing.)
    if (!succeeded || outcome.state !== "ok" || outcome.value.kind === "granted" || outcome.value.kind === "unchecked") return;
    const mode = String(options.args[2]);
    if (mode.includes("q") || mode.includes("r")) leaveQueue(engine(), options.keys, lockValueId(String(options.args[0])) ?? "", [index]);
  };
}

/**
 * Leave the waiter queues on the given nodes (fire and forget: a stale entry lapses anyway). With
 * `value` (giving up), a lock a release granted to this waiter meanwhile is deleted and handed on, and
 * with `announce` the give-up is published on the contention channel (the waiter was counted there).
 */
export function leaveQueue(engine: Engine, resources: readonly string[], id: string, nodes: readonly number[], value?: string, announce = false): void {
  if (nodes.length === 0) return;
  const clients = nodes.map((i) => engine.clients[i]!);
  const args = value === undefined ? [id] : announce ? [id, value, "1"] : [id, value];
  let round: ReturnType<typeof runRound<number>>;
  try {
    round = runRound(clients, LEAVE_QUEUE, { keys: resources, args, timeoutMs: engine.settings.nodeTimeoutMs, parse: parseNumber, nodes });
  } catch {
    // A client that answers no promise (runRound refuses it): the operation that got here already failed with
    // that error, which this must not replace; the entries lapse.
    return;
  }
  void round.then((outcomes) => reportErrors(engine, outcomes, "leave-queue", nodes));
}

