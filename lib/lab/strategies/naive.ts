import { acquireNaive, NaiveLockLostError, NaiveLockTimeoutError, releaseNaive, abortableSleep } from "@lockscope/redlock";
import { retryDelayFor } from "../settings";
import { countAttempts, lockTaken, readWorkWrite, waitingOrder, type Strategy } from "../strategy";

/** The single-node SETNX lock on node 0, from the engine's naive module; retries counted here. */
export const naive: Strategy = {
  async step(worker, ctx) {
    const client = worker.clients[0]!;
    // Carried over from an attempt that failed on a node error: the same order, waiting on.
    const order = waitingOrder(worker);
    const retryDelayMs = retryDelayFor(ctx.settings.workers);
    let token: string | null = null;
    while (token === null) {
      if (ctx.close.aborted) return "stopped";
      countAttempts(order, 1, ctx.tally);
      try {
        // timeoutMs 0: one SETNX per call, so this loop sees (and counts) every attempt.
        token = await acquireNaive(client, ctx.keys.lock, ctx.settings.ttlMs, { timeoutMs: 0, retryDelayMs: 0, label: `lab ${ctx.runId} worker ${worker.index}` });
      } catch (error) {
        if (!(error instanceof NaiveLockTimeoutError)) throw error;
        await abortableSleep(retryDelayMs, ctx.close);
      }
    }
    lockTaken(worker, ctx.tally);
    try {
      return await readWorkWrite(ctx, client);
    } finally {
      // A release that failed on a node error is no failed order (it sold, or found the stock sold out): the
      // lock expires by its TTL, which the next buyer waits out.
      await releaseNaive(client, ctx.keys.lock, token).catch((error: unknown) => {
        if (error instanceof NaiveLockLostError) ctx.tally.locksLost += 1;
        else ctx.tally.releaseErrors += 1;
      });
    }
  },
};
