import type { ScriptClient } from "@lockscope/redlock";
import { lockscope } from "./lockscope";
import { buildReadPlan, isScriptRefused, isTransactionRefused, readWithoutScripts, readWithPlan, type MultiClient, type ReadLimits } from "./read";
import { redisSemaphore } from "./redis-semaphore";
import { redisson } from "./redisson";
import { redissonReadWrite } from "./redisson-rw";
import { shedlock } from "./shedlock";
import { token } from "./token";
import type { NodeClock } from "../node-clock";
import type { DecodeContext, FormatName, FormatReading, KeyReading, LockFormat } from "./types";
import { unknown } from "./unknown";

export * from "./types";
export { DEFAULT_READ_LIMITS, isAccessRefused, isScriptRefused, isTransactionRefused, keyExpiry, type MultiClient, type ReadBatch, type ReadLimits } from "./read";
/** The same readings with MULTI, for a node that refuses scripts (no companion reads). */
export { readWithoutScripts as readLockKeysWithoutScripts } from "./read";
export { inferScope, type ScopeEvidence } from "./scope";

/**
 * Every format, in the order they are tried: a reading belongs to the first that recognises it. Value shapes
 * that name their library (this engine's `lk1:`, ShedLock's `ADDED:`, Redisson's fields) come before name
 * conventions (redis-semaphore's `mutex:`), and those before the catch-alls (`token` for any string, `unknown`
 * for anything else).
 */
export const FORMATS: readonly LockFormat[] = Object.freeze([lockscope, shedlock, redisSemaphore, redissonReadWrite, redisson, token, unknown]);

const BY_NAME = new Map<FormatName, LockFormat>(FORMATS.map((f) => [f.name, f]));

export function formatByName(name: FormatName): LockFormat {
  const format = BY_NAME.get(name);
  if (!format) throw new RangeError(`no lock format named ${name}`);
  return format;
}

/** The batched read script for every format (the watcher's, and discovery's with companions off). */
export const READ_PLAN = buildReadPlan(FORMATS);

/** Reads lock keys on one node in one script: one reading per key, in order (timed by the node's `clock` where given). */
export function readLockKeys(client: ScriptClient, keys: readonly string[], limits: Partial<ReadLimits> = {}, clock?: NodeClock): Promise<KeyReading[]> {
  return readWithPlan(client, READ_PLAN, keys, limits, clock);
}

/** What a node was found to refuse of the ways to read lock keys; a reader that keeps it starts from what the node takes. */
export interface ReadRefusals {
  /** Scripts (EVAL disabled, renamed or not granted): read with MULTI. */
  scripts: boolean;
  /** MULTI or EXEC as well (some managed services): read with plain pipelined commands. */
  transactions: boolean;
}

/**
 * Reads lock keys on one node the best way it allows: the read script; where the node refuses scripts, MULTI;
 * where it refuses that too, a plain pipeline. `refusals` keeps what was refused (the watcher keeps it for the
 * node's life, so each later read goes straight to what the node takes) and `onRefused` hears each step down once.
 * `send` wraps each attempt (the watcher's wait for its connection). A refusal counts only on a connection that is
 * up: a command failed by a dropping connection is no answer from the node, and is thrown as it is.
 */
export async function readLockKeysAsAllowed(
  client: ScriptClient & MultiClient & { status: string },
  keys: readonly string[],
  options: {
    refusals?: ReadRefusals;
    clock?: NodeClock;
    send?: <T>(read: () => Promise<T>) => Promise<T>;
    onRefused?: (what: keyof ReadRefusals, error: Error) => void;
  } = {},
): Promise<KeyReading[]> {
  const refusals = options.refusals ?? { scripts: false, transactions: false };
  const send = options.send ?? (<T>(read: () => Promise<T>) => read());
  const note = (what: keyof ReadRefusals, error: unknown, refused: (error: unknown) => error is Error): void => {
    if (client.status !== "ready" || !refused(error)) throw error;
    refusals[what] = true;
    options.onRefused?.(what, error);
  };
  if (!refusals.scripts) {
    try {
      return await send(() => readLockKeys(client, keys, {}, options.clock));
    } catch (error) {
      note("scripts", error, isScriptRefused);
    }
  }
  if (!refusals.transactions) {
    try {
      return await send(() => readWithoutScripts(client, keys, {}, options.clock));
    } catch (error) {
      note("transactions", error, isTransactionRefused);
    }
  }
  return send(() => readWithoutScripts(client, keys, {}, options.clock, "pipeline"));
}

/** The format whose layout the reading has; null when the key is gone on that node. */
export function recogniseFormat(reading: KeyReading): LockFormat | null {
  if (reading.raw.type === "none") return null;
  // (A loop, not `find` with a closure: three readings per lock in the start-up reconcile.)
  for (let i = 0; i < FORMATS.length; i++) if ((FORMATS[i] as LockFormat).recognise(reading.key, reading.raw)) return FORMATS[i] as LockFormat;
  return unknown;
}

/** Decodes one node's reading with the format that recognises it; null when the node does not hold the key. */
export function decodeReading(reading: KeyReading, ctx: DecodeContext): FormatReading | null {
  const format = recogniseFormat(reading);
  return format ? format.decode(reading.key, reading, ctx) : null;
}

/**
 * For discovery: the format a key outside the patterns looks like, only when it is lock-shaped beyond doubt
 * (see `LockFormat.discoverable`); null otherwise.
 */
export function discoverFormat(reading: KeyReading): LockFormat | null {
  const format = recogniseFormat(reading);
  if (!format) return null;
  const discoverable = format.discoverable ?? format.recognise;
  return discoverable(reading.key, reading.raw) ? format : null;
}

/**
 * The `notify-keyspace-events` flags the watcher needs for these formats: the keyspace channel (K), generic
 * commands such as DEL and PEXPIRE (g), expirations (x) and evictions (e) for all, plus each format's type
 * class: `$` strings, `h` hashes (Redisson's HSET/HINCRBY/HDEL), `z` sorted sets (redis-semaphore's ZADD/ZREM).
 */
export function notifyFlagsFor(formats: readonly LockFormat[] = FORMATS): string[] {
  const flags = ["K", "g", "x", "e"];
  for (const format of formats) for (const cls of format.notify) if (!flags.includes(cls)) flags.push(cls);
  return flags;
}
