/** Argument checks at the public entry points, so bad input fails at once with the argument's name. */
import { CrossSlotError } from "./errors.ts";
import {
  FENCE_KEY_PREFIX,
  FENCE_MARKER_KEY,
  FENCE_RESEED_KEY,
  LAST_FENCE_KEY_PREFIX,
  WAIT_DEADLINE_KEY_PREFIX,
  WAIT_QUEUE_KEY_PREFIX,
  WAIT_TICKET_KEY_PREFIX,
} from "./keys.ts";
import { MAX_TIMER_MS } from "./sleep.ts";
import { keyInSlotOf, keySlot } from "./slot.ts";

function describe(value: unknown): string {
  let shown: string;
  try {
    shown = typeof value === "string" ? JSON.stringify(value) : typeof value === "bigint" ? `${value}n` : String(value);
  } catch {
    shown = Object.prototype.toString.call(value);
  }
  if (shown.length > 60) shown = `${shown.slice(0, 57)}...`;
  return `\`${shown}\` (${value === null ? "null" : Array.isArray(value) ? "array" : typeof value})`;
}

export function fail(name: string, expected: string, value: unknown): never {
  throw new TypeError(`Expected \`${name}\` to be ${expected}, got ${describe(value)}`);
}

export function positiveInteger(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value <= 0) fail(name, "a positive integer", value);
  return value;
}

export function nonNegativeInteger(name: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) fail(name, "a non-negative integer", value);
  return value;
}

/**
 * A delay the engine sets a timer for: an integer from `min` to MAX_TIMER_MS (a longer timer would fire
 * after 1 ms, turning a long timeout into an immediate one).
 */
export function timerMs(name: string, value: unknown, min: 0 | 1): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > MAX_TIMER_MS) {
    fail(name, `${min === 1 ? "a positive" : "a non-negative"} integer of at most ${MAX_TIMER_MS} (ms, the longest timer Node.js honours)`, value);
  }
  return value;
}

/**
 * A TTL no longer than its drift allowance (`driftMs` in engine.ts) leaves no validity however fast the nodes
 * answer: refused at the entry point rather than tried until the retries run out.
 */
export function ttlAboveDrift(ttlMs: number, driftMs: number): void {
  if (ttlMs <= driftMs) {
    fail("ttlMs", `greater than its clock drift allowance (round(driftFactor × ttlMs) + 2 = ${driftMs} ms), or no validity could ever be left`, ttlMs);
  }
}

export function numberInRange(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < min || value > max) {
    fail(name, `a number from ${min} to ${max}`, value);
  }
  return value;
}

export function boolean(name: string, value: unknown): boolean {
  if (typeof value !== "boolean") fail(name, "a boolean", value);
  return value;
}

export function nullableString(name: string, value: unknown): string | null {
  if (value !== null && typeof value !== "string") fail(name, "a string or null", value);
  return value;
}

/** The longest host or label a lock value carries, percent-encoded: `decodeLockValue` reads no longer one. */
export const MAX_ENCODED_FIELD = 1024;

/**
 * A holder's host or label, written percent-encoded into every lock value: null, or a string that can be
 * encoded (no lone surrogate) and stays within what `decodeLockValue` reads back, so the holder and its
 * contention stay readable by any tool.
 */
export function holderField(name: string, value: unknown): string | null {
  nullableString(name, value);
  if (value === null) return null;
  let encoded: string | null;
  try {
    encoded = encodeURIComponent(value as string);
  } catch {
    encoded = null; // a lone surrogate
  }
  if (encoded === null || encoded.length > MAX_ENCODED_FIELD) {
    fail(name, `a string or null of well-formed text, at most ${MAX_ENCODED_FIELD} characters once percent-encoded`, value);
  }
  return value as string;
}

/** The largest pid a lock value carries (10 decimal digits, every 32-bit pid): `decodeLockValue` reads no larger one. */
export const MAX_PID = 9_999_999_999;

/** A holder's pid, written into every lock value: null, or an integer `decodeLockValue` reads back. */
export function holderPid(name: string, value: unknown): number | null {
  if (value !== null && (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0 || value > MAX_PID)) {
    fail(name, `null or a non-negative integer of at most ${MAX_PID}`, value);
  }
  return value;
}

export function nonEmptyString(name: string, value: unknown): string {
  if (typeof value !== "string" || value === "") fail(name, "a non-empty string", value);
  return value;
}

/**
 * The keys the engine keeps beside its locks (see keys.ts). A lock on one of them would be a lock value
 * written over a fence counter, a fence marker or a waiter queue, and its release (or a force release)
 * would delete it: a fence marker written by a lock makes a node that lost its fences look trusted, and a
 * deleted `fence:` or `fence-seen:` key lets a fence repeat. So no resource may be named like one.
 */
