import { hashOf } from "./key-bits";

/** Table slots to start with (a power of two); the table doubles when half full. */
const INITIAL_TABLE = 1 << 12;
/**
 * Code units of a block of the arena (512 KiB): the arena grows a block at a time, never copied (a million locks'
 * keys and values are about 80 MB, which a doubling array would copy in one go on the console's main thread).
 */
const BLOCK_BITS = 18;
const BLOCK_UNITS = 1 << BLOCK_BITS;
const IN_BLOCK = BLOCK_UNITS - 1;
/** Records to start with; they double when full. */
const INITIAL_RECORDS = 1 << 10;

/** Int32s per record: the key's hash, where its key and value start in the arena and their lengths, the lock's slot, a small code. */
const RECORD = 7;
const HASH = 0;
/** Where a text starts in the arena: its block's number shifted by `BLOCK_BITS`, plus where in the block. */
const KEY_AT = 1;
/** -1: a free record. */
const KEY_LENGTH = 2;
const VALUE_AT = 3;
const VALUE_LENGTH = 4;
const SLOT = 5;
const CODE = 6;

/** Code units decoded per call of `String.fromCharCode` (its arguments sit on the stack). */
const DECODE_CHUNK = 8_192;

/** What `take` gives back of a lock it removes. */
export interface ColdLock {
  value: string;
  slot: number;
  code: number;
  wakeAt: number;
}

/**
 * Locks nothing happens to, held by a million and more, kept without an object of their own: each key and value's
 * UTF-16 code units sit in one arena, found by open addressing on a hash of the key (as `KeyBits` does), and each
 * lock's record (where its key and value are, the slot of its numbers in the store's `TimeSlots`, a small code of
 * the caller's, and when it must wake) sits in typed arrays. With one `LockRecord`, its key and its value each an
 * object of the JavaScript heap, a full collection of a million held locks marked three million objects, a fifth of
 * a second of the console's main thread while the live view waited; here there are none.
 *
 * Exact: keys are compared code unit by code unit, and a key and value read back are the strings put in. A key or
 * value may be at most `BLOCK_UNITS` code units long (the store keeps longer ones as objects).
 */
export class ColdLocks {
  private mask = INITIAL_TABLE - 1;
  /** Per table slot, a record's number + 1 (0: empty). */
  private table = new Int32Array(INITIAL_TABLE);
  private records = new Int32Array(INITIAL_RECORDS * RECORD).fill(-1);
  private wakes = new Float64Array(INITIAL_RECORDS);
  /** Records ever used (the highest number + 1): records below it are live or free. */
  private high = 0;
  private free: number[] = [];
  private blocks: Uint16Array[] = [];
  /** Code units used in the last block. */
  private used = BLOCK_UNITS;
  /** Code units written in all, and those no live record points to any more (compacted away when they are most of it). */
  private written = 0;
  private garbage = 0;
  private count = 0;
  /** No live record wakes before this (a bound: see `due`). */
  private earliestWake = Number.POSITIVE_INFINITY;

  get size(): number {
    return this.count;
  }

  /** Records below this number may be live (for a walk by number: see `isLive`). */
  get span(): number {
    return this.high;
  }

  /** Bytes held: the arena, the table and the records. */
  get bytes(): number {
    return this.blocks.length * BLOCK_UNITS * 2 + this.table.byteLength + this.records.byteLength + this.wakes.byteLength;
  }

  has(key: string): boolean {
    return this.find(key, hashOf(key)) >= 0;
  }

  /** The live record of `key`, or -1. */
  recordOf(key: string): number {
    const at = this.find(key, hashOf(key));
    return at < 0 ? -1 : (this.table[at] as number) - 1;
  }

