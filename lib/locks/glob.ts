/**
 * Redis glob patterns (the syntax of `SCAN MATCH`, `PSUBSCRIBE` and `KEYS`), compiled to regular
 * expressions so the console decides exactly as Redis does which keys are locks: `*` any run, `?` one
 * byte, `[abc]`, `[^a]`, `[a-z]` classes of bytes and `\` escaping the next byte. Redis matches a key's bytes
 * (UTF-8 as the console writes and reads names): `?` is one byte of `é` (two) or `😀` (four). So pattern and
 * key are both compared as byte strings (one character per byte); an ASCII key is its own byte string.
 */

const REGEX_SPECIAL = /[.*+?^${}()|[\]\\/-]/g;
const escapeRegex = (ch: string): string => ch.replace(REGEX_SPECIAL, "\\$&");
const ASCII = /^[\x00-\x7f]*$/;
const utf8 = new TextEncoder();

/** `text`'s UTF-8 bytes as a string of one character (U+0000 to U+00FF) per byte; ASCII text is itself. */
function byteString(text: string): string {
  if (ASCII.test(text)) return text;
  let out = "";
  for (const byte of utf8.encode(text)) out += String.fromCharCode(byte);
  return out;
}

/** A key matcher for one Redis glob pattern. */
export function globMatcher(pattern: string): (key: string) => boolean {
  return lockKeyMatcher([pattern]);
}

/**
 * Compiles one Redis glob pattern to an anchored RegExp over byte strings (`byteString`: test a key's, never
 * the key itself unless it is ASCII; the `s` flag: `*` also spans newlines, as in Redis).
 */
function globToRegExp(glob: string): RegExp {
  const pattern = byteString(glob);
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
      const { source, close } = readClass(pattern, i);
      out += source;
      // A class without its `]` runs to the end of the pattern, as in Redis (`globProblem` refuses it).
      i = close < 0 ? pattern.length : close;
    } else {
      out += escapeRegex(ch);
    }
  }
  return new RegExp(`^${out}$`, "s");
}

/**
 * Why `pattern` is refused as a lock pattern, or null. Redis reads a `[` without its `]` as a class running to
 * the end of the pattern (`zz:[a-` matches `zz:a` and `zz:-`, not `zz:[a-`), and a class that opens with `]` as
 * a class of nothing (`[]x]` matches no key). `globToRegExp` reads them so too, but neither can be what the
 * pattern's writer meant: the console would show and release other keys than the ones they had in mind.
 */
export function globProblem(pattern: string): string | null {
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === "\\") i += 1;
    else if (ch === "[") {
      if (pattern[i + 1] === "]") return `\`${pattern}\` has a class that opens with \`]\`, which Redis reads as a class of nothing: write \`\\]\` for a bracket.`;
      const { close } = readClass(pattern, i);
      if (close < 0) return `\`${pattern}\` has a \`[\` without its \`]\`, which Redis reads as a class running to the end: write \`\\[\` for a bracket.`;
      const wide = [...pattern.slice(i + 1, close)].find((c) => !ASCII.test(c));
      if (wide !== undefined) {
        return `\`${pattern}\` has \`${wide}\` in a class: Redis reads a class byte by byte, and \`${wide}\` is ${utf8.encode(wide).length} bytes in UTF-8, so the class never matches it: write it outside the class (\`?\` matches one byte).`;
      }
      i = close;
    }
  }
  return null;
}

/**
 * The class that opens at `pattern[open]` (a `[`), read step by step as Redis's `stringmatchlen` reads it: an
 * optional `^`; then, until a `]`, a `\\` taking the next character as it is, `x-y` a range (the character after
 * the `-` is its end even when it is a `]`, and a range written backwards is the same range), else one
 * character. Returns the class as a RegExp class and the index of its `]` (-1: none, the class ran to the end).
 */