const ENGINE_KEY_PREFIXES = [FENCE_KEY_PREFIX, LAST_FENCE_KEY_PREFIX, WAIT_QUEUE_KEY_PREFIX, WAIT_DEADLINE_KEY_PREFIX, WAIT_TICKET_KEY_PREFIX];
const ENGINE_KEYS = [FENCE_MARKER_KEY, FENCE_RESEED_KEY];
const NOT_AN_ENGINE_KEY = `named like none of the keys the engine keeps beside its locks (${[...ENGINE_KEY_PREFIXES.map((p) => `${p}*`), ...ENGINE_KEYS].join(", ")})`;

// (A loop, not `some` with a closure: this runs on every acquisition.)
function isEngineKey(name: string): boolean {
  if (ENGINE_KEYS.includes(name)) return true;
  for (const prefix of ENGINE_KEY_PREFIXES) if (name.startsWith(prefix)) return true;
  return false;
}

/** A lock key (a resource): a non-empty string that is not one of the engine's own keys. */
export function resource(name: string, value: unknown): string {
  nonEmptyString(name, value);
  if (isEngineKey(value as string)) fail(name, NOT_AN_ENGINE_KEY, value);
  return value as string;
}

export function resourceList(name: string, value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0) fail(name, "a non-empty array of non-empty strings", value);
  const list = value as unknown[];
  for (const item of list) {
    if (typeof item !== "string" || item === "") fail(name, "a non-empty array of non-empty strings", value);
    if (isEngineKey(item)) fail(name, `an array of resources ${NOT_AN_ENGINE_KEY}`, value);
  }
  // Most locks name one resource: no Set to build for it.
  if (list.length > 1 && new Set(list).size !== list.length) fail(name, "an array without duplicates", value);
  return list.length === 1 ? [list[0] as string] : [...(list as string[])];
}

export function fenceString(name: string, value: unknown): string {
  if (typeof value !== "string" || !/^(0|[1-9][0-9]{0,39})$/.test(value)) fail(name, "a decimal fence string", value);
  return value;
}

/**
 * An AbortSignal, or something that behaves as one where the engine uses it: it reads `aborted` and listens for
 * "abort" while it sleeps between attempts (a look-alike with `aborted` only failed there, mid-acquisition).
 */
export function abortSignal(name: string, value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "object" || value === null) fail(name, "an AbortSignal", value);
  const signal = value as Partial<AbortSignal>;
  if (typeof signal.aborted !== "boolean" || typeof signal.addEventListener !== "function" || typeof signal.removeEventListener !== "function") {
    fail(name, "an AbortSignal", value);
  }
  return signal as AbortSignal;
}

export function clientList<T>(name: string, value: unknown, methods: readonly string[]): T[] {
  if (!Array.isArray(value) || value.length === 0) fail(name, "a non-empty array of Redis clients", value);
  for (const client of value as unknown[]) {
    if (typeof client !== "object" || client === null || methods.some((m) => typeof (client as Record<string, unknown>)[m] !== "function")) {
      fail(name, `an array of Redis clients (with ${methods.join(", ")})`, value);
    }
  }
  return [...(value as T[])];
}

/** Edit distance (insertions, deletions, substitutions), for "did you mean" hints on option names. */
function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

/** The known name closest to `name`, ignoring case (`retryDelay` → `retryDelayMs`). */
export function nearestName(name: string, known: readonly string[]): string {
  const lower = name.toLowerCase();
  let best = known[0]!;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const d = distance(lower, candidate.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}

/**
 * An option object has only known names: a misspelt or foreign setting (node-redlock's `retryDelay` where
 * this engine takes `retryDelayMs`) would otherwise be ignored silently and its default used instead.
 */
export function knownKeys(what: string, value: object, known: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) {
      throw new TypeError(`Unknown ${what} \`${key}\`: did you mean ${nearestName(key, known)}? (known: ${known.join(", ")})`);
    }
  }
}

/** An options argument: an object with only known names (see `knownKeys`). */
export function optionsObject<T extends object>(what: string, value: unknown, known: readonly (keyof T & string)[]): T {
  if (typeof value !== "object" || value === null) fail("options", "an object", value);
  knownKeys(`${what} option`, value, known);
  return value as T;
}

/**
 * On a cluster client: the resources of one lock in one hash slot, each one whose companion keys can
 * follow it there (see keys.ts); else a `CrossSlotError` naming the resources and their slots.
 */
export function oneSlot(resources: readonly string[]): void {
  const slots = resources.map(keySlot);
  if (new Set(slots).size > 1) throw new CrossSlotError(resources, slots);
  const unplaceable = resources.findIndex((r) => keyInSlotOf("", r) === null);
  if (unplaceable !== -1) throw new CrossSlotError([resources[unplaceable]!], [slots[unplaceable]!]);
}
