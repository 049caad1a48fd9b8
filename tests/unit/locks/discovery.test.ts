import { describe, expect, it } from "vitest";
import { groupCandidates, suggestGlob } from "@/lib/locks/discovery";
import { globMatcher } from "@/lib/locks/glob";
import { patternEntrySchema, patternsProblem } from "@/server/patterns";

describe("suggested globs", () => {
  it("keeps everything up to the last separator", () => {
    expect(suggestGlob("orders:lock:42")).toBe("orders:lock:*");
    expect(suggestGlob("lock.invoice")).toBe("lock.*");
    expect(suggestGlob("jobs/leader/eu-1")).toBe("jobs/leader/*");
    expect(suggestGlob("myLock")).toBe("myLock");
    expect(suggestGlob(":x")).toBe(":x");
    expect(suggestGlob("trailing:")).toBe("trailing:");
  });
  it("keeps a last part that only says lock, so the suggestion covers the other resources' locks and not this resource's other keys", () => {
    const glob = suggestGlob("user:42:lock");
    expect(glob).toBe("user:*:lock");
    expect(["user:42:lock", "user:43:lock"].filter(globMatcher(glob))).toEqual(["user:42:lock", "user:43:lock"]);
    expect(["user:42:profile", "user:42:session", "user:42:cache"].filter(globMatcher(glob))).toEqual([]);
    expect(suggestGlob("jobs/eu-1/leader")).toBe("jobs/*/leader");
    expect(suggestGlob("orders.42.write_lock")).toBe("orders.*.write_lock");
    expect(suggestGlob("orders:lock")).toBe("*:lock");
    // A last part that names the resource as well (`lock-1`) is the part that varies.
    expect(suggestGlob("orders:lock-1")).toBe("orders:*");
    expect(groupCandidates([["user:42:lock", "token"], ["user:43:lock", "token"]])).toEqual([
      { pattern: "user:*:lock", format: "token", keys: 2, examples: ["user:42:lock", "user:43:lock"] },
    ]);
  });
  it("suggests a glob the lock patterns take as it is, which still matches the key", () => {
    // Lock names are the application's: a space, a comma, a tab, a no-break space, a name over 200 characters.
    const keys = ["my lock", "orders,eu:lock:7", "job\tx:lock:1", "a\u00a0b:lock:1", "report 2024", `${"x".repeat(300)}:lock:1`, `${"é".repeat(150)} 1`];
    for (const key of keys) {
      const glob = suggestGlob(key);
      expect([key, patternEntrySchema.safeParse({ glob }).success, patternsProblem([{ glob }])]).toEqual([key, true, null]);
      expect([key, glob, globMatcher(glob)(key)]).toEqual([key, glob, true]);
    }
    expect(suggestGlob("my lock")).toBe("my?lock");
    expect(suggestGlob("orders,eu:lock:7")).toBe("orders?eu:lock:*");
    // A no-break space is two bytes in UTF-8: two `?`.
    expect(suggestGlob("a\u00a0b:lock:1")).toBe("a??b:lock:*");
  });
  it("escapes glob characters so a suggestion matches only its family", () => {
    const glob = suggestGlob("weird[1]*:lock:7");
    expect(glob).toBe("weird\\[1\\]\\*:lock:*");
    expect(globMatcher(glob)("weird[1]*:lock:8")).toBe(true);
    expect(globMatcher(glob)("weird1x:lock:8")).toBe(false);
  });
});

describe("grouping", () => {
  it("groups by glob and format, largest first, with a few sorted examples", () => {
    const found: Array<[string, "redisson" | "token"]> = [
      ...Array.from({ length: 7 }, (_, i): [string, "redisson"] => [`billing:lock:${i}`, "redisson"]),
      ["billing:lock:x", "token"],
      ["myLock", "redisson"],
    ];
    const groups = groupCandidates(found, (key) => key !== "myLock");
    expect(groups).toEqual([
      { pattern: "billing:lock:*", format: "redisson", keys: 7, examples: ["billing:lock:0", "billing:lock:1", "billing:lock:2", "billing:lock:3", "billing:lock:4"] },
      { pattern: "billing:lock:*", format: "token", keys: 1, examples: ["billing:lock:x"] },
    ]);
  });
});
