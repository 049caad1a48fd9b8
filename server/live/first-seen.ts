import "server-only";
import { hash } from "node:crypto";
import { defineScript, isClusterClient, runScript } from "@lockscope/redlock";
import { readInSlots } from "@/lib/locks/cluster";
import { isScriptRefused } from "@/lib/locks/formats";
import type { LockClient } from "../deployments";
import { whenReady } from "../health";
import type { LockStore } from "./store";

/** One small string per foreign lock value, on node 0: `lockscope:first-seen:<hash of resource and value>`. */
export const FIRST_SEEN_PREFIX = "lockscope:first-seen:";
/** The record outlives its lock by this much, so a console that sees the lock a little late still finds it. */
const MARGIN_MS = 10 * 60_000;
/** A lock without a TTL keeps its record this long after it was last seen acquired or extended. */
const WITHOUT_TTL_KEEP_MS = 7 * 24 * 60 * 60_000;
/** How long a sighting waits for the connection to node 0 before this console keeps its own time. */
const READY_WAIT_MS = 10_000;

export function firstSeenKey(resource: string, token: string): string {
  return FIRST_SEEN_PREFIX + hash("sha1", `${resource}\n${token}`, "base64url");
}

/** Sightings sent to node 0 in one pipeline at most (a reconcile of 100,000 foreign locks is 100 of them). */
const BATCH = 1_000;
/** Sightings wait this long to be sent with others (a burst of changes is one write to node 0, not one each). */
const FLUSH_MS = 10;
/**
 * The locks found already held at start are shared in batches this size with this pause between them (about
 * 20,000 a second at most: node 0 keeps answering everybody else meanwhile).
 */
const BACKFILL_BATCH = 500;
const BACKFILL_PAUSE_MS = 25;

/**
 * Per key: record the first sighting unless one exists (or the one recorded is older than `notBefore`: an earlier
 * lock's, made of the same value), renew the record's expiry, answer the recorded time.
 * KEYS: the records; ARGV: per key, the sighting time, how long to keep the record (ms) and `notBefore` (0: none).
 */
const SHARE_SCRIPT = defineScript(`
local out = {}
for i, key in ipairs(KEYS) do
  local keep = ARGV[3 * i - 1]
  local not_before = tonumber(ARGV[3 * i])
  local kept = redis.call('GET', key)
  if (not kept) or (not_before > 0 and (tonumber(kept) or 0) < not_before) then
    redis.call('SET', key, ARGV[3 * i - 2], 'PX', keep)
  else
    redis.call('PEXPIRE', key, keep)
  end
  out[i] = redis.call('GET', key)
end
return out
`);

interface Sighting {
  resource: string;
  token: string;
  seenAt: number;
  keepMs: number;
  /** A record older than this is an earlier lock's and is replaced (0: none). */
  notBefore: number;
  /** Batches that carried it and failed (a command timeout on a busy node 0): it is sent again a few times. */
  failures: number;
}

/** A sighting whose batch failed is sent again this many times at most, this long after. */
const RETRIES = 4;
const RETRY_MS = 500;

/**
 * Shares when each foreign lock (one whose value carries no acquisition time) was first seen, so its age is
 * the same on every console and survives a restart. The first console to see a value records the time
 * (`SET NX`); every console reads it back and adopts it when it is earlier than its own; an extension renews
 * the record's expiry. Sightings are batched: every 10 ms, one script on node 0 runs SET NX + PEXPIRE + GET
 * for each foreign value acquired or extended since the last one (a pipeline of those commands where the node
 * refuses scripts). Costs one key per live foreign lock on node 0 (expiring with the lock plus 10 min). While
 * node 0 does not answer, each console keeps the time it saw itself. The locks found already held while the
 * console starts are shared after its first reconcile (`shareFound`), paced: until a lock's turn comes, the
 * console shows its own first sighting of it.
 */
