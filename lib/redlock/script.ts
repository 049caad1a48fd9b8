import { createHash } from "node:crypto";
import type { ScriptClient } from "./client.ts";
import { clusterScriptSource } from "./keys.ts";

/** A Lua script with its SHA1, computed once, so calls send the 40-byte digest instead of the source. */
export interface Script {
  readonly source: string;
  readonly sha: string;
  /** The same script for a cluster client: its companion keys in the resource's slot (see keys.ts). */
  readonly cluster: { readonly source: string; readonly sha: string };
}

const sha1 = (source: string) => createHash("sha1").update(source).digest("hex");

export function defineScript(source: string): Script {
  const sha = sha1(source);
  const clustered = clusterScriptSource(source);
  const cluster = clustered === source ? Object.freeze({ source, sha }) : Object.freeze({ source: clustered, sha: sha1(clustered) });
  return Object.freeze({ source, sha, cluster });
}

/**
 * Whether `client` is a Redis Cluster client (ioredis' `Cluster` says so in `isCluster`): the engine then
 * runs each script's cluster form on it.
 */
export function isClusterClient(client: unknown): boolean {
  return typeof client === "object" && client !== null && (client as { isCluster?: unknown }).isCluster === true;
}

/**
 * How ioredis's cluster client begins its error for a command it tried `maxRedirections` times (after MOVED,
 * CLUSTERDOWN, a dropped connection) whose last try got a reply error: that reply's text follows (ioredis
 * `Cluster.handleError`).
 */
const CLUSTER_TRIES_SPENT = "Too many Cluster redirections. Last error: ReplyError: ";

/**
 * The node does not have the script cached (first use, SCRIPT FLUSH, or a node that restarted empty). Also when a
 * cluster client's last try got the reply (a primary that restarted empty while the command was tried again): only
 * a reply that starts with NOSCRIPT, never an error that merely mentions it.
 */
export function isNoScript(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const { message } = error;
  return message.startsWith("NOSCRIPT") || (message.startsWith(CLUSTER_TRIES_SPENT) && message.startsWith("NOSCRIPT", CLUSTER_TRIES_SPENT.length));
}

/** @internal The error for a client whose `method` returned no promise (see `promised`). */
export function notAPromise(method: string, returned: unknown): TypeError {
  return new TypeError(
    `Expected the client's \`${method}()\` to return a promise (a promise-based client such as ioredis), got ${returned === null ? "null" : typeof returned}`,
  );
}

/**
 * @internal The client's answer as a promise, or a rejection with `notAPromise`: a callback-style client
 * (node_redis 3.x: every command returns a boolean) has the methods the engine needs but answers through
 * callbacks it is never given.
 */
export function promised(method: string, call: unknown): Promise<unknown> {
  if (typeof (call as Promise<unknown> | null | undefined)?.then === "function") return call as Promise<unknown>;
  return Promise.reject(notAPromise(method, call));
}

/**
 * EVALSHA, falling back to EVAL when the node lacks the script; EVAL also loads it, so the next EVALSHA
 * hits. The engine's rounds do the same inline (see round.ts) to stay allocation-free on the hot path.
 */
export function runScript(client: ScriptClient, script: Script, keys: readonly string[], args: ReadonlyArray<string | number> = []): Promise<unknown> {
  const form = isClusterClient(client) ? script.cluster : script;
  return Promise.resolve()
    .then(() => promised("evalsha", client.evalsha(form.sha, keys.length, ...keys, ...args)))
    .catch((error: unknown) => {
      if (!isNoScript(error)) throw error;
      return promised("eval", client.eval(form.source, keys.length, ...keys, ...args));
    });
}
