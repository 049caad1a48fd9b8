import type { ScriptClient } from "@lockscope/redlock";
import { defineScript, runScript, setReplyDeadline, type Script } from "@lockscope/redlock";
import type { FormatReleaseResult, NodeReleaseResult, ReleaseOptions } from "./types";

/**
 * Force release for the formats that release with one script per node. Every script follows one contract:
 *
 *   KEYS[1]: the lock key; ARGV[1]: the holder id the operator saw, compared exactly (it may be "": a lock
 *   whose value is the empty string is held by the holder ""); ARGV[2]: a string value's digest or "" (see
 *   `STRING_COMPARE_DELETE`; the other scripts ignore it); ARGV[3] on: what the format adds for that node
 *   (`scriptRelease`'s `nodeArgs`).
 *   Reply: {code, redis type before the release, subscribers that received a wake message or -1 when none was
 *   sent}, where code is
 *     "deleted"   the holder is gone (the key deleted, or only that holder taken out of it)
 *     "absent"    no such key on this node
 *     "mismatch"  the key is there but that holder is not: it changed hands, nothing was touched
 *     "wrongtype" the key has another type or layout than the format's: nothing was touched
 *
 * and checks the key's type before any write, so a key that changed type since it was read is never touched.
 */

const CODES = new Set(["deleted", "absent", "mismatch", "wrongtype"] as const);
type Code = "deleted" | "absent" | "mismatch" | "wrongtype";

function parseReply(index: number, raw: unknown): NodeReleaseResult {
  if (!Array.isArray(raw)) throw new Error(`unexpected reply ${String(raw)}`);
  const code: unknown = raw[0];
  if (typeof code !== "string" || !CODES.has(code as Code)) throw new Error(`unexpected result ${String(code)}`);
  const type: unknown = raw[1];
  const woken: unknown = raw[2];
  return {
    index,
    result: code as Code,
    redisType: typeof type === "string" ? type : null,
    woken: typeof woken === "number" && woken >= 0 ? woken : null,
  };
}

/** `promise`, or "no answer" once `ms` passed and the replies received by then were read (see `setReplyDeadline`). */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let cancel: (() => void) | undefined;
  const timeout = new Promise<never>((_, reject) => {
    cancel = setReplyDeadline(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => cancel?.());
}

/** Runs a release script on every node in parallel; a node that fails or times out reports "error". */
export async function releaseOnEveryNode(
  clients: readonly ScriptClient[],
  script: Script,
  resource: string,
  holderId: string,
  options: ReleaseOptions,
  nodeArgs: (client: ScriptClient) => readonly string[] = () => [],
): Promise<NodeReleaseResult[]> {
  if (resource === "") throw new TypeError("Expected `resource` to be a non-empty string, got `` (string)");
  // An empty holder id is allowed: `SET lock ""` is a lock Redis holds, and every script compares the id
  // exactly (GET, HEXISTS, ZREM), so "" matches only a holder that is "" and never means "whatever is held".
  if (typeof holderId !== "string") throw new TypeError(`Expected \`holderId\` to be a string, got \`${String(holderId)}\` (${typeof holderId})`);
  return Promise.all(
    clients.map(async (client, index): Promise<NodeReleaseResult> => {
      try {
        return parseReply(index, await withTimeout(runScript(client, script, [resource], [holderId, options.valueDigest ?? "", ...nodeArgs(client)]), options.nodeTimeoutMs));
      } catch (error) {
        return { index, result: "error", error: (error instanceof Error ? error.message : String(error)).slice(0, 200) };
      }
    }),
  );
}

/**
 * A release function for formats whose waiters (if any) are woken inside the script itself. `nodeArgs`: more
 * ARGV for the script on that node (ARGV[3] on).
 */
export function scriptRelease(script: Script, notifies: { holder: boolean; waiters: boolean }, nodeArgs?: (client: ScriptClient) => readonly string[]) {
  return async (clients: readonly ScriptClient[], resource: string, holderId: string, options: ReleaseOptions): Promise<FormatReleaseResult> => {
    const nodes = await releaseOnEveryNode(clients, script, resource, holderId, options, nodeArgs);
    const deleted = nodes.some((n) => n.result === "deleted");
    // Woken when a subscriber heard the wake message (one published to nobody wakes nobody).
    const woke = nodes.some((n) => n.result === "deleted" && n.woken !== null && n.woken > 0);
    return { nodes, notified: { holder: notifies.holder && deleted, waiters: notifies.waiters && woke } };
  };
}

/**
 * Lua for a release script: returns `mismatch` unless the string at `key` (of type `t`) is the value released,
 * compared by its digest (ARGV[2]) where one is given, else by its text (ARGV[1]).
 */
export const STRING_MISMATCH_LUA = `
local value = redis.call('GET', key)
if ARGV[2] ~= nil and ARGV[2] ~= '' then
  if redis.sha1hex(value) ~= ARGV[2] then return {'mismatch', t, -1} end
elseif value ~= ARGV[1] then return {'mismatch', t, -1} end`;

/**
 * Compare-and-delete of a string lock (a plain token, a redis-semaphore mutex, a ShedLock value): deleted only
 * while the key still holds exactly that value; with a digest (ARGV[2], a value longer than the read bound or
 * not all ASCII, whose text the console cannot send back byte for byte), while its value has that digest. No
 * message is published: these libraries' holders and waiters listen to nothing (they poll), so there is nobody
 * to tell.
 */
export const STRING_COMPARE_DELETE = defineScript(`
local key = KEYS[1]
local t = redis.call('TYPE', key)['ok']
if t == 'none' then return {'absent', t, -1} end
if t ~= 'string' then return {'wrongtype', t, -1} end
${STRING_MISMATCH_LUA}
redis.call('DEL', key)
return {'deleted', t, -1}
`);
