import { createHash } from "node:crypto";
import type Redis from "ioredis";
import type { ScriptClient } from "@lockscope/redlock";
import { defineScript, runScript, type Script } from "@lockscope/redlock";
import type { NodeClock } from "../node-clock";
import type { Extras, FormatName, KeyReading, LockFormat, RawReading, ReadType } from "./types";

/**
 * The watcher's batched per-node read: one script for many keys, so value, type and TTL come from the same
 * instant and a batch costs one command. Per key it reads what every format of that type needs, bounded so
 * one huge key cannot stall the node or the console:
 *
 *   string: the first `maxBytes` bytes (GETRANGE; STRLEN only when they fill the bound), PTTL, and the SHA-1
 *           of the whole value when it is longer than the bound (up to `maxDigestBytes`) or not all ASCII
 *   hash:   HLEN, then HGETALL (or at most `maxItems` fields from one HSCAN step), PTTL
 *   zset:   ZCARD, ZREVRANGE 0 maxItems-1 WITHSCORES (the highest scores first: in a set of holders scored
 *           by time, the newest, which are the live ones), PTTL
 *   other:  PTTL only (listed as `unknown` with its type)
 *
 * and then each format's companion block for that type (see `LockFormat.readLua`). TYPE is asked only when
 * the string read fails (another type) or finds nothing (a missing key or an empty string): a string lock
 * costs two calls, as GET + PTTL did.
 *
 * ARGV[1]: maxBytes, ARGV[2]: maxItems, ARGV[3]: "1" to run the companion blocks, ARGV[4]: "1" for a peek
 * (discovery: only what recognising a layout needs, one call per string key; PTTL is not read and answers
 * -3, a string's size is what was read), ARGV[5]: maxDigestBytes.
 * The reply is one flat list: per key, its kind (`KIND`: a number for the types read in full and a missing
 * key, the type's name for any other), then nothing for a missing key, else pttl, size, payload (a string's
 * followed by its digest, or nil) and the companion results (another type: pttl alone; a string read whole, all
 * ASCII and without companion results, the most common lock value: its own kind, pttl and value); after the keys, the
 * node's clock (epoch ms, `TIME`) at the read, so every PTTL is exact in the node's clock. Flat, with numbers
 * for the kinds: a list and a type name per key cost the node a Lua table and the console two arrays and two
 * strings per key, a third of the read of a million keys.
 */
export interface ReadLimits {
  /** Longest string value read whole. @default 1024 */
  maxBytes: number;
  /** Most hash fields or sorted-set members read. @default 64 */
  maxItems: number;
  /** Run the formats' companion reads (Redisson's fair-lock queue). @default true */
  companions: boolean;
  /** Read only what recognising a layout needs (no TTL, no string size): discovery's peek. @default false */
  peek: boolean;
  /**
   * Longest string value whose digest is taken when it is longer than `maxBytes` (hashing a larger one would
   * hold the node up). @default 65536
   */
  maxDigestBytes: number;
}

export const DEFAULT_READ_LIMITS: Readonly<ReadLimits> = Object.freeze({ maxBytes: 1024, maxItems: 64, companions: true, peek: false, maxDigestBytes: 65_536 });

/**
 * A key's kind in the read script's reply: a number for a missing key and the types read in full (a type name per
 * key would be a string to make for each), the type's own name for any other type.
 */
const KIND = Object.freeze({ none: 0, string: 1, hash: 2, zset: 3, plainString: 4 });

/** Lua helper pasted in front of format blocks: the node clock in epoch ms (queue timeouts are epoch ms). */
const NODE_NOW_LUA = `
local function node_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

export interface ReadPlan {
  script: Script;
  /** For each read type, the formats whose companion results follow the payload, in reply order. */
  extrasOrder: Readonly<Record<ReadType, readonly FormatName[]>>;
}

/** Builds the read script from the formats' companion blocks. */
export function buildReadPlan(formats: readonly LockFormat[]): ReadPlan {
  const extrasOrder = { string: [] as FormatName[], hash: [] as FormatName[], zset: [] as FormatName[] };
  const blocks: Record<ReadType, string> = { string: "", hash: "", zset: "" };
  for (const format of formats) {
    if (!format.readLua) continue;
    const { type, lua } = format.readLua;
    extrasOrder[type].push(format.name);
    // Each block runs in its own scope; `extra` starts false so a block that finds nothing adds a nil
    // reply at its place instead of shifting the ones after it.
    blocks[type] += `
      do
        local extra = false
        -- ${format.name}
        ${lua.trim()}
        n = n + 1
        out[n] = extra
      end`;
  }
  const source = `${NODE_NOW_LUA}
