import { createHash } from "node:crypto";

/** A Lua script with its SHA1, computed once, so calls send the 40-byte digest instead of the source. */
export interface Script {
  readonly source: string;
  readonly sha: string;
}

export function defineScript(source: string): Script {
  return Object.freeze({ source, sha: createHash("sha1").update(source).digest("hex") });
}

/** The narrow client a single script call needs. */
export interface EvalClient {
  evalsha(sha: string, numKeys: number, ...keysAndArgs: Array<string | number>): Promise<unknown>;
  eval(source: string, numKeys: number, ...keysAndArgs: Array<string | number>): Promise<unknown>;
}

/** True for the error a node answers EVALSHA with when it does not have the script cached. */
export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith("NOSCRIPT");
}

/**
 * EVALSHA on one node, falling back to EVAL when the node does not have the script cached (first use,
 * SCRIPT FLUSH, or a node that restarted empty). EVAL also loads the script, so the next EVALSHA hits.
 */
export function runScript(client: EvalClient, script: Script, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
  return client.evalsha(script.sha, keys.length, ...keys, ...args).catch((error: unknown) => {
    if (!isNoScript(error)) throw error;
    return client.eval(script.source, keys.length, ...keys, ...args);
  });
}
