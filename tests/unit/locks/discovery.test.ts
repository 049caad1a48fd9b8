import { describe, expect, it } from "vitest";
import { groupCandidates, suggestGlob } from "@/lib/locks/discovery";
import { globMatcher } from "@/lib/locks/glob";

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
