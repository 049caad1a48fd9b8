/**
 * FLUSHALL, FLUSHDB and SWAPDB remove (or swap away) every key of a database without a keyspace notification:
 * the live view learns of them only from the node's own counts of the commands it ran (INFO commandstats).
 * Kept pure: the watcher reads the section and keeps the counts.
 */

/** The commands that change a database's keys wholesale, as INFO commandstats names them. */
export const FLUSH_COMMANDS = ["flushall", "flushdb", "swapdb"] as const;
export type FlushCommand = (typeof FLUSH_COMMANDS)[number];

/** How many times the node ran each command since it started (or since CONFIG RESETSTAT). */
export type FlushCalls = Readonly<Record<FlushCommand, number>>;

const LINE = /^cmdstat_([a-z|]+):(.*)$/;

/**
 * The flush commands' `calls=` in an INFO commandstats reply (`cmdstat_flushall:calls=2,usec=…`); a command
 * the node never ran has no line and counts 0. Null when the reply is no commandstats section at all (a proxy or
 * a renamed INFO answering something else): counts read from it would all be 0 and mean nothing.
 */
export function parseFlushCalls(info: string): FlushCalls | null {
  if (!/^# Commandstats\s*$/m.test(info)) return null;
  const calls: Record<FlushCommand, number> = { flushall: 0, flushdb: 0, swapdb: 0 };
  for (const line of info.split(/\r?\n/)) {
    const match = LINE.exec(line);
    const command = match?.[1];
    if (command === undefined || !(FLUSH_COMMANDS as readonly string[]).includes(command)) continue;
    // `calls=` is the field's whole name: `rejected_calls=` and `failed_calls=` are other counts.
    const field = (match?.[2] ?? "").split(",").find((f) => f.startsWith("calls="));
    const value = Number(field?.slice("calls=".length));
    if (Number.isSafeInteger(value) && value >= 0) calls[command as FlushCommand] = value;
  }
  return calls;
}

/**
 * Whether a flush command ran between two readings of the counts. None before the first reading (`prev` null):
 * the caller reconciles the node when it takes that baseline. Counts that went down were reset (CONFIG
 * RESETSTAT zeroes them all): the new counts are the baseline, and any count above 0 in them was run since the
 * reset. (A reset and as many flushes as were counted before, between two readings, look like no change: rare
 * enough to leave to the next reconcile.)
 */
export function flushedSince(prev: FlushCalls | null, next: FlushCalls): boolean {
  if (prev === null) return false;
  const reset = FLUSH_COMMANDS.some((c) => next[c] < prev[c]);
  return FLUSH_COMMANDS.some((c) => (reset ? next[c] > 0 : next[c] > prev[c]));
}