  /**
   * Keeps the lock `key` (which must not be here): its value, its slot of numbers, a code, and when it must wake
   * (epoch ms; Infinity: never by itself). Returns its record's number.
   */
  put(key: string, value: string, slot: number, code: number, wakeAt: number): number {
    if (key.length > BLOCK_UNITS || value.length > BLOCK_UNITS) throw new RangeError(`Expected a key and a value of at most ${BLOCK_UNITS} code units, got ${key.length} and ${value.length}`);
    const hash = hashOf(key);
    if (this.find(key, hash) >= 0) throw new Error(`Expected ${JSON.stringify(key)} not to be kept cold already`);
    if ((this.count + 1) * 2 > this.mask + 1) this.growTable();
    const record = this.free.pop() ?? this.newRecord();
    const at = record * RECORD;
    const records = this.records;
    records[at + HASH] = hash;
    records[at + KEY_AT] = this.write(key);
    records[at + KEY_LENGTH] = key.length;
    records[at + VALUE_AT] = this.write(value);
    records[at + VALUE_LENGTH] = value.length;
    records[at + SLOT] = slot;
    records[at + CODE] = code;
    this.wakes[record] = wakeAt;
    if (wakeAt < this.earliestWake) this.earliestWake = wakeAt;
    let t = hash & this.mask;
    while (this.table[t] !== 0) t = (t + 1) & this.mask;
    this.table[t] = record + 1;
    this.count += 1;
    return record;
  }

  /** Removes `key`'s lock and gives back what was kept of it (into `out`); null when it is not here. */
  take(key: string, out: ColdLock): ColdLock | null {
    const t = this.find(key, hashOf(key));
    if (t < 0) return null;
    const record = (this.table[t] as number) - 1;
    out.value = this.valueOf(record);
    out.slot = this.slotOf(record);
    out.code = this.codeOf(record);
    out.wakeAt = this.wakes[record] as number;
    this.remove(t, record);
    return out;
  }

  isLive(record: number): boolean {
    return record >= 0 && record < this.high && (this.records[record * RECORD + KEY_LENGTH] as number) >= 0;
  }

  keyOf(record: number): string {
    const at = record * RECORD;
    return this.read(this.records[at + KEY_AT] as number, this.records[at + KEY_LENGTH] as number);
  }

  valueOf(record: number): string {
    const at = record * RECORD;
    return this.read(this.records[at + VALUE_AT] as number, this.records[at + VALUE_LENGTH] as number);
  }

  slotOf(record: number): number {
    return this.records[record * RECORD + SLOT] as number;
  }

  codeOf(record: number): number {
    return this.records[record * RECORD + CODE] as number;
  }

  /**
   * The keys of the locks that must wake by `until` (their `wakeAt` is not later), for the caller to take. A pass
   * over the records' wake times only when the earliest may be due: nearly always a comparison.
   */
  due(until: number): string[] {
    if (until < this.earliestWake) return [];
    const out: string[] = [];
    let earliest = Number.POSITIVE_INFINITY;
    for (let record = 0; record < this.high; record++) {
      if ((this.records[record * RECORD + KEY_LENGTH] as number) < 0) continue;
      const wakeAt = this.wakes[record] as number;
      if (wakeAt <= until) out.push(this.keyOf(record));
      else if (wakeAt < earliest) earliest = wakeAt;
    }
    this.earliestWake = earliest;
    return out;
  }

  /** The table slot of `key`, or -1. */
  private find(key: string, hash: number): number {
    const { table, records, blocks, mask } = this;
    for (let t = hash & mask; ; t = (t + 1) & mask) {
      const entry = table[t] as number;
      if (entry === 0) return -1;
      const at = (entry - 1) * RECORD;
      if (records[at + HASH] !== hash || records[at + KEY_LENGTH] !== key.length) continue;
      const where = records[at + KEY_AT] as number;
      const block = blocks[where >>> BLOCK_BITS] as Uint16Array;
      const start = where & IN_BLOCK;
      let i = 0;
      while (i < key.length && block[start + i] === key.charCodeAt(i)) i++;
      if (i === key.length) return t;
    }
  }

  /** Empties table slot `t` (record `record`'s), moving back the entries after it that probed past it. */
  private remove(t: number, record: number): void {
    const { table, records, mask } = this;
    const at = record * RECORD;
    this.garbage += (records[at + KEY_LENGTH] as number) + (records[at + VALUE_LENGTH] as number);
    records[at + KEY_LENGTH] = -1;
    this.free.push(record);
    this.count -= 1;
    let hole = t;
    for (let next = (t + 1) & mask; table[next] !== 0; next = (next + 1) & mask) {
      const home = (records[((table[next] as number) - 1) * RECORD + HASH] as number) & mask;
      // The entry at `next` may move into the hole unless its home lies after the hole, up to `next` (cyclically).
      const stays = hole <= next ? home > hole && home <= next : home > hole || home <= next;
      if (stays) continue;
      table[hole] = table[next] as number;
      hole = next;
    }
    table[hole] = 0;
    if (this.count === 0) this.reset();
    else if (this.garbage > BLOCK_UNITS && this.garbage * 2 > this.written) this.compact();
  }

