import { readWorkWrite, type Strategy } from "../strategy";

/** The read-modify-write race: read, work, write back, no lock. */
export const none: Strategy = {
  step(worker, ctx) {
    return readWorkWrite(ctx, worker.clients[0]!);
  },
};
