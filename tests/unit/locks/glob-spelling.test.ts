import { describe, expect, it } from "vitest";
import { globMatcher, globPinsPrefix, globSamples } from "@/lib/locks/glob";

describe("what a Redis glob matches, however it is spelt", () => {
  it("tells a glob that spells out a prefix at its start", () => {
    for (const glob of ["lockscope:*", "[l]ockscope:wrong-token:address:*", "lockscop[e]:lease:patterns", "lock\\scope:x", "[l-l]ockscope:*"]) {
      expect(globPinsPrefix(glob, "lockscope:"), glob).toBe(true);
    }
    for (const glob of ["lock*", "[a-z]*:lock", "*:orders", "lockscope", "[^l]ockscope:*", "lock:*", "?ockscope:lease:metrics-*", "[kl]ockscope:*", "??????????*"]) {
      expect(globPinsPrefix(glob, "lockscope:"), glob).toBe(false);
    }
  });

  it("samples keys a glob matches, each one it really matches", () => {
    for (const glob of ["fence:*", "[f]ence:*", "*:rwlock_timeout:*", "lock:?[0-9]", "lock:[^x]", "caf\u00e9:*"]) {
      const samples = globSamples(glob);
      expect(samples.length, glob).toBe(3);
      for (const key of samples) expect(globMatcher(glob)(key), `${glob} on ${key}`).toBe(true);
    }
  });
});
