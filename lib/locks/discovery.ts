import type { FormatName } from "./formats/types";

/**
 * The pure half of discovery: which glob to suggest for a lock-shaped key found outside the patterns, and
 * how the keys found are grouped and bounded. The scan itself (rate, cursors, nodes) is in
 * server/discovery.ts.
 */

export interface DiscoveryCandidate {
  /** The glob to add to the patterns to show these keys. */
  pattern: string;
  format: FormatName;
  /** Distinct keys found in this group (over every node). */
  keys: number;
  /** A few of them, sorted. */
  examples: string[];
}

export interface DiscoveryResult {
  /** Keys visited in the passes shown (every node's, added up). */
  scannedKeys: number;
  /** True once every node has been scanned to its end at least once. */
  complete: boolean;
  candidates: DiscoveryCandidate[];
}

const SEPARATORS = [":", "/", ".", "|", "#"];
const escapeGlob = (text: string): string => text.replace(/[*?[\]\\]/g, "\\$&");

/** The longest glob a lock pattern may be (`PUT /api/patterns`). */
const MAX_GLOB_LENGTH = 200;
/** What a lock pattern may not hold (`PUT /api/patterns`: spaces, commas, control characters); each of its bytes is written `?`. */
const UNWRITABLE = /[\s,\u0000-\u001f\u007f]/g;
const utf8 = new TextEncoder();
const writable = (glob: string): string => glob.replace(UNWRITABLE, (ch) => "?".repeat(utf8.encode(ch).length));

/**
 * `glob` as a lock pattern can be written: a space, comma or control character of the key as `?` (one per byte,
 * as Redis matches), and past 200 characters the longest start of the key that fits, then `*`. Either way it
 * still matches `key`.
 */
function asPattern(key: string, glob: string): string {
  const out = writable(glob);
  if (out.length <= MAX_GLOB_LENGTH) return out;
  let head = "";
  for (const ch of key) {
    const piece = writable(escapeGlob(ch));
    if (head.length + piece.length + 1 > MAX_GLOB_LENGTH) break;
    head += piece;
  }
  return `${head}*`;
}

/** A key's last part that is only the word saying lock (`lock`, `leader`, `write_lock`): a constant, not a resource's id. */
const LOCK_WORD = /^([a-z]+[-_])?(lock|locks|locked|mutex|lease|leases|semaphore|leader|election|singleton)$/i;

/** Where the last separator at or before `end` is in `key`; -1 for none. */
function lastSeparator(key: string, end: number): number {
  let cut = -1;
  for (const sep of SEPARATORS) cut = Math.max(cut, key.lastIndexOf(sep, end));
  return cut;
}

/**
 * The glob that covers a key and its siblings: everything up to its last separator, then `*`
 * (`orders:lock:42` → `orders:lock:*`, `lock.invoice` → `lock.*`). When the last part is the word that says
 * lock (`user:42:lock`), that part is kept and the one before it varies (`user:*:lock`): `user:42:*` would
 * cover that user's other keys (a profile, a session, a cache) and none of the other users' locks. A key
 * without a separator (`myLock`, Redisson's usual names) is suggested as itself. Glob characters in the kept
 * part are escaped, so the suggestion matches exactly the family it names; it is one `PUT /api/patterns` takes
 * (see `asPattern`), so an operator can add it as it is.
 */
export function suggestGlob(key: string): string {
  return asPattern(key, familyGlob(key));
}

function familyGlob(key: string): string {
  const cut = lastSeparator(key, key.length);
  if (cut <= 0 || cut === key.length - 1) return escapeGlob(key);
  if (LOCK_WORD.test(key.slice(cut + 1))) {
    const before = lastSeparator(key, cut - 1);
    return `${escapeGlob(key.slice(0, before + 1))}*${escapeGlob(key.slice(cut))}`;
  }
  return `${escapeGlob(key.slice(0, cut + 1))}*`;
}

export const MAX_EXAMPLES = 5;

/**
 * Groups keys found (key → format) into candidates by suggested glob and format, the largest group first.
 * `keep` decides, at the time of asking, whether a key is still a candidate (its patterns may have changed
 * since it was found).
 */
export function groupCandidates(found: Iterable<[string, FormatName]>, keep: (key: string) => boolean = () => true): DiscoveryCandidate[] {
  const groups = new Map<string, { pattern: string; format: FormatName; keys: Set<string> }>();
  for (const [key, format] of found) {
    if (!keep(key)) continue;
    const pattern = suggestGlob(key);
    const id = `${format}\u0000${pattern}`;
    let group = groups.get(id);
    if (!group) {
      group = { pattern, format, keys: new Set() };
      groups.set(id, group);
    }
    group.keys.add(key);
  }
  return [...groups.values()]
    .map((g) => ({ pattern: g.pattern, format: g.format, keys: g.keys.size, examples: [...g.keys].sort().slice(0, MAX_EXAMPLES) }))
    .sort((a, b) => b.keys - a.keys || a.pattern.localeCompare(b.pattern));
}