  private newRecord(): number {
    if (this.high * RECORD === this.records.length) {
      const records = new Int32Array(this.records.length * 2).fill(-1);
      records.set(this.records);
      this.records = records;
      const wakes = new Float64Array(this.wakes.length * 2);
      wakes.set(this.wakes);
      this.wakes = wakes;
    }
    return this.high++;
  }

  /** Appends `text`'s code units to the arena (in the last block, or a new one); returns where they start. */
  private write(text: string): number {
    if (this.used + text.length > BLOCK_UNITS) {
      if (this.blocks.length === 1 << (31 - BLOCK_BITS)) throw new RangeError(`Expected the cold locks' keys and values to fit in ${2 ** 31} code units`);
      this.blocks.push(new Uint16Array(BLOCK_UNITS));
      this.used = 0;
    }
    const block = this.blocks[this.blocks.length - 1] as Uint16Array;
    const start = this.used;
    for (let i = 0; i < text.length; i++) block[start + i] = text.charCodeAt(i);
    this.used += text.length;
    this.written += text.length;
    return ((this.blocks.length - 1) << BLOCK_BITS) | start;
  }

  private read(where: number, length: number): string {
    const block = this.blocks[where >>> BLOCK_BITS] as Uint16Array;
    const start = where & IN_BLOCK;
    if (length <= DECODE_CHUNK) return String.fromCharCode.apply(null, block.subarray(start, start + length) as unknown as number[]);
    let text = "";
    for (let i = 0; i < length; i += DECODE_CHUNK) text += String.fromCharCode.apply(null, block.subarray(start + i, start + Math.min(length, i + DECODE_CHUNK)) as unknown as number[]);
    return text;
  }

  /** Rewrites the arena with the live records' keys and values only. */
  private compact(): void {
    const old = this.blocks;
    this.blocks = [];
    this.used = BLOCK_UNITS;
    this.written = 0;
    this.garbage = 0;
    const records = this.records;
    for (let record = 0; record < this.high; record++) {
      const at = record * RECORD;
      if ((records[at + KEY_LENGTH] as number) < 0) continue;
      for (const [start, length] of [
        [KEY_AT, KEY_LENGTH],
        [VALUE_AT, VALUE_LENGTH],
      ] as const) {
        const from = records[at + start] as number;
        const n = records[at + length] as number;
        if (this.used + n > BLOCK_UNITS) {
          this.blocks.push(new Uint16Array(BLOCK_UNITS));
          this.used = 0;
        }
        const into = this.blocks.length - 1;
        (this.blocks[into] as Uint16Array).set((old[from >>> BLOCK_BITS] as Uint16Array).subarray(from & IN_BLOCK, (from & IN_BLOCK) + n), this.used);
        records[at + start] = (into << BLOCK_BITS) | this.used;
        this.used += n;
        this.written += n;
      }
    }
  }

  /** Back to the first sizes once empty (a burst of cold locks gone leaves no tables behind). */
  private reset(): void {
    this.mask = INITIAL_TABLE - 1;
    this.table = new Int32Array(INITIAL_TABLE);
    this.records = new Int32Array(INITIAL_RECORDS * RECORD).fill(-1);
    this.wakes = new Float64Array(INITIAL_RECORDS);
    this.high = 0;
    this.free = [];
    this.blocks = [];
    this.used = BLOCK_UNITS;
    this.written = 0;
    this.garbage = 0;
    this.earliestWake = Number.POSITIVE_INFINITY;
  }

  private growTable(): void {
    const size = (this.mask + 1) * 2;
    const mask = size - 1;
    const table = new Int32Array(size);
    for (let record = 0; record < this.high; record++) {
      if ((this.records[record * RECORD + KEY_LENGTH] as number) < 0) continue;
      let t = (this.records[record * RECORD + HASH] as number) & mask;
      while (table[t] !== 0) t = (t + 1) & mask;
      table[t] = record + 1;
    }
    this.table = table;
    this.mask = mask;
  }
}
