import "server-only";
import type Redis from "ioredis";
import { RUNS_KEPT, RUNS_LIST_KEY, runCancelKey, runHeartbeatKey, runRecordKey } from "@/lib/lab/keys";
import { LAB_KEY_TTL_MS } from "@/lib/lab/runner";
import type { RunRecord, SeriesPoint } from "@/lib/lab/types";

/**
 * The lab's run history, on node 0 so every console instance over the same nodes lists the same runs:
 * a list of run ids (newest first, the last 50 kept) and one JSON string per run, its chart series apart
 * so listing stays small. None of these keys match the lock patterns.
 */

/** A running run whose console node 0 has not heard from for this long is shown as failed. */
export const STALE_AFTER_MS = 15_000;
/**
 * The TTL of a running run's heartbeat key, renewed at each progress write: node 0 has not heard from a run
 * whose key is gone for at least this long (it is then abandoned: its keys' TTLs have run out too).
 */
export const HEARTBEAT_TTL_MS = LAB_KEY_TTL_MS;

const seriesKey = (id: string) => `${runRecordKey(id)}:series`;

// Adds the run and drops the ones beyond the cap, with their records, in one step so two consoles
// adding at once cannot leave orphans. KEYS[1]: the list. ARGV: id, record JSON, how many to keep, the
// heartbeat's TTL (ms; the run is running).
const ADD_RUN_LUA = `
redis.call("SET", "lockscope:lab:run:" .. ARGV[1], ARGV[2])
redis.call("SET", "lockscope:lab:heartbeat:" .. ARGV[1], "1", "PX", ARGV[4])
redis.call("LPUSH", KEYS[1], ARGV[1])
local keep = tonumber(ARGV[3])
for _, old in ipairs(redis.call("LRANGE", KEYS[1], keep, -1)) do
  redis.call("DEL", "lockscope:lab:run:" .. old, "lockscope:lab:run:" .. old .. ":series", "lockscope:lab:heartbeat:" .. old)
end
redis.call("LTRIM", KEYS[1], 0, keep - 1)
return 1
`;

function withoutSeries(record: RunRecord): RunRecord {
  const { series: _series, ...rest } = record;
  return rest;
}

export async function addRun(client: Redis, record: RunRecord): Promise<void> {
  await client.eval(ADD_RUN_LUA, 1, RUNS_LIST_KEY, record.id, JSON.stringify(withoutSeries(record)), RUNS_KEPT, HEARTBEAT_TTL_MS);
}

/** Removes a run from the history: its id, its record and its series. */
export async function dropRun(client: Redis, id: string): Promise<void> {
  await client.multi().lrem(RUNS_LIST_KEY, 0, id).del(runRecordKey(id), seriesKey(id), runHeartbeatKey(id)).exec();
}

// Rewrites a run's record and, when given, its series. A record that is gone was either trimmed out of
// the history (the list is full without it: it stays gone) or lost with node 0's data (node 0 restarted
// empty: the list is shorter, or empty), in which case the run is put back, so a run that outlived a
// restart of node 0 keeps its record. A running run's heartbeat is renewed with it (an ended run's is
// deleted). KEYS[1]: the list. ARGV: id, record JSON, how many to keep, series JSON or "", the heartbeat's
// TTL (ms) or "" when the run has ended. Returns 1 when stored, 0 when the run had been trimmed.
const SAVE_RUN_LUA = `
local key = "lockscope:lab:run:" .. ARGV[1]
if redis.call("EXISTS", key) == 0 then
  if redis.call("LPOS", KEYS[1], ARGV[1]) or redis.call("LLEN", KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
  redis.call("LPUSH", KEYS[1], ARGV[1])
end
redis.call("SET", key, ARGV[2])
if ARGV[4] ~= "" then redis.call("SET", key .. ":series", ARGV[4]) end
if ARGV[5] ~= "" then
  redis.call("SET", "lockscope:lab:heartbeat:" .. ARGV[1], "1", "PX", ARGV[5])
else
  redis.call("DEL", "lockscope:lab:heartbeat:" .. ARGV[1])
end
return 1
`;

/**
 * Rewrites a run's record (a trimmed run stays trimmed; one lost with node 0's data is put back). Only the
 * console running a run saves it as running: that renews the run's heartbeat on node 0.
 */
