import { describe, expect, it } from "vitest";
import { globToRegExp, lockKeyMatcher, earlierOverlaps, globsMayOverlap } from "@/lib/locks/glob";

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
    expect(globToRegExp("h[a-]llo").test("h-llo")).toBe(true);
    expect(globToRegExp("h[a\\-c]llo").test("hbllo")).toBe(false);
    expect(globToRegExp("h[a\\-c]llo").test("h-llo")).toBe(true);
    expect(globToRegExp("lock\\*").test("lock*")).toBe(true);
    expect(globToRegExp("lock\\*").test("lockx")).toBe(false);
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
