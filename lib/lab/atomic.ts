import { defineScript, runScript, type ScriptClient } from "@lockscope/redlock";

/**
 * The `atomic` strategy's whole order: decrement the stock only while it is positive, in one script, so no
 * lock is needed at all. It is the baseline a lock has to justify itself against.
 *
 * KEYS[1]: the stock. Reply: the stock after the sale, or -1 when it was already sold out.
 */
export const DECREMENT_IF_POSITIVE_LUA = `
local stock = tonumber(redis.call("GET", KEYS[1]) or "0")
if stock == nil or stock <= 0 then return -1 end
return redis.call("DECR", KEYS[1])
`;

const DECREMENT = defineScript(DECREMENT_IF_POSITIVE_LUA);

/** Scripts only (EVALSHA, EVAL when the node lacks the script). */
export type AtomicClient = ScriptClient;

/** Sells one unit; resolves the stock left, or -1 when sold out. EVALSHA, EVAL when the node lacks the script. */
export async function decrementIfPositive(client: AtomicClient, stockKey: string): Promise<number> {
  const reply = await runScript(client, DECREMENT, [stockKey]);
  if (typeof reply !== "number") throw new Error(`Unexpected reply from the decrement script: ${String(reply)}`);
  return reply;
}
