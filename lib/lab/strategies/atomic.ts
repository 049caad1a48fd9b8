import { decrementIfPositive } from "../atomic";
import type { Strategy } from "../strategy";

/** No lock: the work, then one script that decrements only while the stock is positive. */
export const atomic: Strategy = {
  async step(worker, ctx) {
    await ctx.busy();
    if (ctx.halt.aborted) return "stopped";
    const after = await decrementIfPositive(worker.clients[0]!, ctx.keys.stock);
    if (after < 0) return "sold-out";
    return ctx.sold(after);
  },
};