export async function saveRun(client: Redis, record: RunRecord, series?: SeriesPoint[]): Promise<void> {
  const heartbeat = record.status === "running" ? String(HEARTBEAT_TTL_MS) : "";
  await client.eval(SAVE_RUN_LUA, 1, RUNS_LIST_KEY, record.id, JSON.stringify(withoutSeries(record)), RUNS_KEPT, series ? JSON.stringify(series) : "", heartbeat);
}

function parseRecord(raw: string | null | undefined): RunRecord | null {
  if (raw === null || raw === undefined) return null;
  try {
    return JSON.parse(raw) as RunRecord;
  } catch {
    return null;
  }
}

/**
 * How long node 0 has gone without a progress write for the run, by node 0's own clock, from the PTTL of its
 * heartbeat key; null when the key is gone (HEARTBEAT_TTL_MS or more).
 */
function silenceOf(pttl: unknown): number | null {
  return typeof pttl === "number" && pttl >= 0 ? Math.max(0, HEARTBEAT_TTL_MS - pttl) : null;
}

/**
 * A running run whose console went silent: it will never finish, so say it failed. `silentMs`: how long node
 * 0 has not heard from it (null: HEARTBEAT_TTL_MS or more). The runner's own timestamps are never compared
 * with this console's clock: the two may disagree by minutes.
 */
export function markStale(record: RunRecord, silentMs: number | null): RunRecord {
  if (record.status !== "running" || (silentMs !== null && silentMs < STALE_AFTER_MS)) return record;
  const seconds = Math.floor((silentMs ?? HEARTBEAT_TTL_MS) / 1000);
  return { ...record, status: "failed", error: `The console running it has not reported for ${seconds} s or more (it was stopped or lost node 0).` };
}

/** A run as recorded on node 0, with how long node 0 has not heard from the console running it (see `silenceOf`). */
export interface StoredRun {
  record: RunRecord;
  silentMs: number | null;
}

/** The last runs as recorded, newest first, not yet judged stale (see `listRuns`). */
export async function listStoredRuns(client: Redis, limit: number): Promise<StoredRun[]> {
  const ids = await client.lrange(RUNS_LIST_KEY, 0, limit - 1);
  if (ids.length === 0) return [];
  const pipeline = client.pipeline().mget(...ids.map(runRecordKey));
  for (const id of ids) pipeline.pttl(runHeartbeatKey(id));
  const replies = (await pipeline.exec()) ?? [];
  const [mgetError, raws] = replies[0] ?? [];
  if (mgetError) throw mgetError;
  const stored: StoredRun[] = [];
  ((raws ?? []) as Array<string | null>).forEach((raw, i) => {
    const record = parseRecord(raw);
    if (record) stored.push({ record, silentMs: silenceOf(replies[i + 1]?.[1]) });
  });
  // Newest first by creation: a run put back after node 0 restarted sits at the head of the list.
  return stored.sort((a, b) => b.record.createdAt - a.record.createdAt);
}

/** The last runs, newest first, a silent running run shown as failed. */
export async function listRuns(client: Redis, limit: number): Promise<RunRecord[]> {
  return (await listStoredRuns(client, limit)).map(({ record, silentMs }) => markStale(record, silentMs));
}

export function sortNewestFirst(runs: RunRecord[]): RunRecord[] {
  return runs.sort((a, b) => b.createdAt - a.createdAt);
}

export async function readRun(client: Redis, id: string): Promise<RunRecord | null> {
  const replies = (await client.pipeline().mget(runRecordKey(id), seriesKey(id)).pttl(runHeartbeatKey(id)).exec()) ?? [];
  const [mgetError, values] = replies[0] ?? [];
  if (mgetError) throw mgetError;
  const [record, series] = (values ?? []) as Array<string | null>;
  const stored = parseRecord(record);
  if (!stored) return null;
  const parsed = markStale(stored, silenceOf(replies[1]?.[1]));
  let points: SeriesPoint[] = [];
  try {
    points = series ? (JSON.parse(series) as SeriesPoint[]) : [];
  } catch {
    points = [];
  }
  return { ...parsed, series: points };
}

/** Asks whichever console runs `id` to cancel it (it checks on each progress write). */
export async function requestCancel(client: Redis, id: string): Promise<void> {
  await client.set(runCancelKey(id), "1", "PX", 10 * 60_000);
}

export async function cancelRequested(client: Redis, id: string): Promise<boolean> {
  return (await client.exists(runCancelKey(id))) === 1;
}

export async function clearCancel(client: Redis, id: string): Promise<void> {
  await client.del(runCancelKey(id));
}
