/** Slots per block: a block of a lock table on three nodes is 1,024 × 17 doubles (136 KiB). */
const BLOCK_BITS = 10;
const BLOCK = 1 << BLOCK_BITS;
const IN_BLOCK = BLOCK - 1;
const FULL_WORD = 0xffffffff;

/**
 * The numbers of many locks (each lock's times, its nodes' expiries and its small integers: `width` doubles a
 * lock), in blocks of doubles outside the JavaScript heap. A lock holds the index of its slot, a small integer,
 * instead of fields or an array of its own: with a million locks held, their arrays were two million objects
 * (the array and its store of doubles) for every full collection of the console's heap to mark, and their fields
 * eight more for it to visit per lock.
 *
 * A slot is taken when a lock is made and given back when the lock is gone for good (`give`). The lowest free
 * slot is taken first, so that after a burst of locks the last blocks empty as their locks go, and blocks left
 * empty at the end are released but one: the table shrinks back rather than keeping its high-water mark.
 */
export class TimeSlots {
  readonly width: number;
  private readonly blocks: Float64Array[] = [];
  /** Per block, a bit per slot taken. */
  private readonly taken: Uint32Array[] = [];
  /** Per block, how many of its slots are taken. */
  private readonly counts: number[] = [];
  /** No block below this one has a free slot. */
  private lowestFree = 0;
  private used = 0;

  constructor(width: number) {
    if (!Number.isInteger(width) || width < 1) throw new RangeError(`Expected a positive whole number of doubles a slot, got ${width}`);
    this.width = width;
  }

  /** A slot of its own for a new lock (the lowest free one), every number NaN. */
  take(): number {
    let block = this.lowestFree;
    while (block < this.blocks.length && this.counts[block] === BLOCK) block++;
    if (block === this.blocks.length) {
      this.blocks.push(new Float64Array(BLOCK * this.width));
      this.taken.push(new Uint32Array(BLOCK >>> 5));
      this.counts.push(0);
    }
    this.lowestFree = block;
    const bits = this.taken[block] as Uint32Array;
    let word = 0;
    while (bits[word] === FULL_WORD) word++;
    const value = bits[word] as number;
    // The lowest clear bit of the word, alone.
    const bit = 31 - Math.clz32(~value & (value + 1));
    bits[word] = value | (1 << bit);
    this.counts[block] = (this.counts[block] as number) + 1;
    this.used += 1;
    const slot = (block << BLOCK_BITS) | (word << 5) | bit;
    const start = (slot & IN_BLOCK) * this.width;
    (this.blocks[block] as Float64Array).fill(Number.NaN, start, start + this.width);
    return slot;
  }

  /** The slot's lock is gone: the slot is free for the next lock (giving back a free slot does nothing). */
  give(slot: number): void {
    const block = slot >>> BLOCK_BITS;
    const bits = this.taken[block];
    if (bits === undefined) return;
    const word = (slot & IN_BLOCK) >>> 5;
    const mask = 1 << (slot & 31);
    const value = bits[word] as number;
    if ((value & mask) === 0) return;
    bits[word] = value & ~mask;
    this.counts[block] = (this.counts[block] as number) - 1;
    this.used -= 1;
    if (block < this.lowestFree) this.lowestFree = block;
    // One empty block is kept at the end, so that a table whose use hovers at a block's edge (a churn) does not
    // release and allocate a block over and over.
    while (this.counts.length > 1 && this.counts[this.counts.length - 1] === 0 && this.counts[this.counts.length - 2] === 0) {
      this.blocks.pop();
      this.taken.pop();
      this.counts.pop();
    }
    if (this.lowestFree > this.blocks.length) this.lowestFree = this.blocks.length;
  }

  get(slot: number, index: number): number {
    return (this.blocks[slot >>> BLOCK_BITS] as Float64Array)[(slot & IN_BLOCK) * this.width + index] as number;
  }

  set(slot: number, index: number, value: number): void {
    (this.blocks[slot >>> BLOCK_BITS] as Float64Array)[(slot & IN_BLOCK) * this.width + index] = value;
  }

  /** Slots in use (taken and not given back). */
  get size(): number {
    return this.used;
  }

  /** Bytes of doubles allocated for slots (whole blocks). */
  get bytes(): number {
    return this.blocks.length * BLOCK * this.width * Float64Array.BYTES_PER_ELEMENT;
  }
}
