import type { RedlockClient, ScriptClient } from "./client.ts";
import { NodeTimeoutError, toError } from "./errors.ts";
import { setReplyDeadline } from "./reply-deadline.ts";
import { isClusterClient, isNoScript, notAPromise, promised, type Script } from "./script.ts";

/**
 * A plain `SET <key> <value> PX <ttl> NX` instead of a script (keys: the resource; args: value, TTL): the
 * first try of an uncontended acquisition, which costs a node less than any script (see acquire.ts).
 * Only for rounds over `RedlockClient`s.
 */
export const SET_NX_PX = Object.freeze({ plain: "SET NX PX" as const });

/** What a round sends to every node. */
export type RoundCommand = Script | typeof SET_NX_PX;

/** One node's answer in a round: a value, an error (including a timeout), or none yet. */
export type NodeOutcome<T> =
  | { state: "ok"; value: T }
  | { state: "error"; error: Error }
  | { state: "pending" };

export interface RoundOptions<T> {
  keys: readonly string[];
  args: ReadonlyArray<string | number>;
  /**
   * Per-node budget: a node that has not answered by then counts as failed, so a stopped node cannot stall the
   * round. (Replies that came in by then are read first: see `setReplyDeadline`.)
   */
  timeoutMs: number;
  /** Turns the raw reply of `client` into T; a throw counts as that node's error. */
  parse: (raw: unknown, client: ScriptClient) => T;
  /**
   * Resolve before every node answered once the vote is decided: "success" when `quorum` answers pass
   * `isFor`; "either" also when that can no longer happen. Without it the round waits for every node
   * or the timeout. The others' answers still arrive in `onLate`.
   */
  early?: { quorum: number; isFor: (value: T) => boolean; when: "success" | "either" };
  /**
   * An answer that arrived after the round resolved (for events and cleanup), with this round's options
   * and whether the round had resolved with a quorum for (so a handler made once can serve every round).
   */
  onLate?: (index: number, outcome: NodeOutcome<T>, options: RoundOptions<T>, succeeded: boolean) => void;
  /**
   * The engine's index of each client, when the round runs on some nodes only: `onLate` and the timeout
   * errors name nodes by it (the outcomes stay in the order of `clients`).
   */
  nodes?: readonly number[];
}

const PENDING = Object.freeze({ state: "pending" as const });

/**
 * Runs one script on every node in parallel, by EVALSHA with a NOSCRIPT fallback to EVAL (first use, or
 * a node that restarted empty), or one plain SET NX PX (SET_NX_PX). A single timer covers the whole round. This is the engine's hot path:
 * it is written as one class with methods rather than closures made per call, and it allocates only what
 * it must (no function-valued fields, no copy of the outcomes, one argument array shared by the nodes).
 */
class Round<T> {
  readonly outcomes: Array<NodeOutcome<T>>;
  #answered = 0;
  #votesFor = 0;
  #undecided: number;
  #done = false;
  #cancelDeadline: (() => void) | undefined;
  #resolve: ((outcomes: Array<NodeOutcome<T>>) => void) | undefined;

  constructor(
    private readonly clients: readonly ScriptClient[],
    private readonly command: RoundCommand,
    private readonly options: RoundOptions<T>,
  ) {
    this.outcomes = new Array<NodeOutcome<T>>(clients.length).fill(PENDING);
    this.#undecided = clients.length;
  }

  run(): Promise<Array<NodeOutcome<T>>> {
    const promise = new Promise<Array<NodeOutcome<T>>>((resolve) => (this.#resolve = resolve));
    const { keys, args } = this.options;
    const command = this.command;
    const plain = "plain" in command;
    // One flat argument list (keys, then args) for every node, built once for the round.
    const keysAndArgs = plain ? [] : keys.length === 1 ? [keys[0]!, ...args] : [...keys, ...args];
    for (let index = 0; index < this.clients.length; index++) {
      const client = this.clients[index]!;
      // A cluster client runs the script's cluster form (companion keys in the resource's slot).
      const script = plain ? null : isClusterClient(client) ? command.cluster : command;
      let call: Promise<unknown>;
      try {
        call = script === null
          ? (client as RedlockClient).set(keys[0]!, String(args[0]), "PX", Number(args[1]), "NX")
          : client.evalsha(script.sha, keys.length, ...keysAndArgs);
      } catch (error) {
        call = Promise.reject(toError(error));
      }
      // A client that answers through callbacks (node_redis 3.x: every command returns a boolean) cannot be
      // used: stop before the command goes to any other node, with an error that says so.
      if (typeof (call as Promise<unknown> | null | undefined)?.then !== "function") throw notAPromise(script === null ? "set" : "evalsha", call);
      call.then(
        (raw) => this.#reply(index, raw),
        (error: unknown) => {
          if (script === null || !isNoScript(error)) return this.#fail(index, error);
          let retry: Promise<unknown>;
          try {
            retry = promised("eval", client.eval(script.source, keys.length, ...keysAndArgs));
          } catch (evalError) {
            retry = Promise.reject(toError(evalError));
          }
          // (Here a client that returned no promise is that node's failed vote: the round is under way.)
          retry.then(
            (raw) => this.#reply(index, raw),
            (evalError: unknown) => this.#fail(index, evalError),
          );
        },
      );
    }
    if (!this.#done) {
      this.#cancelDeadline = setReplyDeadline(() => this.#timeout(), this.options.timeoutMs);
    }
    return promise;
  }

  #reply(index: number, raw: unknown): void {
    let outcome: NodeOutcome<T>;
    try {
      outcome = { state: "ok", value: this.options.parse(raw, this.clients[index]!) };
    } catch (error) {
      outcome = { state: "error", error: toError(error) };
    }
    this.#settle(index, outcome);
  }

  #fail(index: number, error: unknown): void {
    this.#settle(index, { state: "error", error: toError(error) });
  }

  #settle(index: number, outcome: NodeOutcome<T>): void {
    if (this.#done) {
      const early = this.options.early;
      this.options.onLate?.(this.options.nodes?.[index] ?? index, outcome, this.options, early !== undefined && this.#votesFor >= early.quorum);
      return;
    }
    this.outcomes[index] = outcome;
    this.#answered += 1;
    this.#undecided -= 1;
    const early = this.options.early;
    if (early && outcome.state === "ok" && early.isFor(outcome.value)) this.#votesFor += 1;
    if (
      this.#answered === this.clients.length ||
      (early && (this.#votesFor >= early.quorum || (early.when === "either" && this.#votesFor + this.#undecided < early.quorum)))
    ) {
      this.#finish();
    }
  }

  #timeout(): void {
    this.#cancelDeadline = undefined;
    for (let index = 0; index < this.outcomes.length; index++) {
      if (this.outcomes[index]!.state === "pending") {
        this.outcomes[index] = { state: "error", error: new NodeTimeoutError(this.options.nodes?.[index] ?? index, this.options.timeoutMs) };
      }
    }
    this.#finish();
  }

  #finish(): void {
    if (this.#done) return;
    this.#done = true;
    this.#cancelDeadline?.();
    // No copy: once done, the round never writes to `outcomes` again (late answers go to onLate).
    this.#resolve!(this.outcomes);
  }
}

export function runRound<T>(clients: readonly ScriptClient[], command: RoundCommand, options: RoundOptions<T>): Promise<Array<NodeOutcome<T>>> {
  return new Round(clients, command, options).run();
}

export const quorumOf = (nodeCount: number): number => Math.floor(nodeCount / 2) + 1;
