import { createHash } from "node:crypto";
import type Redis from "ioredis";
import { errorText } from "../echoed-arguments";
import { isScriptRefused } from "../locks/formats/read";
import type { RunSettings } from "./settings";

/**
 * Whether the lab's nodes run the Lua scripts its strategies need: `atomic` sells in a script on node 0, Redlock
 * takes and releases its locks by script on every node (EVALSHA, then EVAL for a script the node lacks), and
 * the fenced strategy also writes the stock on node 0 by script. A node that refuses them (EVAL and EVALSHA renamed
 * away or disabled, as some managed services do, or not granted to the Redis user) refuses every order: asked once
 * before the sale, so such a run fails at once, saying why, instead of retrying until its time limit.
 */

const PROBE = "return 1";
const PROBE_SHA = createHash("sha1").update(PROBE).digest("hex");

export interface ScriptRefusal {
  node: number;
  commands: Array<"EVAL" | "EVALSHA">;
  /** The node's first refusal, up to the arguments Redis repeats in it. */
  reply: string;
}

/** What `node` refuses of EVAL and EVALSHA; null when it runs them, or did not answer (not judged). */
export async function scriptRefusal(client: Pick<Redis, "eval" | "evalsha">, node: number): Promise<ScriptRefusal | null> {
  const commands: ScriptRefusal["commands"] = [];
  let reply = "";
  const ask = async (command: "EVAL" | "EVALSHA", send: () => Promise<unknown>): Promise<boolean> => {
    try {
      await send();
      return true;
    } catch (error) {
      // NOSCRIPT (EVAL refused, so the probe was never loaded) is no refusal; a timeout or a closed connection says nothing.
      if (!isScriptRefused(error)) return /NOSCRIPT/.test(errorText(error));
      commands.push(command);
      // Cut where Redis starts repeating the arguments (see echoed-arguments.ts): the rest of the run's error must stay.
      reply ||= errorText(error, { drop: true }).trim();
      return true;
    }
  };
  if (!(await ask("EVAL", () => client.eval(PROBE, 0)))) return null;
  if (!(await ask("EVALSHA", () => client.evalsha(PROBE_SHA, 0)))) return null;
  return commands.length === 0 ? null : { node, commands, reply };
}

const nodeName = (node: number) => `node ${node}`;
const listed = (words: readonly string[]) => (words.length <= 1 ? (words[0] ?? "") : `${words.slice(0, -1).join(", ")} and ${words.at(-1)}`);

/**
 * The run's verdict on the nodes' refusals: `fail` when the strategy cannot sell with them (the run's error),
 * `note` when it can (Redlock with a quorum of nodes that run scripts: the others count as down), or null.
 */
export function scriptVerdict(strategy: RunSettings["strategy"], nodeCount: number, refusals: readonly ScriptRefusal[]): { fail: string } | { note: string } | null {
  if (refusals.length === 0 || strategy === "none" || strategy === "naive") return null;
  const quorum = Math.floor(nodeCount / 2) + 1;
  const stockNodeRefuses = refusals.some((r) => r.node === 0);
  const groups = new Map<string, number[]>();
  for (const r of refusals) {
    const key = `${listed(r.commands)}: ${r.reply}`;
    groups.set(key, [...(groups.get(key) ?? []), r.node]);
  }
  const details = [...groups].map(([what, nodes]) => (groups.size === 1 ? what : `${listed(nodes.map(nodeName))}: ${what}`)).join("; ");
  const nodes = refusals.map((r) => nodeName(r.node));
  const refuse = `${listed(nodes)} refuse${nodes.length === 1 ? "s" : ""} them (${details})`;
  let why: string | null = null;
  if (strategy === "atomic" && stockNodeRefuses) why = "each order is one script on node 0, which holds the stock.";
  else if (strategy !== "atomic" && nodeCount - refusals.length < quorum) why = `a lock needs a quorum of ${quorum} of the ${nodeCount} nodes to run them, and ${nodeCount - refusals.length} ${nodeCount - refusals.length === 1 ? "does" : "do"}.`;
  else if (strategy === "redlock-fenced" && stockNodeRefuses) why = "the fenced reads and writes of the stock on node 0 are scripts.";
  if (why === null) {
    if (strategy === "atomic") return null;
    const who = listed(nodes);
    return { note: `${who[0]!.toUpperCase()}${who.slice(1)} refuse${nodes.length === 1 ? "s" : ""} Lua scripts (${details}): Redlock counted ${nodes.length === 1 ? "it" : "them"} as down for every lock.` };
  }
  return {
    fail: `The ${strategy} strategy runs Lua scripts, and ${refuse}: ${why} Allow scripts on the lock nodes (a rename-command in their configuration, or the ACL of the Redis user in their URL), or pick the naive or none strategy, which need none. Nothing was sold.`,
  };
}