function readClass(pattern: string, open: number): { source: string; close: number } {
  let i = open + 1;
  const negate = pattern[i] === "^";
  if (negate) i += 1;
  let body = "";
  const source = () => `[${negate ? "^" : ""}${body}]`;
  for (;;) {
    const left = pattern.length - i;
    const ch = pattern[i] as string;
    if (ch === "\\" && left >= 2) {
      body += escapeRegex(pattern[i + 1] as string);
      i += 2;
    } else if (left === 0) {
      return { source: source(), close: -1 };
    } else if (ch === "]") {
      return { source: source(), close: i };
    } else if (left >= 3 && pattern[i + 1] === "-") {
      const end = pattern[i + 2] as string;
      const [low, high] = ch <= end ? [ch, end] : [end, ch];
      body += `${escapeRegex(low)}-${escapeRegex(high)}`;
      i += 3;
    } else {
      body += escapeRegex(ch);
      i += 1;
    }
  }
}

/**
 * A matcher for a list of patterns: true when any matches. Its cost stays linear in the key's length for a
 * pattern with one `*` and proportional to key × pattern for one with more, however the pattern is written: a
 * pattern is an operator's input, and deciding whether a key is a lock must never tie up the console.
 */
export function lockKeyMatcher(patterns: readonly string[]): (key: string) => boolean {
  if (patterns.length === 0) return () => false;
  const oneStar: string[] = [];
  const stepped: GlobTable[] = [];
  for (const p of patterns) {
    const steps = globSteps(p);
    if (steps.filter((step) => step.star).length <= 1) oneStar.push(p);
    else stepped.push(globTable(steps));
  }
  // One expression for every pattern of at most one `*`: a key is tested once, not once per pattern (a console
  // starting on a million keys tests each of them on every node), anchored once around them all. With two or
  // more, a regular expression backtracks: `*a*a*…*b` tried on a long key of `a`s takes (key length)^(stars)
  // steps, hours for a dozen stars. Those are matched step by step instead (`tableMatches`).
  const combined = oneStar.length === 0 ? null : new RegExp(`^(?:${oneStar.map((p) => globToRegExp(p).source.slice(1, -1)).join("|")})$`, "s");
  if (stepped.length === 0) return (key) => combined!.test(byteString(key));
  return (key) => {
    const bytes = byteString(key);
    return (combined?.test(bytes) ?? false) || stepped.some((table) => tableMatches(table, bytes));
  };
}

/** A glob's steps compiled: null for `*`, else which of the 256 bytes the step admits (1) or not (0). */
type GlobTable = ReadonlyArray<Uint8Array | null>;

function globTable(steps: readonly GlobStep[]): GlobTable {
  return steps.map((step) => {
    if (step.star) return null;
    const admits = new Uint8Array(256);
    for (let byte = 0; byte < 256; byte++) admits[byte] = step.admits(byte) ? 1 : 0;
    return admits;
  });
}

/**
 * Whether a byte string matches a compiled glob, in at most (bytes × steps) steps: a mismatch after a `*` lets
 * that `*` take one more byte and tries again from there. Only the latest `*` ever needs to: whatever the earlier
 * ones took, the latest can take instead, since a `*` takes any bytes.
 */
function tableMatches(table: GlobTable, bytes: string): boolean {
  let step = 0;
  let at = 0;
  let lastStar = -1;
  let starFrom = 0;
  while (at < bytes.length) {
    const admits = table[step];
    if (admits === null) {
      lastStar = step;
      starFrom = at;
      step += 1;
    } else if (admits !== undefined && admits[bytes.charCodeAt(at)] === 1) {
      step += 1;
      at += 1;
    } else if (lastStar >= 0) {
      step = lastStar + 1;
      starFrom += 1;
      at = starFrom;
    } else {
      return false;
    }
  }
  while (table[step] === null) step += 1;
  return step === table.length;
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
  if (ha.whole) return globMatcher(b)(a);
  if (hb.whole) return globMatcher(a)(b);
  return ha.head.startsWith(hb.head) || hb.head.startsWith(ha.head);
}

