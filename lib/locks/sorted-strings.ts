import { byText } from "./groups";

/** Strings per chunk at most: a chunk splits in two past it. */
const CHUNK_MAX = 1_024;

/** In the order the lock list sorts resources in. */
const before = (a: string, b: string) => byText(a, b) < 0;

/**
 * A set of strings kept in order as they come and go, read by position: sorted chunks of at most 1,024, so an
 * insertion or a deletion moves at most a chunk's worth of references (a sorted array of a million would move
 * half a million on average), and a page at any offset is found by walking the chunks' sizes.
 */
export class SortedStrings {
  private chunks: string[][] = [];
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Builds the set from strings already sorted and unique (a list built by one pass and a sort). */
  static fromSorted(sorted: readonly string[]): SortedStrings {
    const set = new SortedStrings();
    for (let i = 0; i < sorted.length; i += CHUNK_MAX / 2) set.chunks.push(sorted.slice(i, i + CHUNK_MAX / 2));
    set.count = sorted.length;
    return set;
  }

  has(value: string): boolean {
    const chunk = this.chunks[this.chunkFor(value)];
    if (!chunk) return false;
    const at = position(chunk, value);
    return chunk[at] === value;
  }

  /** How many strings come before `value` (in ascending order), `value` itself not counted. */
  countBefore(value: string): number {
    if (this.chunks.length === 0) return 0;
    const c = this.chunkFor(value);
    let count = 0;
    for (let i = 0; i < c; i++) count += this.chunks[i]!.length;
    return count + position(this.chunks[c]!, value);
  }

  /**
   * The position (as `slice` counts it, in either order) of the first string after `value` in that order, whether
   * `value` is in the set or not.
   */
  positionAfter(value: string, descending = false): number {
    const before = this.countBefore(value);
    return descending ? this.count - before : before + (this.has(value) ? 1 : 0);
  }

  /** Adds `value`; false when it was there already. */
  add(value: string): boolean {
    if (this.chunks.length === 0) {
      this.chunks.push([value]);
      this.count = 1;
      return true;
    }
    const c = this.chunkFor(value);
    const chunk = this.chunks[c]!;
    const at = position(chunk, value);
    if (chunk[at] === value) return false;
    chunk.splice(at, 0, value);
    this.count += 1;
    if (chunk.length > CHUNK_MAX) this.chunks.splice(c + 1, 0, chunk.splice(CHUNK_MAX / 2));
    return true;
  }

  /** Removes `value`; false when it was not there. */
  delete(value: string): boolean {
    const c = this.chunkFor(value);
    const chunk = this.chunks[c];
    if (!chunk) return false;
    const at = position(chunk, value);
    if (chunk[at] !== value) return false;
    chunk.splice(at, 1);
    this.count -= 1;
    if (chunk.length === 0) this.chunks.splice(c, 1);
    return true;
  }

  /**
   * Up to `limit` strings from position `offset`, in ascending order, or from the end in descending order
   * (`offset` 0 of a descending read is the greatest string).
   */
  slice(offset: number, limit: number, descending = false): string[] {
    const out: string[] = [];
    if (offset >= this.count || limit <= 0) return out;
    if (!descending) {
      let skip = offset;
      for (const chunk of this.chunks) {
        if (skip >= chunk.length) {
          skip -= chunk.length;
          continue;
        }
        for (let i = skip; i < chunk.length && out.length < limit; i++) out.push(chunk[i]!);
        skip = 0;
        if (out.length >= limit) break;
      }
      return out;
    }
    let skip = offset;
    for (let c = this.chunks.length - 1; c >= 0; c--) {
      const chunk = this.chunks[c]!;
      if (skip >= chunk.length) {
        skip -= chunk.length;
        continue;
      }
      for (let i = chunk.length - 1 - skip; i >= 0 && out.length < limit; i--) out.push(chunk[i]!);
      skip = 0;
      if (out.length >= limit) break;
    }
    return out;
  }

  /** The chunk `value` belongs in: the first whose last string is not before it, else the last chunk. */
  private chunkFor(value: string): number {
    let lo = 0;
    let hi = this.chunks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const chunk = this.chunks[mid]!;
      if (before(chunk[chunk.length - 1]!, value)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** The first position in `chunk` whose string is not before `value`. */
function position(chunk: readonly string[], value: string): number {
  let lo = 0;
  let hi = chunk.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (before(chunk[mid]!, value)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The first `count` of `values` in the order `SortedStrings` keeps (ascending), or with `descending` the last
 * `count`, greatest first: what a sort of them all would begin with, from one pass that keeps the best `count` in a
 * binary heap. Over a million names and a page's worth, about a million comparisons against the twenty million of a
 * whole sort. `values` holds each string once.
 */
export function firstInOrder(values: Iterable<string>, count: number, descending = false): string[] {
  if (count <= 0) return [];
  // The heap's top is the worst of the best kept so far: the greatest when ascending, the least when descending.
  const worse = descending ? (a: string, b: string) => before(a, b) : (a: string, b: string) => before(b, a);
  const heap: string[] = [];
  const siftDown = (from: number) => {
    let at = from;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= heap.length) return;
      const right = left + 1;
      const child = right < heap.length && worse(heap[right]!, heap[left]!) ? right : left;
      if (!worse(heap[child]!, heap[at]!)) return;
      [heap[at], heap[child]] = [heap[child]!, heap[at]!];
      at = child;
    }
  };
  for (const value of values) {
    if (heap.length < count) {
      heap.push(value);
      for (let at = heap.length - 1; at > 0; ) {
        const parent = (at - 1) >>> 1;
        if (!worse(heap[at]!, heap[parent]!)) break;
        [heap[at], heap[parent]] = [heap[parent]!, heap[at]!];
        at = parent;
      }
    } else if (worse(heap[0]!, value)) {
      heap[0] = value;
      siftDown(0);
    }
  }
  return heap.sort(descending ? (a, b) => byText(b, a) : byText);
}
