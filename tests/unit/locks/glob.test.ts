import { describe, expect, it } from "vitest";
import { globProblem, globToRegExp, lockKeyMatcher, earlierOverlaps, globsMayOverlap } from "@/lib/locks/glob";

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
    expect(globToRegExp("h?llo").test("hello")).toBe(true);
    expect(globToRegExp("h?llo").test("hllo")).toBe(false);
    expect(globToRegExp("h[ae]llo").test("hallo")).toBe(true);
    expect(globToRegExp("h[ae]llo").test("hillo")).toBe(false);
    expect(globToRegExp("h[^e]llo").test("hallo")).toBe(true);
    expect(globToRegExp("h[^e]llo").test("hello")).toBe(false);
    expect(globToRegExp("h[a-c]llo").test("hbllo")).toBe(true);
    expect(globToRegExp("h[a-c]llo").test("hdllo")).toBe(false);
    // A range written backwards is the same range, as Redis reads it (a RegExp would throw).
    expect(globToRegExp("h[c-a]llo").test("hbllo")).toBe(true);
    expect(globToRegExp("h[c-a]llo").test("hdllo")).toBe(false);
    expect(globToRegExp("h[-a]llo").test("h-llo")).toBe(true);
    // As Redis reads it: the character after a `-` ends the range even when it is a `]` (here `]` to `a`), and
    // the class then runs on (to the end of the pattern, as no `]` closes it).
    expect(globToRegExp("h[a-]llo").test("h-llo")).toBe(false);
    expect(globToRegExp("h[a-]llo").test("h_")).toBe(true);
    expect(globToRegExp("h[a-]llo").test("ho")).toBe(true);
    // An escaped character is one member, never a range's end: `[\a-c]` is `a`, `-` and `c`.
    expect(globToRegExp("h[\\a-c]").test("hb")).toBe(false);
    expect(globToRegExp("h[\\a-c]").test("h-")).toBe(true);
    expect(globToRegExp("h[a\\-c]llo").test("hbllo")).toBe(false);
    expect(globToRegExp("h[a\\-c]llo").test("h-llo")).toBe(true);
    expect(globToRegExp("lock\\*").test("lock*")).toBe(true);
    expect(globToRegExp("lock\\*").test("lockx")).toBe(false);
  });

  it("refuses the patterns Redis reads otherwise, and says how to write a bracket", () => {
    expect(globProblem("zz:[a-")).toBe("`zz:[a-` has a `[` without its `]`, which Redis reads as a class running to the end: write `\\[` for a bracket.");
    expect(globProblem("lock:[]x]")).toMatch(/^`lock:\[\]x\]` has a class that opens with `\]`, which Redis reads as a class of nothing/);
    expect(globProblem("lock:[ab]*[")).toMatch(/without its/);
    for (const fine of ["lock:*", "h[a-c]llo", "h[^]x]", "lock:\\[a", "lock:\\", "h[a\\]]x", "a]b"]) expect([fine, globProblem(fine)]).toEqual([fine, null]);
  });

  it("treats regular-expression characters literally", () => {
    expect(globToRegExp("job.(1)+*").test("job.(1)+x")).toBe(true);
    expect(globToRegExp("job.(1)+*").test("jobx(1)+x")).toBe(false);
    expect(globToRegExp("a/b$").test("a/b$")).toBe(true);
  });

  it("lets * span any character, newlines included", () => {
    expect(globToRegExp("lock:*").test("lock:a\nb")).toBe(true);
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

  it("lists, for each later pattern, the earlier ones it may overlap: none for the default patterns", () => {
    expect(earlierOverlaps(["lock:*", "locks:*", "lock.*", "mutex:*", "semaphore:*", "job-lock:*", "lock", "my_resource_name"]).size).toBe(0);
    const overlaps = earlierOverlaps(["lock:*", "lock:orders:*", "*:orders:*"]);
    expect([...overlaps.keys()]).toEqual(["lock:orders:*", "*:orders:*"]);
    expect(overlaps.get("*:orders:*")?.map((re) => re.test("lock:orders:1"))).toEqual([true, true]);
  });
});
