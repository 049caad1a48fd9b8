import { hashOf } from "./key-bits";

/**
 * A string-keyed map meant for a million entries and more, kept as 64 maps split by a hash of the key. A `Map`
 * that outgrows its table copies every entry into a new one on the main thread, in one go: at a million locks
 * under churn (entries made and dropped all the time) that was a pause of about 150 ms every so often, long
 * enough to show in the live view's delivery times. Split, each copy is a sixty-fourth of that. Iteration
 * goes shard by shard (no global insertion order), with a `Map` iterator's tolerance of changes made meanwhile.
 */
export class ShardedMap<V> {
  private readonly shards: Array<Map<string, V>> = [];
  private count = 0;

  constructor() {
    for (let i = 0; i < SHARDS; i++) this.shards.push(new Map());
  }

  get size(): number {
    return this.count;
  }

  get(key: string): V | undefined {
    return this.shardOf(key).get(key);
  }

  has(key: string): boolean {
    return this.shardOf(key).has(key);
  }

  set(key: string, value: V): this {
    const shard = this.shardOf(key);
    const before = shard.size;
    shard.set(key, value);
    this.count += shard.size - before;
    return this;
  }

  delete(key: string): boolean {
    const deleted = this.shardOf(key).delete(key);
    if (deleted) this.count -= 1;
    return deleted;
  }

  *values(): IterableIterator<V> {
    for (const shard of this.shards) yield* shard.values();
  }

  /**
   * Every key's value once, for a pass that yields between steps: a shard's keys are taken when its turn
   * comes, and each is visited with its value then (skipped if gone). A `Map` iterator would visit a key
   * twice if it were deleted and set again behind it (a lock ended and taken again during a slow pass),
   * at the end of the shard; keys new to the shard meanwhile are left to the next pass.
   */
  *valuesOnce(): IterableIterator<V> {
    for (const shard of this.shards) {
      for (const key of [...shard.keys()]) {
        const value = shard.get(key);
        if (value !== undefined) yield value;
      }
    }
  }

  *[Symbol.iterator](): IterableIterator<[string, V]> {
    for (const shard of this.shards) yield* shard;
  }

  private shardOf(key: string): Map<string, V> {
    return this.shards[hashOf(key) & (SHARDS - 1)] as Map<string, V>;
  }
}

/** A power of two. */
const SHARDS = 64;
