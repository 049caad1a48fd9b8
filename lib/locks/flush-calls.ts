/**
 * FLUSHALL, FLUSHDB and SWAPDB remove (or swap away) every key of a database without a keyspace notification:
 * the live view learns of them only from the node's own counts of the commands it ran (INFO commandstats).
 * Kept pure: the watcher reads the section and keeps the counts.
 */

/** The commands that change a database's keys wholesale, as INFO commandstats names them. */
export const FLUSH_COMMANDS = ["flushall", "flushdb", "swapdb"] as const;
export type FlushCommand = (typeof FLUSH_COMMANDS)[number];

/**
 * How many times the node ran each command since it started (or since CONFIG RESETSTAT), and INFO itself: the
 * console asks INFO at every check, so its count only grows between two readings unless the counts were reset.
 */
export type FlushCalls = Readonly<Record<FlushCommand | "info", number>>;

const COUNTED: readonly string[] = [...FLUSH_COMMANDS, "info"];

const LINE = /^cmdstat_([a-z|]+):(.*)$/;

/**
 * The flush commands' `calls=` in an INFO commandstats reply (`cmdstat_flushall:calls=2,usec=…`); a command
 * the node never ran has no line and counts 0. Null when the reply is no commandstats section at all (a proxy or
 * a renamed INFO answering something else): counts read from it would all be 0 and mean nothing.
 */
export function parseFlushCalls(info: string): FlushCalls | null {
  if (!/^# Commandstats\s*$/m.test(info)) return null;
  const calls: Record<FlushCommand | "info", number> = { flushall: 0, flushdb: 0, swapdb: 0, info: 0 };
  for (const line of info.split(/\r?\n/)) {
    const match = LINE.exec(line);
    const command = match?.[1];
    if (command === undefined || !COUNTED.includes(command)) continue;
    // `calls=` is the field's whole name: `rejected_calls=` and `failed_calls=` are other counts.
    const field = (match?.[2] ?? "").split(",").find((f) => f.startsWith("calls="));
    const value = Number(field?.slice("calls=".length));
    if (Number.isSafeInteger(value) && value >= 0) calls[command as FlushCommand | "info"] = value;
  }
  return calls;
}

/**
 * Whether a flush command ran between two readings of the counts. None before the first reading (`prev` null):
 * the caller reconciles the node when it takes that baseline. Counts that were reset (CONFIG RESETSTAT zeroes
 * them all) are the new baseline, and any flush count above 0 in them was run since the reset. A reset shows as
 * a count that went down, or as INFO's count not grown although the console asked INFO for the last reading:
 * a reset followed by as many flushes as were counted before looks like no change in the flush counts alone.
 * (Missed only where other clients asked INFO more times since the reset than in the node's life before it.)
 */
export function flushedSince(prev: FlushCalls | null, next: FlushCalls): boolean {
  if (prev === null) return false;
  const reset = next.info <= prev.info || FLUSH_COMMANDS.some((c) => next[c] < prev[c]);
  return FLUSH_COMMANDS.some((c) => (reset ? next[c] > 0 : next[c] > prev[c]));
}