export function shareFirstSeen(store: LockStore, node0: LockClient | undefined): { shareFound: () => void } {
  if (!node0) return { shareFound: () => {} };
  let queued = new Map<string, Sighting>();
  let timer: NodeJS.Timeout | null = null;
  let sending = false;
  let scriptsRefused = false;

  /** The recorded first sightings of a batch, in its order; on a cluster one hash slot at a time. */
  const record = (batch: ReadonlyArray<[string, Sighting]>): Promise<unknown[]> => {
    if (!isClusterClient(node0)) return recordIn(batch);
    const sightings = new Map(batch);
    return readInSlots(
      batch.map(([key]) => key),
      (keys) => recordIn(keys.map((key) => [key, sightings.get(key) as Sighting])),
    );
  };
  const recordIn = async (batch: ReadonlyArray<[string, Sighting]>): Promise<unknown[]> => {
    if (!scriptsRefused) {
      const args: Array<string | number> = [];
      for (const [, s] of batch) args.push(s.seenAt, s.keepMs, s.notBefore);
      try {
        const reply = await runScript(node0, SHARE_SCRIPT, batch.map(([key]) => key), args);
        return Array.isArray(reply) ? (reply as unknown[]) : [];
      } catch (error) {
        // EVAL disabled or not granted (some managed services): the same commands, pipelined.
        if (!isScriptRefused(error)) throw error;
        scriptsRefused = true;
      }
    }
    const pipeline = node0.pipeline();
    // (Without a script, a record an earlier lock left is overwritten outright: consoles may then differ by the
    // moments they saw the new lock.)
    for (const [key, s] of batch) {
      if (s.notBefore > 0) pipeline.set(key, String(s.seenAt), "PX", s.keepMs);
      else pipeline.set(key, String(s.seenAt), "PX", s.keepMs, "NX");
      pipeline.pexpire(key, s.keepMs).get(key);
    }
    const replies = (await pipeline.exec()) ?? [];
    return batch.map((_, i) => replies[3 * i + 2]?.[1]);
  };

  const flush = async (): Promise<void> => {
    timer = null;
    if (sending) return;
    sending = true;
    let batch: Array<[string, Sighting]> = [];
    let retry = false;
    try {
      // The locks already held when the console starts are found before its connection to node 0 is up.
      if (!(await whenReady(node0, READY_WAIT_MS))) {
        queued.clear();
        return;
      }
      while (queued.size > 0) {
        if (queued.size <= BATCH) {
          // All of it: the map itself goes (see `LockStore.changed`).
          batch = [...queued];
          queued = new Map();
        } else {
          batch = [];
          for (const entry of queued) {
            batch.push(entry);
            queued.delete(entry[0]);
            if (batch.length >= BATCH) break;
          }
        }
        const recorded = await record(batch);
        batch.forEach(([, s], i) => {
          const first = Number(recorded[i]);
          if (Number.isFinite(first) && first > 0) store.adoptFirstSeen(s.resource, s.token, first);
        });
      }
    } catch {
      // The batch failed (node 0 slow or gone): its sightings are sent again a little later, a few times; then
      // this console's own first sightings stand until the next extension asks again.
      for (const [key, s] of batch) if (s.failures < RETRIES && !queued.has(key)) queued.set(key, { ...s, failures: s.failures + 1 });
      retry = queued.size > 0;
    } finally {
      sending = false;
      if (queued.size > 0) timer ??= setTimeout(() => void flush(), retry ? RETRY_MS : FLUSH_MS);
    }
  };

  const queue = (resource: string, token: string, seenAt: number, ttlMs: number | null, notBefore = 0) => {
    const key = firstSeenKey(resource, token);
    const earlier = queued.get(key);
    queued.set(key, {
      resource,
      token,
      // (A sighting still queued of an earlier lock of the same value does not count.)
      seenAt: earlier && earlier.seenAt >= notBefore ? Math.min(earlier.seenAt, seenAt) : seenAt,
      keepMs: Math.ceil((ttlMs ?? WITHOUT_TTL_KEEP_MS) + MARGIN_MS),
      notBefore: Math.max(earlier?.notBefore ?? 0, notBefore),
      failures: earlier?.failures ?? 0,
    });
  };

  store.firstSeen = (resource, token, seenAt, ttlMs, notBefore) => {
    queue(resource, token, seenAt, ttlMs, notBefore);
    timer ??= setTimeout(() => void flush(), FLUSH_MS);
  };

  // The locks found while the console started: BACKFILL_BATCH at a time, each batch after the last one's
  // reply and a pause.
  let backfill: Iterator<{ resource: string; token: string; seenAt: number; ttlMs: number | null }> | null = null;
  const backfillStep = async (): Promise<void> => {
    if (!backfill || node0.status === "end") return;
    // Beside the sightings of the moment (a steady churn of foreign locks never leaves the queue empty), and
    // only while node 0 answers (a flush that finds it down drops what is queued).
    if (!sending && queued.size < BATCH && node0.status === "ready") {
      for (let n = 0; n < BACKFILL_BATCH; n++) {
        const next = backfill.next();
        if (next.done) {
          backfill = null;
          break;
        }
        queue(next.value.resource, next.value.token, next.value.seenAt, next.value.ttlMs);
      }
      await flush();
    }
    if (backfill) setTimeout(() => void backfillStep(), BACKFILL_PAUSE_MS).unref();
  };
  return {
    shareFound: () => {
      if (backfill) return;
      backfill = store.foreignHeld();
      void backfillStep();
    },
  };
}