/**
 * For each pattern that some earlier one in the list may overlap (a key that both match: Redis delivers its
 * keyspace notification once per pattern), those earlier patterns, compiled: a notification that came through
 * a later pattern while an earlier one also matches its key is the same event again.
 */
export function earlierOverlaps(patterns: readonly string[]): Map<string, Array<(key: string) => boolean>> {
  const out = new Map<string, Array<(key: string) => boolean>>();
  for (let i = 1; i < patterns.length; i++) {
    const p = patterns[i] as string;
    const earlier = patterns.slice(0, i).filter((q) => q !== p && globsMayOverlap(p, q));
    if (earlier.length > 0) out.set(p, earlier.map(globMatcher));
  }
  return out;
}

/** One step of a glob over bytes: `*`, or one byte out of the set `admits` (a literal, `?`, a class). */
type GlobStep = { star: true } | { star: false; admits: (byte: number) => boolean };

/** A glob as steps (read as `globToRegExp` reads it). */
function globSteps(glob: string): GlobStep[] {
  const pattern = byteString(glob);
  const steps: GlobStep[] = [];
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i] as string;
    if (ch === "*") {
      if (!steps.at(-1)?.star) steps.push({ star: true });
    } else if (ch === "?") {
      steps.push({ star: false, admits: () => true });
    } else if (ch === "[") {
      const { source, close } = readClass(pattern, i);
      const re = new RegExp(`^${source}$`, "s");
      steps.push({ star: false, admits: (byte) => re.test(String.fromCharCode(byte)) });
      i = close < 0 ? pattern.length : close;
    } else {
      const literal = (ch === "\\" && i + 1 < pattern.length ? pattern[++i] : ch) as string;
      const code = literal.charCodeAt(0);
      steps.push({ star: false, admits: (byte) => byte === code });
    }
  }
  return steps;
}

/**
 * Whether `glob` spells out `prefix` (ASCII) at its start, however it is written: its first steps each admit
 * that byte of the prefix and no other (`[l]ockscope:*` and `lockscop[e]:*` do for `lockscope:`), so every key it
 * matches is under the prefix. `?ockscope:*`, `[kl]ockscope:*` or `[a-z]*:x` also match other keys.
 */
export function globPinsPrefix(glob: string, prefix: string): boolean {
  const steps = globSteps(glob);
  if (steps.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) {
    const step = steps[i] as GlobStep;
    if (step.star) return false;
    const byte = prefix.charCodeAt(i);
    for (let other = 0; other < 256; other++) if (step.admits(other) !== (other === byte)) return false;
  }
  return true;
}

/**
 * Keys a glob matches, one per way of filling its wildcards (each `*` with nothing, with one byte, with a
 * lock-like name; each `?` and class with a printable byte it admits): what it matches in practice.
 */
export function globSamples(glob: string): string[] {
  const steps = globSteps(glob);
  const samples: string[] = [];
  for (const fill of ["", "x", "lock:x/"]) {
    let bytes = "";
    for (const step of steps) {
      if (step.star) {
        bytes += fill;
        continue;
      }
      let chosen = -1;
      for (const byte of [120, 97, 48, 95, ...Array.from({ length: 256 }, (_, b) => b)]) {
        if (step.admits(byte)) {
          chosen = byte;
          break;
        }
      }
      if (chosen < 0) return []; // a class of nothing: the glob matches no key
      bytes += String.fromCharCode(chosen);
    }
    samples.push(new TextDecoder().decode(Uint8Array.from(bytes, (c) => c.charCodeAt(0))));
  }
  return samples;
}

/** The longest a lock-pattern change's ACL check waits for the lock nodes, all of them together (`PUT /api/patterns`). */
export const PATTERN_ACCESS_CHECK_MS = 3_000;
