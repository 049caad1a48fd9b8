import { describe, expect, it } from "vitest";
import { flushedSince, parseFlushCalls } from "@/lib/locks/flush-calls";

/** INFO commandstats as redis-server 7.0 answers it (lines end in CRLF). */
const info = (...lines: string[]) => ["# Commandstats", ...lines, ""].join("\r\n");
const NONE = { flushall: 0, flushdb: 0, swapdb: 0, info: 0 };

describe("the flush commands' counts in INFO commandstats", () => {
  it("reads each command's calls, and 0 for a command the node never ran", () => {
    const reply = info(
      "cmdstat_set:calls=120,usec=300,usec_per_call=2.50,rejected_calls=0,failed_calls=0",
      "cmdstat_flushall:calls=2,usec=19,usec_per_call=9.50,rejected_calls=7,failed_calls=0",
      "cmdstat_swapdb:calls=1,usec=4,usec_per_call=4.00,rejected_calls=0,failed_calls=0",
      "cmdstat_info:calls=41,usec=900,usec_per_call=21.95,rejected_calls=0,failed_calls=0",
    );
    expect(parseFlushCalls(reply)).toEqual({ flushall: 2, flushdb: 0, swapdb: 1, info: 41 });
  });

  it("takes `calls=` only, not `rejected_calls=` or `failed_calls=`, in any field order", () => {
    expect(parseFlushCalls(info("cmdstat_flushdb:rejected_calls=9,failed_calls=8,calls=3,usec=1"))).toEqual({ ...NONE, flushdb: 3 });
  });

  it("ignores other commands, subcommands and lines without a count", () => {
    const reply = info("cmdstat_config|resetstat:calls=1,usec=67", "cmdstat_flushallx:calls=5", "cmdstat_flushdb:usec=4", "cmdstat_flushall:calls=abc");
    expect(parseFlushCalls(reply)).toEqual(NONE);
  });

  it("reads a node that ran no command yet (an empty section), and refuses a reply that is no commandstats section", () => {
    expect(parseFlushCalls(info())).toEqual(NONE);
    expect(parseFlushCalls("# Server\r\nredis_version:7.0.15\r\n")).toBeNull();
    expect(parseFlushCalls("")).toBeNull();
  });
});

describe("whether the node was flushed between two readings", () => {
  it("is a count that grew; the first reading is a baseline", () => {
    const before = { flushall: 2, flushdb: 1, swapdb: 0, info: 30 };
    // The console asked INFO once more since (for the reading before): it counts one more.
    const after = { ...before, info: 31 };
    expect(flushedSince(null, { flushall: 5, flushdb: 0, swapdb: 0, info: 3 })).toBe(false);
    expect(flushedSince(before, after)).toBe(false);
    expect(flushedSince(before, { ...after, info: 90 })).toBe(false);
    expect(flushedSince(before, { ...after, flushall: 3 })).toBe(true);
    expect(flushedSince(before, { ...after, flushdb: 2 })).toBe(true);
    expect(flushedSince(before, { ...after, swapdb: 1 })).toBe(true);
  });

  it("takes reset counts (CONFIG RESETSTAT) as a new baseline, flushed only if a flush ran since the reset", () => {
    const before = { flushall: 4, flushdb: 2, swapdb: 0, info: 500 };
    expect(flushedSince(before, NONE)).toBe(false);
    expect(flushedSince(before, { ...NONE, info: 2 })).toBe(false);
    expect(flushedSince(before, { ...NONE, flushall: 1 })).toBe(true);
    // The reset, then as many FLUSHDB as before: flushdb went back to 2, flushall to 0.
    expect(flushedSince(before, { ...NONE, flushdb: 2 })).toBe(true);
    // ...and where only FLUSHDB had run before: told by INFO's own count, which went down.
    expect(flushedSince({ ...NONE, flushdb: 1, info: 500 }, { ...NONE, flushdb: 1, info: 1 })).toBe(true);
  });
});
