import { randomFillSync } from "node:crypto";
import * as check from "./validate.ts";

/**
 * Who holds (or waits for) a lock, read back from the value the engine wrote. Every field is null when
 * the value did not carry it.
 */
export interface HolderIdentity {
  label: string | null;
  host: string | null;
  pid: number | null;
  /** The fencing token, a decimal string, when the lock was taken fenced. */
  fence: string | null;
  /** Epoch milliseconds at the start of the acquisition. */
  acquiredAt: number | null;
}

export interface LockValueFields {
  label: string | null;
  host: string | null;
  pid: number | null;
  fence: string | null;
  acquiredAt: number;
}

/**
 * Value format, version 1, printable ASCII and colon-separated:
 *
 *   lk1:<id>:<acquiredAt base36>:<pid>:<fence>:<host>:<label>
 *
 * `<id>` is 16 base64url characters: a 6-character tag drawn at random once per engine instance (36 bits)
 * and 60 random bits drawn per lock (96 random bits for ids made without a tag). It alone makes the value a
 * unique token, so
 * compare-and-delete by any client (node-redlock, redis-cli, the console) keeps working on the whole
 * value. host and label are percent-encoded (encodeURIComponent), which leaves no ':' or '|' in them;
 * empty fields are null.
 */
const PREFIX = "lk1:";
const ID_LENGTH = 16;
const VALUE_PATTERN = new RegExp(
  `^lk1:([A-Za-z0-9_-]{16}):([0-9a-z]{1,11}):(0|[1-9][0-9]{0,9})?:(0|[1-9][0-9]{0,39})?:([^:]{0,${check.MAX_ENCODED_FIELD}}):([^:]{0,${check.MAX_ENCODED_FIELD}})$`,
);

// randomFillSync per value is a syscall; drawing ids from a pooled buffer keeps the hot path cheap.
const POOL_SIZE = 12 * 256;
const pool = Buffer.alloc(POOL_SIZE);
let poolOffset = POOL_SIZE;

/** Characters of an id that name the engine instance that made it (see `randomId`). */
export const INSTANCE_TAG_LENGTH = 6;

/**
 * A fresh id, base64url (16 characters, 96 random bits). Also the waiter id in telemetry. With `tag` (an
 * `INSTANCE_TAG_LENGTH`-character random tag, 36 bits, drawn once per engine instance) the id starts with
 * the tag and only the other 60 bits are drawn per id: still unique, and a release script can address the
 * engine instance of the waiter it wakes from the waiter id alone.
 */
export function randomId(tag?: string): string {
  if (poolOffset + 12 > POOL_SIZE) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const id = pool.toString("base64url", poolOffset, poolOffset + 12);
  poolOffset += 12;
  return tag === undefined ? id : tag + id.slice(INSTANCE_TAG_LENGTH);
}

const encodeField = (text: string | null): string => (text === null ? "" : encodeURIComponent(text));

/**
 * The constant tail of a value (`:<host>:<label>`), computed once per engine rather than per lock.
 * @internal
 */
export function encodeIdentityTail(host: string | null, label: string | null): string {
  return `:${encodeField(host)}:${encodeField(label)}`;
}

// Base 36 of the last acquisition time: values are made thousands of times per millisecond under load,
// and number-to-radix conversion is one of the costlier steps of making one.
let lastAt = -1;
let lastAt36 = "0";

/** @internal Builds a value from its parts; `tail` comes from `encodeIdentityTail`. */
export function composeLockValue(id: string, acquiredAt: number, pid: number | null, fence: string | null, tail: string): string {
  const at = Math.max(0, Math.trunc(acquiredAt));
  if (at !== lastAt) {
    lastAt = at;
    lastAt36 = at.toString(36);
  }
  return `${PREFIX}${id}:${lastAt36}:${pid ?? ""}:${fence ?? ""}${tail}`;
}

/** A unique lock value (token) carrying the holder's identity. */
export function encodeLockValue(fields: LockValueFields): string {
  check.holderField("host", fields.host);
  check.holderField("label", fields.label);
  check.holderPid("pid", fields.pid);
  if (fields.fence !== null) check.fenceString("fence", fields.fence);
  check.nonNegativeInteger("acquiredAt", fields.acquiredAt);
  return composeLockValue(randomId(), fields.acquiredAt, fields.pid, fields.fence, encodeIdentityTail(fields.host, fields.label));
}

function decodeField(text: string): string | null | undefined {
  if (text === "") return null;
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/** Reads an engine-made value back; null for any value the engine did not make (or a damaged one). */
export function decodeLockValue(value: string): HolderIdentity | null {
  if (!value.startsWith(PREFIX)) return null;
  const match = VALUE_PATTERN.exec(value);
  if (!match) return null;
  const [, , at, pid, fence, host, label] = match;
  const decodedHost = decodeField(host ?? "");
  const decodedLabel = decodeField(label ?? "");
  if (decodedHost === undefined || decodedLabel === undefined) return null;
  const acquiredAt = parseInt(at ?? "", 36);
  return {
    label: decodedLabel,
    host: decodedHost,
    pid: pid ? Number(pid) : null,
    fence: fence ?? null,
    acquiredAt: Number.isSafeInteger(acquiredAt) ? acquiredAt : null,
  };
}

/** The random id of an engine-made value (the waiter id telemetry reports), or null for a foreign value. */
export function lockValueId(value: string): string | null {
  return decodeLockValue(value) ? value.slice(PREFIX.length, PREFIX.length + ID_LENGTH) : null;
}
