/**
 * Redis glob patterns (the syntax of `SCAN MATCH`, `PSUBSCRIBE` and `KEYS`), compiled to regular
 * expressions so the console decides exactly as Redis does which keys are locks: `*` any run, `?` one
 * character, `[abc]`, `[^a]`, `[a-z]` classes and `\` escaping the next character.
 */

const REGEX_SPECIAL = /[.*+?^${}()|[\]\\/-]/g;
const escapeRegex = (ch: string): string => ch.replace(REGEX_SPECIAL, "\\$&");

/** Compiles one Redis glob pattern to an anchored RegExp (the `s` flag: `*` also spans newlines, as in Redis). */
export function globToRegExp(pattern: string): RegExp {
  let out = "";
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i] as string;
    if (ch === "*") {
      out += ".*";
    } else if (ch === "?") {
      out += ".";
    } else if (ch === "\\" && i + 1 < pattern.length) {
      i += 1;
      out += escapeRegex(pattern[i] as string);
    } else if (ch === "[") {
      const close = findClassEnd(pattern, i + 1);
      if (close < 0) {
        // Redis treats an unterminated class as running to the end of the pattern; a literal '[' is the
        // closest safe reading for a pattern that is almost certainly a typo.
        out += "\\[";
        continue;
      }
      let body = pattern.slice(i + 1, close);
      let negate = false;
      if (body.startsWith("^")) {
        negate = true;
        body = body.slice(1);
      }
      out += `[${negate ? "^" : ""}${classBody(body)}]`;
      i = close;
    } else {
      out += escapeRegex(ch);
    }
  }
  return new RegExp(`^${out}$`, "s");
}

function findClassEnd(pattern: string, from: number): number {
  for (let j = from; j < pattern.length; j++) {
    if (pattern[j] === "\\") j += 1;
    else if (pattern[j] === "]" && j > from) return j;
  }
  return -1;
}

function classBody(body: string): string {
  // The class's members, each one character (an escaped one taken as it is); `a-z` between two of them is a range.
  const members: Array<{ ch: string; escaped: boolean }> = [];
  for (let k = 0; k < body.length; k++) {
    if (body[k] === "\\" && k + 1 < body.length) members.push({ ch: body[++k] as string, escaped: true });
    else members.push({ ch: body[k] as string, escaped: false });
  }
  let out = "";
  for (let m = 0; m < members.length; m++) {
    const start = members[m] as { ch: string };
    const dash = members[m + 1];
    const end = members[m + 2];
    if (dash && !dash.escaped && dash.ch === "-" && end) {
      // Redis swaps a range written backwards (`[z-a]` is `[a-z]`); a RegExp would refuse it.
      const [low, high] = start.ch <= end.ch ? [start.ch, end.ch] : [end.ch, start.ch];
      out += `${escapeRegex(low)}-${escapeRegex(high)}`;
      m += 2;
    } else {
      out += escapeRegex(start.ch);
    }
  }
  return out;
}

/** A matcher for a list of patterns: true when any matches. */
export function lockKeyMatcher(patterns: readonly string[]): (key: string) => boolean {
  if (patterns.length === 0) return () => false;
  // One expression for every pattern: a key is tested once, not once per pattern (a console starting on a
  // million keys tests each of them on every node), anchored once around them all.
  const combined = new RegExp(`^(?:${patterns.map((p) => globToRegExp(p).source.slice(1, -1)).join("|")})$`, "s");
  return (key) => combined.test(key);
}

/** The literal text a pattern starts with, and whether that is the whole pattern (no `*`, `?`, `[` or `\`). */
function literalHead(pattern: string): { head: string; whole: boolean } {
  const at = pattern.search(/[*?[\\]/);
  return at < 0 ? { head: pattern, whole: true } : { head: pattern.slice(0, at), whole: false };
}

/**
 * Whether some key may match both patterns. Exact for a literal pattern (the other is tested on it); else
 * decided by the literal heads: two heads of which neither starts the other cannot match one key.
 */
export function globsMayOverlap(a: string, b: string): boolean {
  const ha = literalHead(a);
  const hb = literalHead(b);
  if (ha.whole) return globToRegExp(b).test(a);
  if (hb.whole) return globToRegExp(a).test(b);
  return ha.head.startsWith(hb.head) || hb.head.startsWith(ha.head);
}

/**
 * For each pattern that some earlier one in the list may overlap (a key that both match: Redis delivers its
 * keyspace notification once per pattern), those earlier patterns, compiled: a notification that came through
 * a later pattern while an earlier one also matches its key is the same event again.
 */
export function earlierOverlaps(patterns: readonly string[]): Map<string, RegExp[]> {
  const out = new Map<string, RegExp[]>();
  for (let i = 1; i < patterns.length; i++) {
    const p = patterns[i] as string;
    const earlier = patterns.slice(0, i).filter((q) => q !== p && globsMayOverlap(p, q));
    if (earlier.length > 0) out.set(p, earlier.map(globToRegExp));
  }
  return out;
}
