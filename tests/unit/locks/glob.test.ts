import { describe, expect, it } from "vitest";
import { globMatcher, globProblem, lockKeyMatcher, earlierOverlaps, globsMayOverlap } from "@/lib/locks/glob";

describe("Redis glob patterns", () => {
  it("matches like SCAN MATCH and PSUBSCRIBE", () => {
    const is = lockKeyMatcher(["lock:*", "locks:*"]);
    expect(is("lock:orders/42")).toBe(true);
    expect(is("locks:a")).toBe(true);
    expect(is("lock:")).toBe(true);
    expect(is("fence:lock:a")).toBe(false);
    expect(is("waitq:lock:a")).toBe(false);
    expect(is("Lock:a")).toBe(false);
  });

  it("understands ?, classes, negated classes, ranges and escapes", () => {
    expect(globMatcher("h?llo")("hello")).toBe(true);
    expect(globMatcher("h?llo")("hllo")).toBe(false);
    expect(globMatcher("h[ae]llo")("hallo")).toBe(true);
    expect(globMatcher("h[ae]llo")("hillo")).toBe(false);
    expect(globMatcher("h[^e]llo")("hallo")).toBe(true);
    expect(globMatcher("h[^e]llo")("hello")).toBe(false);
    expect(globMatcher("h[a-c]llo")("hbllo")).toBe(true);
    expect(globMatcher("h[a-c]llo")("hdllo")).toBe(false);
    // A range written backwards is the same range, as Redis reads it (a RegExp would throw).
    expect(globMatcher("h[c-a]llo")("hbllo")).toBe(true);
    expect(globMatcher("h[c-a]llo")("hdllo")).toBe(false);
    expect(globMatcher("h[-a]llo")("h-llo")).toBe(true);
    // As Redis reads it: the character after a `-` ends the range even when it is a `]` (here `]` to `a`), and
    // the class then runs on (to the end of the pattern, as no `]` closes it).
    expect(globMatcher("h[a-]llo")("h-llo")).toBe(false);
    expect(globMatcher("h[a-]llo")("h_")).toBe(true);
    expect(globMatcher("h[a-]llo")("ho")).toBe(true);
    // An escaped character is one member, never a range's end: `[\a-c]` is `a`, `-` and `c`.
    expect(globMatcher("h[\\a-c]")("hb")).toBe(false);
    expect(globMatcher("h[\\a-c]")("h-")).toBe(true);
    expect(globMatcher("h[a\\-c]llo")("hbllo")).toBe(false);
    expect(globMatcher("h[a\\-c]llo")("h-llo")).toBe(true);
    expect(globMatcher("lock\\*")("lock*")).toBe(true);
    expect(globMatcher("lock\\*")("lockx")).toBe(false);
  });

  it("refuses the patterns Redis reads otherwise, and says how to write a bracket", () => {
    expect(globProblem("zz:[a-")).toBe("`zz:[a-` has a `[` without its `]`, which Redis reads as a class running to the end: write `\\[` for a bracket.");
    expect(globProblem("lock:[]x]")).toMatch(/^`lock:\[\]x\]` has a class that opens with `\]`, which Redis reads as a class of nothing/);
    expect(globProblem("lock:[ab]*[")).toMatch(/without its/);
    for (const fine of ["lock:*", "h[a-c]llo", "h[^]x]", "lock:\\[a", "lock:\\", "h[a\\]]x", "a]b"]) expect([fine, globProblem(fine)]).toEqual([fine, null]);
  });

  it("treats regular-expression characters literally", () => {
    expect(globMatcher("job.(1)+*")("job.(1)+x")).toBe(true);
    expect(globMatcher("job.(1)+*")("jobx(1)+x")).toBe(false);
    expect(globMatcher("a/b$")("a/b$")).toBe(true);
  });

  it("lets * span any character, newlines included", () => {
    expect(globMatcher("lock:*")("lock:a\nb")).toBe(true);
  });
});

describe("patterns that may match the same key", () => {
  it("tells disjoint patterns apart by their literal heads, and tests a literal pattern exactly", () => {
    expect(globsMayOverlap("lock:*", "locks:*")).toBe(false);
    expect(globsMayOverlap("lock:*", "lock:orders:*")).toBe(true);
    expect(globsMayOverlap("lock:*", "*:orders:*")).toBe(true);
    expect(globsMayOverlap("lock", "lock:*")).toBe(false);
    expect(globsMayOverlap("lock:1", "lock:*")).toBe(true);
    expect(globsMayOverlap("mutex:*", "semaphore:*")).toBe(false);
  });

  it("matches a key's UTF-8 bytes as Redis does: `?` is one byte, and a class's members are bytes", () => {
    expect(globMatcher("h?l")("hél")).toBe(false);
    expect(globMatcher("h??l")("hél")).toBe(true);
    expect(globMatcher("h????l")("h😀l")).toBe(true);
    expect(globMatcher("lock:é*")("lock:éé")).toBe(true);
    expect(lockKeyMatcher(["lock:?"])("lock:é")).toBe(false);
    expect(globProblem("lock:[éa]")).toContain("`é` is 2 bytes in UTF-8");
    expect(globProblem("lock:é?")).toBeNull();
  });

  it("lists, for each later pattern, the earlier ones it may overlap: none for the default patterns", () => {
    expect(earlierOverlaps(["lock:*", "locks:*", "lock.*", "mutex:*", "semaphore:*", "job-lock:*", "lock", "my_resource_name"]).size).toBe(0);
    const overlaps = earlierOverlaps(["lock:*", "lock:orders:*", "*:orders:*"]);
    expect([...overlaps.keys()]).toEqual(["lock:orders:*", "*:orders:*"]);
    expect(overlaps.get("*:orders:*")?.map((matches) => matches("lock:orders:1"))).toEqual([true, true]);
  });
});
