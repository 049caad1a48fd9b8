import "server-only";
import type Redis from "ioredis";
import { RUNS_KEPT, RUNS_LIST_KEY, runCancelKey, runRecordKey } from "@/lib/lab/keys";
import type { RunRecord, SeriesPoint } from "@/lib/lab/types";

/**
 * The lab's run history, on node 0 so every console instance over the same nodes lists the same runs:
 * a list of run ids (newest first, the last 50 kept) and one JSON string per run, its chart series apart
 * so listing stays small. None of these keys match the lock patterns.
 */

/** A running run whose console has not written for this long is shown as failed. */
export const STALE_AFTER_MS = 15_000;

const seriesKey = (id: string) => `${runRecordKey(id)}:series`;

// Adds the run and drops the ones beyond the cap, with their records, in one step so two consoles
// adding at once cannot leave orphans. KEYS[1]: the list. ARGV: id, record JSON, how many to keep.
const ADD_RUN_LUA = `
redis.call("SET", "lockscope:lab:run:" .. ARGV[1], ARGV[2])
redis.call("LPUSH", KEYS[1], ARGV[1])
local keep = tonumber(ARGV[3])
for _, old in ipairs(redis.call("LRANGE", KEYS[1], keep, -1)) do
  redis.call("DEL", "lockscope:lab:run:" .. old, "lockscope:lab:run:" .. old .. ":series")
end
redis.call("LTRIM", KEYS[1], 0, keep - 1)
return 1
`;

function withoutSeries(record: RunRecord): RunRecord {
  const { series: _series, ...rest } = record;
  return rest;
}

export async function addRun(client: Redis, record: RunRecord): Promise<void> {
  await client.eval(ADD_RUN_LUA, 1, RUNS_LIST_KEY, record.id, JSON.stringify(withoutSeries(record)), RUNS_KEPT);
}

/** Removes a run from the history: its id, its record and its series. */
export async function dropRun(client: Redis, id: string): Promise<void> {
  await client.multi().lrem(RUNS_LIST_KEY, 0, id).del(runRecordKey(id), seriesKey(id)).exec();
}

// Rewrites a run's record and, when given, its series. A record that is gone was either trimmed out of
// the history (the list is full without it: it stays gone) or lost with node 0's data (node 0 restarted
// empty: the list is shorter, or empty), in which case the run is put back, so a run that outlived a
// restart of node 0 keeps its record. KEYS[1]: the list. ARGV: id, record JSON, how many to keep, series
// JSON or "". Returns 1 when stored, 0 when the run had been trimmed.
const SAVE_RUN_LUA = `
local key = "lockscope:lab:run:" .. ARGV[1]
if redis.call("EXISTS", key) == 0 then
  if redis.call("LPOS", KEYS[1], ARGV[1]) or redis.call("LLEN", KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
  redis.call("LPUSH", KEYS[1], ARGV[1])
end
redis.call("SET", key, ARGV[2])
if ARGV[4] ~= "" then redis.call("SET", key .. ":series", ARGV[4]) end
return 1
`;

/** Rewrites a run's record (a trimmed run stays trimmed; one lost with node 0's data is put back). */
export async function saveRun(client: Redis, record: RunRecord, series?: SeriesPoint[]): Promise<void> {
  await client.eval(SAVE_RUN_LUA, 1, RUNS_LIST_KEY, record.id, JSON.stringify(withoutSeries(record)), RUNS_KEPT, series ? JSON.stringify(series) : "");
}

function parseRecord(raw: string | null): RunRecord | null {
  if (raw === null) return null;
  try {
    return markStale(JSON.parse(raw) as RunRecord, Date.now());
  } catch {
    return null;
  }
}

/** A run still marked running whose console went silent: it will never finish, so say it failed. */
export function markStale(record: RunRecord, nowMs: number): RunRecord {
  if (record.status !== "running" || nowMs - record.heartbeatAt < STALE_AFTER_MS) return record;
  return {
    ...record,
    status: "failed",
    error: `The console running it stopped reporting at ${new Date(record.heartbeatAt).toISOString()} (it was stopped or lost node 0).`,
  };
}

export async function listRuns(client: Redis, limit: number): Promise<RunRecord[]> {
  const ids = await client.lrange(RUNS_LIST_KEY, 0, limit - 1);
  if (ids.length === 0) return [];
  const raws = await client.mget(...ids.map(runRecordKey));
  // Newest first by creation: a run put back after node 0 restarted sits at the head of the list.
  return sortNewestFirst(raws.map(parseRecord).filter((r): r is RunRecord => r !== null));
}

export function sortNewestFirst(runs: RunRecord[]): RunRecord[] {
  return runs.sort((a, b) => b.createdAt - a.createdAt);
}

export async function readRun(client: Redis, id: string): Promise<RunRecord | null> {
  const [record, series] = await client.mget(runRecordKey(id), seriesKey(id));
  const parsed = parseRecord(record ?? null);
  if (!parsed) return null;
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
