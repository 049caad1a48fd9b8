import { createHash } from "node:crypto";
import type { ScriptClient } from "./client.ts";

/** A Lua script with its SHA1, computed once, so calls send the 40-byte digest instead of the source. */
export interface Script {
  readonly source: string;
  readonly sha: string;
}

export function defineScript(source: string): Script {
  return Object.freeze({ source, sha: createHash("sha1").update(source).digest("hex") });
}

/** The node does not have the script cached (first use, SCRIPT FLUSH, or a node that restarted empty). */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/**
 * EVALSHA, falling back to EVAL when the node lacks the script; EVAL also loads it, so the next EVALSHA
 * hits. The engine's rounds do the same inline (see round.ts) to stay allocation-free on the hot path.
 */
export function runScript(client: ScriptClient, script: Script, keys: readonly string[], args: ReadonlyArray<string | number> = []): Promise<unknown> {
  return client.evalsha(script.sha, keys.length, ...keys, ...args).catch((error: unknown) => {
    if (!isNoScript(error)) throw error;
    return client.eval(script.source, keys.length, ...keys, ...args);
  });
}
