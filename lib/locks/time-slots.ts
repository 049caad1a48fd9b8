/** Slots per block: a block of a lock table on three nodes is 4,096 × 9 doubles (288 KiB). */
const BLOCK_BITS = 12;
const BLOCK = 1 << BLOCK_BITS;
const IN_BLOCK = BLOCK - 1;

/**
 * The numbers of many locks (each lock's times and its nodes' expiries: `width` doubles a lock), in blocks of
 * doubles outside the JavaScript heap. A lock holds the index of its slot, a small integer, instead of an array
 * of its own: with a million locks held, their arrays were two million objects (the array and its store of
 * doubles) for every full collection of the console's heap to mark, and 120 bytes of heap a lock.
 *
 * A slot is taken when a lock is made and given back when the lock is gone for good (`give`); a slot given back
 * is the next one taken. Blocks are never given back: the table's high-water mark stays allocated (9 doubles,
 * 72 bytes a lock on three nodes), as a `Map` keeps its largest table.
 */
export class TimeSlots {
  readonly width: number;
  private readonly blocks: Float64Array[] = [];
  /** Slots given back, to be taken again first. */
  private readonly free: number[] = [];
  private next = 0;
  private used = 0;

  constructor(width: number) {
    if (!Number.isInteger(width) || width < 1) throw new RangeError(`Expected a positive whole number of doubles a slot, got ${width}`);
    this.width = width;
  }

  /** A slot of its own for a new lock, every number NaN. */
  take(): number {
    const slot = this.free.length > 0 ? (this.free.pop() as number) : this.next++;
    const block = slot >>> BLOCK_BITS;
    while (this.blocks.length <= block) this.blocks.push(new Float64Array(BLOCK * this.width));
    const start = (slot & IN_BLOCK) * this.width;
    (this.blocks[block] as Float64Array).fill(Number.NaN, start, start + this.width);
    this.used += 1;
    return slot;
  }

  /** The slot's lock is gone: the slot is free for the next lock. */
  give(slot: number): void {
    this.free.push(slot);
    this.used -= 1;
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
}
