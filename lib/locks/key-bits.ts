/** Slots of a new table (a power of two); it doubles when half full. */
const INITIAL_SLOTS = 1 << 12;
/** Code units of a new arena; it doubles when full. */
const INITIAL_ARENA = 1 << 15;

/**
 * A few bits per string key (bit i: node i, say) for a million keys and more, looked up at a fraction of what a
 * `Map` costs at that size. The keys' UTF-16 code units sit one after another in one arena and are found by open
 * addressing on a 32-bit hash kept beside each slot: a lookup reads two typed arrays and a few code units, where
 * a `Map` of a million entries reads its hash table, its entry, the key string and the value object, each a
 * cache miss of its own (measured here: 0.2-0.4 µs against 1.3 µs per lookup of a key fresh from a reply).
 * Exact: a key is only ever equal to itself (the hash only picks where to look).
 */
export class KeyBits {
  private mask = INITIAL_SLOTS - 1;
  /** Per slot: the key's hash; its arena offset + 1 (0: an empty slot); its length; its bits. */
  private hashes = new Int32Array(INITIAL_SLOTS);
  private offsets = new Int32Array(INITIAL_SLOTS);
  private lengths = new Int32Array(INITIAL_SLOTS);
  private bits = new Int32Array(INITIAL_SLOTS);
  private arena = new Uint16Array(INITIAL_ARENA);
  private used = 0;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** The key's bits; 0 for a key never given any. */
  get(key: string): number {
    const slot = this.find(key, hashOf(key));
    return slot < 0 ? 0 : (this.bits[slot] as number);
  }

  /** Sets `bits` on the key (an or with those it has). */
  or(key: string, bits: number): void {
    const hash = hashOf(key);
    const slot = this.find(key, hash);
    if (slot >= 0) {
      this.bits[slot] = (this.bits[slot] as number) | bits;
      return;
    }
    if ((this.count + 1) * 2 > this.mask + 1) this.grow();
    let at = hash & this.mask;
    while (this.offsets[at] !== 0) at = (at + 1) & this.mask;
    if (this.used + key.length > this.arena.length) {
      const arena = new Uint16Array(Math.max(this.arena.length * 2, this.used + key.length));
      arena.set(this.arena.subarray(0, this.used));
      this.arena = arena;
    }
    for (let i = 0; i < key.length; i++) this.arena[this.used + i] = key.charCodeAt(i);
    this.hashes[at] = hash;
    this.offsets[at] = this.used + 1;
    this.lengths[at] = key.length;
    this.bits[at] = bits;
    this.used += key.length;
    this.count += 1;
  }

  /** Takes every bit off the key (a key never given any is left out). */
  clear(key: string): void {
    const slot = this.find(key, hashOf(key));
    if (slot >= 0) this.bits[slot] = 0;
  }

  /** The key's slot, or -1. */
  private find(key: string, hash: number): number {
    const { hashes, offsets, lengths, arena, mask } = this;
    for (let at = hash & mask; ; at = (at + 1) & mask) {
      const offset = offsets[at] as number;
      if (offset === 0) return -1;
      if (hashes[at] !== hash || lengths[at] !== key.length) continue;
      let i = 0;
      const start = offset - 1;
      while (i < key.length && arena[start + i] === key.charCodeAt(i)) i++;
      if (i === key.length) return at;
    }
  }

  private grow(): void {
    const { hashes, offsets, lengths, bits } = this;
    const size = (this.mask + 1) * 2;
    this.mask = size - 1;
    this.hashes = new Int32Array(size);
    this.offsets = new Int32Array(size);
    this.lengths = new Int32Array(size);
    this.bits = new Int32Array(size);
    for (let from = 0; from < offsets.length; from++) {
      if (offsets[from] === 0) continue;
      let at = (hashes[from] as number) & this.mask;
      while (this.offsets[at] !== 0) at = (at + 1) & this.mask;
      this.hashes[at] = hashes[from] as number;
      this.offsets[at] = offsets[from] as number;
      this.lengths[at] = lengths[from] as number;
      this.bits[at] = bits[from] as number;
    }
  }
}

/**
 * Chosen at random per process: key names are written by whoever can write to the lock nodes, and a fixed hash
 * would let them pick names that all land on the same slots.
 */
const SEED = Math.floor(Math.random() * 2 ** 32);

/** FNV-1a over the code units from a per-process seed, then murmur3's finaliser (so that keys differing in their last characters spread). */
export function hashOf(key: string): number {
  let h = (0x811c9dc5 ^ SEED) | 0;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}
