import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { globMatcher, globProblem } from "@/lib/locks/glob";
import { RedisNode } from "@/lib/redis-node";

/**
 * The console decides which keys are locks with its own reading of the lock patterns: it must be Redis's,
 * key for key, or it would show keys Redis never notifies about, or release keys it does not show. Every
 * pattern the console accepts is checked here against `SCAN MATCH` on a real node.
 */
describe("lock patterns read as Redis reads them", () => {
  let node: RedisNode;
  let client: Redis;
  // Redis matches bytes: `?` is one byte of a UTF-8 key (`é` is two, `😀` four), and so is a class's member.
  const keys = ["lock:a", "lock:", "lock*", "lockx", "hello", "hallo", "hillo", "hbllo", "hdllo", "h-llo", "hllo", "zz:a", "zz:-", "zz:[a-", "]x]", "bx]", "x]", "a]b", "lock:[a", "lock:\\", "job.(1)+x", "jobx(1)+x", "lock:a\nb", "lock:[x", "[]x]", "ho", "h_", "h[a-]llo", "lock:é", "lock:éé", "lock:e", "hél", "h😀l", "lock:é\n"];

  beforeAll(async () => {
    node = await RedisNode.start({ dir: mkdtempSync(path.join(os.tmpdir(), "lockscope-glob-")) });
    client = new Redis(node.port, "127.0.0.1");
    for (const key of keys) await client.set(key, "1");
  });
  afterAll(async () => {
    client?.disconnect();
    await node?.stop();
  });

  const scan = async (pattern: string) => {
    const found: string[] = [];
    let cursor = "0";
    do {
      const [next, page] = await client.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      found.push(...page);
      cursor = next;
    } while (cursor !== "0");
    return found.sort();
  };

  it("matches exactly the keys SCAN MATCH finds, for every pattern it accepts", async () => {
    const accepted = ["lock:*", "lock\\*", "h?llo", "h[ae]llo", "h[^e]llo", "h[a-c]llo", "h[c-a]llo", "h[-a]llo", "h[a-]llo]", "h[a\\-c]llo", "h[\\a-c]llo", "h[^-a]llo", "[^]x]", "a]b", "lock:\\[a", "lock:\\", "job.(1)+*", "lock:a*b", "*x]", "lock:?", "lock:??", "lock:????", "lock:é*", "h?l", "h??l", "h????l", "h[^a]?l", "lock:\\é",
      // Two or more `*` (matched step by step, not by one regular expression).
      "*l*", "h*l*o", "*[ae]*o", "l*:*", "*\\**", "lock:*é*", "*?l*", "**x]**", "*a*]*b*", "h*l*l*o", "*[^l]*:*", "*\\\\*", "*\n*"];
    const differ: Array<{ pattern: string; console: string[]; redis: string[] }> = [];
    for (const pattern of accepted) {
      expect([pattern, globProblem(pattern)]).toEqual([pattern, null]);
      const ours = keys.filter(globMatcher(pattern)).sort();
      const redis = await scan(pattern);
      if (JSON.stringify(ours) !== JSON.stringify(redis)) differ.push({ pattern, console: ours, redis });
    }
    expect(differ).toEqual([]);
  });

  it("refuses the patterns it would read otherwise", async () => {
    for (const pattern of ["zz:[a-", "[]x]", "lock:[x", "h[a-]llo", "lock:[é]", "lock:[^é]", "lock:[a-é]"]) {
      expect(globProblem(pattern), pattern).not.toBeNull();
      // What Redis makes of it is not what it says: the key spelled like the pattern is not matched.
      expect(await scan(pattern)).not.toContain(pattern.replace(/\\(.)/g, "$1"));
    }
  });
});
