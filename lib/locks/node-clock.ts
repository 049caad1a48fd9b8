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
  /** The offset's moves (when, by how much), the last `ageMs`: see `recentShift`. */
  private shifts: Array<{ at: number; by: number }> = [];

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
      const offset = (sentAt + receivedAt) / 2 - nodeMs;
      const by = Math.abs(offset - this.offset);
      if (by >= 1) {
        this.shifts = this.shifts.filter((s) => receivedAt - s.at < this.ageMs).slice(-31);
        this.shifts.push({ at: receivedAt, by });
      }
      this.offset = offset;
      this.bestRtt = rtt;
      this.bestAt = receivedAt;
    }
    return nodeMs + this.offset;
  }

  /**
   * How far the offset moved, in all, over the last `ageMs`: a TTL end read before a move and one read after it
   * disagree by up to that much with nothing changed on the node (it moves most while the console starts, its
   * first reads slowed by the start's own work, and a quicker read then takes over).
   */
  recentShift(now: number): number {
    let total = 0;
    for (const shift of this.shifts) if (now - shift.at < this.ageMs) total += shift.by;
    return total;
  }
}
