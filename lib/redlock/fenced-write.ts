import type { ScriptClient } from "./client.ts";
import { FENCED_WRITE_LUA } from "./fenced-write.lua.ts";
import { companionKey, LAST_FENCE_KEY_PREFIX, lastFenceKey } from "./keys.ts";
import { runRound } from "./round.ts";
import { defineScript, isClusterClient } from "./script.ts";
import * as check from "./validate.ts";

const SCRIPT = defineScript(FENCED_WRITE_LUA);

/** What to do to the data key when the fence is current. */
export type FencedOperation =
  | { type: "set"; value: string }
  | { type: "del" }
  /** Add `by` (negative to subtract) to an integer value (absent counts as 0); refuse when the result would drop below `min`. */
  | { type: "incrby"; by: number; min?: number };

export interface FencedWriteResult {
  applied: boolean;
  /** Why not: an older fence than one that already wrote, or the floor of an incrby. */
  reason: "stale-fence" | "below-min" | null;
  /** The highest fence that has written to this key, after this call. */
  lastFence: string;
  /** The key's value after the call (null when absent). */
  value: string | null;
}

export interface FencedWriteOptions {
  /**
   * How long the node may take to answer: past it the call rejects with `NodeTimeoutError` (the write may
   * still be applied later; a later write with a current fence is not affected). @default 1000
   */
  timeoutMs?: number;
}

/**
 * Applies a write only when `fence` is not older than the last fence seen by that key, in one Lua script,
 * so a holder that paused past its TTL has its late write rejected once the next holder has written.
 * The last fence lives in `fence-seen:<key>` (see `lastFenceKey`), a plain string next to the data (on a
 * cluster client in the key's slot: `fence-seen:{<key>}`, see `companionKey`). On a cluster, a `key` with a `}`
 * outside a hash tag is refused with a TypeError.
 *
 * Example, the lab's stock write: `fencedWrite(client, "stock", lock.fence, { type: "incrby", by: -1, min: 0 })`.
 */
export async function fencedWrite(client: ScriptClient, key: string, fence: string, operation: FencedOperation, options: FencedWriteOptions = {}): Promise<FencedWriteResult> {
  check.nonEmptyString("key", key);
  check.optionsObject<FencedWriteOptions>("fencedWrite", options, ["timeoutMs"]);
  const timeoutMs = check.timerMs("timeoutMs", options.timeoutMs ?? 1000, 1);
  check.fenceString("fence", fence);
  if (typeof operation !== "object" || operation === null) check.fail("operation", "an operation object", operation);
  let args: Array<string | number>;
  switch (operation.type) {
    case "set":
      if (typeof operation.value !== "string") check.fail("operation.value", "a string", operation.value);
      args = [fence, "set", operation.value, ""];
      break;
    case "del":
      args = [fence, "del", "", ""];
      break;
    case "incrby":
      if (!Number.isSafeInteger(operation.by)) check.fail("operation.by", "an integer", operation.by);
      if (operation.min !== undefined && !Number.isSafeInteger(operation.min)) check.fail("operation.min", "an integer", operation.min);
      args = [fence, "incrby", operation.by, operation.min ?? ""];
      break;
    default:
      check.fail("operation.type", '"set", "del" or "incrby"', (operation as { type: unknown }).type);
  }
  // On a cluster the last fence lives in the data key's slot (`fence-seen:{<key>}`), or one script could not touch both.
  const lastFence = isClusterClient(client) ? companionKey(LAST_FENCE_KEY_PREFIX, key, "cluster") : lastFenceKey(key);
  const [outcome] = await runRound([client], SCRIPT, { keys: [key, lastFence], args, timeoutMs, parse: (raw) => raw });
  if (outcome!.state !== "ok") throw outcome!.state === "error" ? outcome!.error : new Error("The node gave no answer");
  const raw = outcome!.value;
  if (!Array.isArray(raw) || raw.length < 3) throw new Error(`Unexpected reply from the fenced write script: ${String(raw)}`);
  const reply = raw as unknown[];
  const reason = reply[1];
  return {
    applied: reply[0] === 1,
    reason: reason === "stale-fence" || reason === "below-min" ? reason : null,
    lastFence: String(reply[2]),
    value: typeof reply[3] === "string" ? reply[3] : null,
  };
}

/** `fencedWrite` with a SET: true when applied. */
export async function fencedSet(client: ScriptClient, key: string, value: string, fence: string, options?: FencedWriteOptions): Promise<boolean> {
  return (await fencedWrite(client, key, fence, { type: "set", value }, options)).applied;
}