local max_bytes = tonumber(ARGV[1])
local max_items = tonumber(ARGV[2])
local companions = ARGV[3] == '1'
local peek = ARGV[4] == '1'
local max_digest = tonumber(ARGV[5])
-- The bounds as text: a number argument to redis.call is formatted anew on every call (about a sixth of the
-- script's time per key).
local last_byte = tostring(max_bytes - 1)
local last_item = tostring(max_items - 1)
local out = {}
-- Replies so far (the keys' records are of different lengths: see KIND).
local n = 0
for i, key in ipairs(KEYS) do
  -- Most lock keys are strings: try the bounded read first and ask TYPE only when it fails (another type)
  -- or reads nothing (a missing key, or an empty string), so a string costs the same two calls as GET + PTTL.
  local value = redis.pcall('GETRANGE', key, '0', last_byte)
  local t = 'string'
  if type(value) == 'table' or value == '' then t = redis.call('TYPE', key)['ok'] end
  if t == 'none' then
    n = n + 1
    out[n] = ${KIND.none}
  else
    local pttl = -3
    if not peek then pttl = redis.call('PTTL', key) end
    if t == 'string' then
      local size = #value
      if size == max_bytes and not peek then size = redis.call('STRLEN', key) end
      -- Two values that differ only past the bound, or only in bytes that are not valid UTF-8 (the console
      -- reads text), must not look alike: such a value is also compared, and released, by its digest.
      local digest = false
      if not peek then
        if size > max_bytes then
          if size <= max_digest then digest = redis.sha1hex(redis.call('GET', key)) end
        elseif string.find(value, '[\\128-\\255]') then
          digest = redis.sha1hex(value)
        end
      end
      if not peek and not digest and size == #value${blocks.string === "" ? "" : " and not companions"} then
        -- Most lock values: read whole, all ASCII, no companion result. Their size is the text's length, and
        -- there is no digest: the kind, the TTL and the value say it all (three replies rather than five, for
        -- the node to make and the console to parse).
        out[n + 1] = ${KIND.plainString}
        out[n + 2] = pttl
        out[n + 3] = value
        n = n + 3
      else
        out[n + 1] = ${KIND.string}
        out[n + 2] = pttl
        out[n + 3] = size
        out[n + 4] = value
        out[n + 5] = digest
        n = n + 5${blocks.string === "" ? "" : `
        if companions then ${blocks.string}
        end`}
      end
    elseif t == 'hash' then
      local size = redis.call('HLEN', key)
      local flat
      if size <= max_items then
        flat = redis.call('HGETALL', key)
      else
        -- One HSCAN step; a small hash answers whole in one step, so cut it to the bound here.
        local step = redis.call('HSCAN', key, 0, 'COUNT', max_items)[2]
        flat = {}
        local has_mode = false
        for j = 1, math.min(#step, 2 * max_items) do
          flat[j] = step[j]
          if j % 2 == 1 and step[j] == 'mode' then has_mode = true end
        end
        -- A Redisson read-write lock is told by its mode field, which one step need not reach.
        if not has_mode then
          local mode = redis.call('HGET', key, 'mode')
          if mode then
            flat[#flat + 1] = 'mode'
            flat[#flat + 1] = mode
          end
        end
      end
      out[n + 1] = ${KIND.hash}
      out[n + 2] = pttl
      out[n + 3] = size
      out[n + 4] = flat
      n = n + 4${blocks.hash === "" ? "" : `
      if companions then ${blocks.hash}
      end`}
    elseif t == 'zset' then
      local size = redis.call('ZCARD', key)
      out[n + 1] = ${KIND.zset}
      out[n + 2] = pttl
      out[n + 3] = size
      out[n + 4] = redis.call('ZREVRANGE', key, '0', last_item, 'WITHSCORES')
      n = n + 4${blocks.zset === "" ? "" : `
      if companions then ${blocks.zset}
      end`}
    else
      out[n + 1] = t
      out[n + 2] = pttl
      n = n + 2
    end
  end
end
out[n + 1] = node_now()
return out
`;
  return { script: defineScript(source), extrasOrder };
}

const asNumber = (value: unknown, fallback: number): number => {
  if (typeof value === "number") return value;
  if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value))) return Number(value);
  return fallback;
};

const asText = (value: unknown): string | null => (typeof value === "string" ? value : Buffer.isBuffer(value) ? value.toString("utf8") : null);

function pairs(flat: unknown): Array<[string, string]> {
  if (!Array.isArray(flat)) return [];
  const out: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const field = asText(flat[i]);
    const value = asText(flat[i + 1]);
    if (field !== null && value !== null) out.push([field, value]);
  }
  return out;
}

/**
 * The keys' records in the script's flat reply from `from` on, as raw readings (see `buildReadPlan`), and where the
 * reply goes on after them (the node's clock).
 */
export function parseKeyReplies(flat: readonly unknown[], count: number, plan: ReadPlan, companions: boolean, from = 0): { raws: RawReading[]; next: number } {
  const raws = new Array<RawReading>(count);
  let i = from;
  for (let k = 0; k < count; k++) {
    const kind = flat[i];
    if (kind === KIND.plainString) {
      // (All ASCII: its length is its size in bytes.)
      const value = asText(flat[i + 2]) ?? "";
      raws[k] = { type: "string", pttlMs: asNumber(flat[i + 1], -2), size: value.length, value, extras: NO_EXTRAS };
      i += 3;
    } else if (kind === KIND.string) {
      const digest = asText(flat[i + 4]);
      const raw: RawReading = { type: "string", pttlMs: asNumber(flat[i + 1], -2), size: asNumber(flat[i + 2], 0), value: asText(flat[i + 3]) ?? "", extras: NO_EXTRAS };
      if (digest !== null) raw.digest = digest;
      i += 5;
      if (companions && plan.extrasOrder.string.length > 0) {
        raw.extras = extrasOf(flat, i, plan.extrasOrder.string);
        i += plan.extrasOrder.string.length;
      }
      raws[k] = raw;
    } else if (kind === KIND.hash || kind === KIND.zset) {
      const type = kind === KIND.hash ? "hash" : "zset";
      const extras = companions && plan.extrasOrder[type].length > 0 ? extrasOf(flat, i + 4, plan.extrasOrder[type]) : NO_EXTRAS;
      const pttlMs = asNumber(flat[i + 1], -2);
      const size = asNumber(flat[i + 2], 0);
      raws[k] =
        type === "hash"
          ? { type, pttlMs, size, fields: pairs(flat[i + 3]), extras }
          : { type, pttlMs, size, members: pairs(flat[i + 3]).map(([member, score]): [string, number] => [member, asNumber(score, Number.NaN)]), extras };
      i += 4 + (companions ? plan.extrasOrder[type].length : 0);
    } else {
      const type = kind === KIND.none ? null : asText(kind);
      if (type === null || type === "none") {
        raws[k] = { type: "none" };
        i += 1;
      } else {
        raws[k] = { type: "other", redisType: type, pttlMs: asNumber(flat[i + 1], -2), extras: NO_EXTRAS };
        i += 2;
      }
    }
  }
  return { raws, next: i };
}

/** Most readings have no companion result: they share one empty, frozen set (a reconcile makes millions of readings). */
const NO_EXTRAS: Extras = Object.freeze({});

/** The companion results that follow a key's payload (from `from` on) in the reply, by format. */
function extrasOf(reply: readonly unknown[], from: number, names: readonly FormatName[]): Extras {
  let extras = NO_EXTRAS;
  for (let j = 0; j < names.length; j++) {
    const value: unknown = reply[from + j];
    if (value === undefined || value === null) continue;
    if (extras === NO_EXTRAS) extras = {};
    extras[names[j] as FormatName] = value;
  }
  return extras;
}

/**
 * The script's whole reply as readings, each timed at the node's clock carried onto this console's by `clock`
 * (or, without one, at the middle of the round trip from `sentAt` to now).
 */
export function parseReadReply(keys: readonly string[], reply: unknown, sentAt: number, plan: ReadPlan, companions: boolean, clock?: NodeClock): KeyReading[] {
  const flat = Array.isArray(reply) ? (reply as unknown[]) : [];
  const { raws, next } = parseKeyReplies(flat, keys.length, plan, companions);
  const at = readAt(flat[next], sentAt, clock);
  const readings = new Array<KeyReading>(keys.length);
  for (let k = 0; k < keys.length; k++) readings[k] = { key: keys[k] as string, at, raw: raws[k] as RawReading };
  return readings;
}

function readAt(nodeNow: unknown, sentAt: number, clock: NodeClock | undefined): number {
  const receivedAt = Date.now();
  return clock ? clock.toLocal(asNumber(nodeNow, Number.NaN), sentAt, receivedAt) : (sentAt + receivedAt) / 2;
}

/**
 * Reads `keys` on one node with the plan's script (EVALSHA, EVAL when the node lacks it). `clock`: the node's
 * (see `NodeClock`), so that readings of one node agree on when its TTLs end however late their replies are
 * handled.
 */
export async function readWithPlan(
  client: ScriptClient,
  plan: ReadPlan,
  keys: readonly string[],
  limits: Partial<ReadLimits> = {},
  clock?: NodeClock,
): Promise<KeyReading[]> {
  if (keys.length === 0) return [];
  const { maxBytes, maxItems, companions, peek, maxDigestBytes } = { ...DEFAULT_READ_LIMITS, ...limits };
  const sentAt = Date.now();
  const reply = await runScript(client, plan.script, keys, [maxBytes, maxItems, companions ? "1" : "0", peek ? "1" : "0", maxDigestBytes]);
  return parseReadReply(keys, reply, sentAt, plan, companions, clock);
}

/** The absolute end of a key's TTL from a PTTL sample: Infinity without TTL, NaN when the key is gone (or PTTL was not read). */
export function keyExpiry(at: number, pttlMs: number): number {
  if (pttlMs === -1) return Infinity;
  // (Whole milliseconds: the read's time on this console's clock may fall between two, half a round trip after the send.)
  if (pttlMs >= 0) return Math.round(at + pttlMs);
  return Number.NaN;
}

/**
 * Whether a command failed because the node refuses scripts (EVAL disabled, renamed or not granted, as on some
 * managed services): the caller then sends the same commands without one.
 */
export function isScriptRefused(error: unknown): error is Error {
  return error instanceof Error && !ACCESS_REFUSED.test(error.message) && /unknown command|not allowed|NOPERM|disabled/i.test(error.message);
}

/**
 * A key or channel the ACL user may not touch, in the texts of Redis 7.0 (`NOPERM this user has no permissions to
 * access one of the keys used as arguments`, `… can't access at least one of the keys` from a script) and of 7.2
 * and later (`NOPERM No permissions to access a key`, `… the 'k' key`, `ERR ACL failure in script: …`).
 */
const ACCESS_REFUSED = /NOPERM .*(keys|channels) used as arguments|can't access at least one of the keys|no permissions to access (a|the '.*') (key|channel)\b/i;

/**
 * Whether a command was refused because the ACL user may not touch one of its keys or channels, not the command
 * itself (`NOPERM` for the keys a command names, an `ERR` for a key a script touches).
 */
export function isAccessRefused(error: unknown): error is Error {
  return error instanceof Error && ACCESS_REFUSED.test(error.message);
}

/** What reading without scripts needs: MULTI, or a pipeline where MULTI is refused (an ioredis client has both). */
export type MultiClient = Pick<Redis, "multi" | "pipeline">;

/**
 * Whether a command failed because the node refuses transactions (MULTI or EXEC renamed away or not granted to the
 * console's Redis user): the caller then reads with a plain pipeline (`readWithoutScripts(…, "pipeline")`).
 */
export function isTransactionRefused(error: unknown): error is Error {
  return error instanceof Error && /(NOPERM .*'(multi|exec)' command|unknown command '(multi|exec)')/i.test(error.message);
}

/**
 * How `readWithoutScripts` sends each step: `multi`, each step a snapshot of the node; `pipeline`, where the node
 * refuses transactions, the same commands one after the other (a key changed between two of them reads as gone
 * or as it was, and its change is notified and read again, as between two steps).
 */
export type ReadBatch = "multi" | "pipeline";

/**
 * The same readings where a node refuses scripts (EVAL disabled or renamed on some managed services): two
 * MULTIs, one for TYPE and PTTL of every key, one for TYPE again and the bounded reads each type needs. A key
 * deleted or of another type by the second reads as gone until the next read (its change is notified). The formats' companion
 * reads need a script and are skipped (Redisson's fair-lock waiters read as not visible).
 */
export async function readWithoutScripts(
  client: MultiClient,
  keys: readonly string[],
  limits: Partial<ReadLimits> = {},
  clock?: NodeClock,
  batch: ReadBatch = "multi",
): Promise<KeyReading[]> {
  if (keys.length === 0) return [];
  const { maxBytes, maxItems, maxDigestBytes } = { ...DEFAULT_READ_LIMITS, ...limits };
  const step = () => (batch === "multi" ? client.multi() : client.pipeline());
  const sentAt = Date.now();
  const first = step();
  for (const key of keys) first.type(key).pttl(key);
  first.time();
  const heads = (await first.exec()) ?? [];
  // A refusal here (the ACL refusing a key) must not read as the key gone: a transaction's EXEC fails whole,
  // a pipeline answers each command, so its first error is thrown as EXEC's would be.
  const refused = heads.find(([error]) => error !== null)?.[0];
  if (refused) throw refused;
  const time = heads[2 * keys.length]?.[1];
  const at = readAt(Array.isArray(time) ? Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000) : Number.NaN, sentAt, clock);
  const types = keys.map((_, i) => asText(heads[2 * i]?.[1]) ?? "none");
  const second = step();
  // Each body read starts with TYPE again: a key deleted (or replaced by another type) between the two MULTIs
  // reads as gone, not as an empty lock of the type it had.
  // Where each key's replies start in the second MULTI's (TYPE, size, body, and a hash's mode).
  const at2 = new Array<number>(keys.length).fill(-1);
  let queued = 0;
  types.forEach((type, i) => {
    const key = keys[i] as string;
    if (type === "string") second.type(key).strlen(key).getrangeBuffer(key, 0, maxBytes - 1);
    else if (type === "hash") second.type(key).hlen(key).hscan(key, 0, "COUNT", maxItems).hget(key, "mode");
    else if (type === "zset") second.type(key).zcard(key).zrevrange(key, 0, maxItems - 1, "WITHSCORES");
    else return;
    at2[i] = queued;
    queued += type === "hash" ? 4 : 3;
  });
  const bodies = queued > 0 ? ((await second.exec()) ?? []) : [];
  // The digests the script takes (see `buildReadPlan`): of a value read whole here, or of one longer than the
  // bound read whole in a third step (up to `maxDigestBytes`).
  const whole = new Map<number, Buffer | null>();
  types.forEach((type, i) => {
    const count = type === "string" ? asNumber(bodies[(at2[i] as number) + 1]?.[1], 0) : 0;
    if (count > maxBytes && count <= maxDigestBytes) whole.set(i, null);
  });
  if (whole.size > 0) {
    const third = step();
    for (const i of whole.keys()) third.getBuffer(keys[i] as string);
    const got = (await third.exec()) ?? [];
    let g = 0;
    for (const i of whole.keys()) {
      const body = got[g++]?.[1];
      whole.set(i, Buffer.isBuffer(body) ? body : null);
    }
  }
  return keys.map((key, i): KeyReading => {
    const type = types[i] ?? "none";
    const pttlMs = asNumber(heads[2 * i + 1]?.[1], -2);
    if (type === "none") return { key, at, raw: { type: "none" } };
    if (type !== "string" && type !== "hash" && type !== "zset") return { key, at, raw: { type: "other", redisType: type, pttlMs, extras: {} } };
    const j = at2[i] as number;
    const typeNow = asText(bodies[j]?.[1]);
    const [sizeError, size] = bodies[j + 1] ?? [null, 0];
    const [bodyError, body] = bodies[j + 2] ?? [null, null];
    const mode = type === "hash" ? asText(bodies[j + 3]?.[1]) : null;
    if (typeNow !== type || sizeError || bodyError) return { key, at, raw: { type: "none" } };
    const count = asNumber(size, 0);
    if (type === "string") {
      const bytes = Buffer.isBuffer(body) ? body : Buffer.from(asText(body) ?? "");
      const raw: RawReading = { type, pttlMs, size: count, value: bytes.toString("utf8"), extras: {} };
      const hashed = count > maxBytes ? whole.get(i) : bytes.some((b) => b >= 0x80) ? bytes : null;
      if (hashed) raw.digest = createHash("sha1").update(hashed).digest("hex");
      return { key, at, raw };
    }
    if (type === "hash") {
      const step: unknown = Array.isArray(body) ? body[1] : [];
      const fields = pairs(step).slice(0, maxItems);
      // A Redisson read-write lock is told by its mode field, which one step need not reach.
      if (mode !== null && !fields.some(([field]) => field === "mode")) fields.push(["mode", mode]);
      return { key, at, raw: { type, pttlMs, size: count, fields, extras: {} } };
    }
    const members = pairs(body).map(([member, score]): [string, number] => [member, asNumber(score, Number.NaN)]);
    return { key, at, raw: { type, pttlMs, size: count, members, extras: {} } };
  });
}
