import { AnswerLostError } from "./errors.ts";
import type { NodeOutcome } from "./round.ts";
import { isClusterClient } from "./script.ts";

/** @internal When a client's connection last dropped, on `performance.now()`'s clock (-Infinity: never seen to). */
export interface DropClock {
  at: number;
}

interface Emitter {
  on(event: string, listener: (...args: never[]) => void): unknown;
}

interface ClusterEmitter extends Emitter {
  nodes(role: "all"): Emitter[];
}

const clocks = new WeakMap<object, DropClock>();

const hasOn = (value: unknown): value is Emitter => typeof (value as { on?: unknown } | null)?.on === "function";

/**
 * @internal Follows `client`'s connection drops, once per client however many engines use it: ioredis emits
 * `close` on a connection that dropped, and sends the commands it left unanswered again once it reconnects
 * (a cluster client, to whichever node serves the slot then). An answer that came across a drop may be that
 * second run's, which cannot see what the first one did. A client that emits no `close` is never seen to drop.
 */
export function dropClock(client: object): DropClock {
  let clock = clocks.get(client);
  if (clock) return clock;
  const made: DropClock = { at: -Infinity };
  clock = made;
  clocks.set(client, made);
  const follow = (connection: Emitter) => connection.on("close", () => (made.at = performance.now()));
  if (isClusterClient(client) && typeof (client as Partial<ClusterEmitter>).nodes === "function" && hasOn(client)) {
    for (const connection of (client as ClusterEmitter).nodes("all")) follow(connection);
    client.on("+node", (connection: Emitter) => follow(connection));
  } else if (hasOn(client)) {
    follow(client);
  }
  return made;
}

/**
 * @internal An answer `unsure` says the first run may have made otherwise (nothing deleted, say), from a node whose
 * connection dropped since `sentAt`, may be the answer of the command sent again: it becomes that node's error
 * (`AnswerLostError`), as a node that did not answer.
 */
export function doubtAcrossDrops<T>(outcomes: Array<NodeOutcome<T>>, drops: readonly DropClock[], sentAt: number, unsure: (value: T) => boolean): void {
  for (let index = 0; index < outcomes.length; index++) {
    const outcome = outcomes[index]!;
    if (outcome.state === "ok" && drops[index]!.at >= sentAt && unsure(outcome.value)) outcomes[index] = { state: "error", error: new AnswerLostError(index) };
  }
}
