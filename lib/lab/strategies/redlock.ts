import { AcquireAbortedError, fencedWrite, type RedlockLock, type ReleaseResult } from "@lockscope/redlock";
import { countAttempts, lockTaken, readWorkWrite, waitingOrder, type Strategy } from "../strategy";

/**
 * What a release found: `released` on a quorum; `lost` when a quorum answered that it no longer held the lock
 * (it expired under its holder); `unconfirmed` when too few nodes answered either way (a node error: the lock
 * expires by its TTL). `release` null: the release itself threw.
 */
export function releaseVerdict(release: ReleaseResult | null, nodeCount: number): "released" | "lost" | "unconfirmed" {
  if (release?.released) return "released";
  const quorum = Math.floor(nodeCount / 2) + 1;
  const against = release?.votes.filter((v) => v.vote === "against").length ?? 0;
  return against > nodeCount - quorum ? "lost" : "unconfirmed";
}

function attemptsOf(error: unknown): number {
  if (error instanceof AcquireAbortedError) return error.attempts;
  const attempts = (error as { attempts?: unknown } | null)?.attempts;
  return typeof attempts === "number" ? attempts : 1;
}

/** Redlock over every node; fenced, the stock is read and written only with a current fence. */
export const redlock: Strategy = {
  async step(worker, ctx) {
    const client = worker.clients[0]!;
    // Carried over from an acquisition that failed with an error: the same order, waiting on.
    const order = waitingOrder(worker);
    let lock: RedlockLock;
    try {
      lock = await worker.redlock!.acquire([ctx.keys.lock], ctx.settings.ttlMs, { signal: ctx.close });
    } catch (error) {
      // The engine's errors say how many attempts were made (an abort: the ones completed); one at least was.
      countAttempts(order, attemptsOf(error), ctx.tally);
      throw error;
    }
    countAttempts(order, lock.attempts, ctx.tally);
    lockTaken(worker, ctx.tally);
    try {
      const fence = lock.fence;
      if (fence === null) return await readWorkWrite(ctx, client);
      // A fenced read: adding 0 records our fence on the stock, so a holder that paused past its TTL
      // has its later write refused even when we have not written yet. With a floor of 1 a stock of 0 (sold out)
      // is refused as below it, fence recorded, and nothing written: a stock key gone (deleted, evicted) is not
      // made again as "0", which would pass for a sell-out; the run's reads of the stock find it gone.
      const read = await fencedWrite(client, ctx.keys.stock, fence, { type: "incrby", by: 0, min: 1 });
      if (!read.applied && read.reason !== "below-min") {
        ctx.tally.staleWritesRejected += 1;
        return "rejected";
      }
      const stock = Number(read.value);
      if (!(stock > 0)) return "sold-out";
      await ctx.busy();
      if (ctx.halt.aborted) return "stopped";
      const write = await fencedWrite(client, ctx.keys.stock, fence, { type: "set", value: String(stock - 1) });
      if (!write.applied) {
        ctx.tally.staleWritesRejected += 1;
        return "rejected";
      }
      return ctx.sold(stock - 1);
    } finally {
      const release = await lock.release().catch(() => null);
      const verdict = releaseVerdict(release, worker.clients.length);
      if (verdict === "lost") ctx.tally.locksLost += 1;
      else if (verdict === "unconfirmed") ctx.tally.releaseErrors += 1;
    }
  },
};
