/**
 * A lock node's clock on this console's: the batched read takes every key's PTTL and the node's `TIME` in one
 * script, so a TTL's end is exact in the node's clock, and one offset per node carries it onto the console's.
 *
 * Why not the read's round trip: its reply can wait in a busy console's event loop for tens of ms, so an
 * estimate from when the reply was handled moves with the console's load, and two reads of an untouched key
 * would disagree by more than the slack that tells an extension from noise. The offset is taken from the read
 * with the shortest round trip seen lately (the least disturbed), so it changes rarely, and by little.
 */
export class NodeClock {
  private offset = Number.NaN;
  private bestRtt = Infinity;
  private bestAt = 0;

  /**
   * @param ageMs How long the best round trip stands before a slower read may replace it (the clocks drift
   * apart slowly; a read a little slower than the best of the last minute is still a good one).
   */
  constructor(private readonly ageMs = 60_000) {}

  /** `nodeMs` (the node's clock, read between `sentAt` and `receivedAt` on this console's) on this console's clock. */
  toLocal(nodeMs: number, sentAt: number, receivedAt: number): number {
    if (!Number.isFinite(nodeMs)) return (sentAt + receivedAt) / 2;
    const rtt = Math.max(0, receivedAt - sentAt);
    // The best round trip ages by 1 ms for every `ageMs / 10`, so a clock that drifts is followed within minutes.
    const aged = this.bestRtt + ((receivedAt - this.bestAt) * 10) / this.ageMs;
    if (Number.isNaN(this.offset) || rtt <= aged) {
      this.offset = (sentAt + receivedAt) / 2 - nodeMs;
      this.bestRtt = rtt;
      this.bestAt = receivedAt;
    }
    return nodeMs + this.offset;
  }
}
