import "server-only";
import { getConfig } from "../config";
import { ApiError } from "../errors";
import { singleton } from "../global";
import { getLogger } from "../logger";
import { counter, gauge } from "../metrics";
import { databaseErrorText, readFailure } from "../postgres/errors";
import { getDatabase } from "../postgres/pool";
import { onShutdown } from "../shutdown";
import { PostgresHistory } from "./postgres";
import { HistoryRecorder, MAX_RECORDED_KEY_BYTES, type HistorySink } from "./recorder";
import type { EventsAnswer, HoldsAnswer } from "@/lib/history/types";
import type { HeldAtOptions, HistoryFilters, HistoryStore } from "./types";

const PRUNE_EVERY_MS = 60 * 60_000;
/** How long the shutdown waits for queued events to be written before it says how many were not. */
const CLOSE_WAIT_MS = 2_000;

interface History {
  store: HistoryStore;
  recorder: HistoryRecorder;
}

const events = () => counter("lockscope_history_events_total", "Lock history events by what became of them (written to the database, or dropped and why).", ["outcome"]);
const writeFailures = () => counter("lockscope_history_write_failures_total", "Lock history writes the database failed (each batch is retried; see lockscope_history_events_total for what was dropped).");

/** Lock history, when AUDIT_DATABASE_URL is set; null otherwise (the live view's memory is all there is). */
export function getHistory(): History | null {
  const db = getDatabase();
  if (!db) return null;
  return singleton("lock-history", () => {
    const store = new PostgresHistory(db);
    const log = getLogger();
    let lastErrorLogAt = 0;
    const queued = () => gauge("lockscope_history_queue_events", "Lock history events waiting to be written to the database.");
    // Every outcome's series exists from the start, so the first drop is an increase `rate()` and alerts see.
    for (const outcome of ["written", "dropped_queue_full", "dropped_write_failed", "dropped_key_too_long"]) events().inc({ outcome }, 0);
    writeFailures().inc(0);
    let lastTooLongLogAt = 0;
    queued().set(0);
    const recorder = new HistoryRecorder(store, {
      onWritten: (n) => {
        events().inc({ outcome: "written" }, n);
        queued().set(recorder.pending);
      },
      onDrop: (n, why, resource) => {
        events().inc({ outcome: why === "queue-full" ? "dropped_queue_full" : why === "key-too-long" ? "dropped_key_too_long" : "dropped_write_failed" }, n);
        queued().set(recorder.pending);
        // At most one line a minute: the counter says how many.
        if (why !== "key-too-long" || Date.now() - lastTooLongLogAt < 60_000) return;
        lastTooLongLogAt = Date.now();
        log.warn({ key: `${(resource ?? "").slice(0, 120)}…`, bytes: Buffer.byteLength(resource ?? "") }, `lock history skips a key longer than ${MAX_RECORDED_KEY_BYTES.toLocaleString("en-US")} bytes (the database cannot index it)`);
      },
      onError: (error) => {
        writeFailures().inc();
        // (The backlog grows while the database is down: the gauge follows every failed write too.)
        queued().set(recorder.pending);
        // At most one line a minute while the database is down: the counter says how much was lost.
        if (Date.now() - lastErrorLogAt < 60_000) return;
        lastErrorLogAt = Date.now();
        log.warn({ database: db.display, err: databaseErrorText(error) }, "lock history write failed; retrying");
      },
    });
    const config = getConfig();
    const days = config.historyRetentionDays;
    const watched = config.deployments?.map((d) => d.name) ?? (config.redisUrls ? ["default"] : []);
    const prune = () => {
      store.prune(Date.now() - days * 86_400_000).catch((error: unknown) => {
        log.warn({ database: db.display, err: databaseErrorText(error) }, "lock history retention failed; retrying in an hour");
      });
      keepWatched(watched).then(
        (ended) => {
          if (ended > 0) log.info({ holds: ended }, "lock history: ended the open holds of deployments no console has watched for a day");
        },
        (error: unknown) => log.warn({ database: db.display, err: databaseErrorText(error) }, "lock history: noting the deployments watched failed; retrying in an hour"),
      );
    };
    const timer = setInterval(prune, PRUNE_EVERY_MS);
    timer.unref();
    setTimeout(prune, 10_000).unref();
    // After the live view's watchers (40): until they stop, the locks they see end are recorded too.
    onShutdown("history", 42, async () => {
      clearInterval(timer);
      // Within the launcher's share of the shutdown for one step (3 s at most), so the count below is logged.
      await recorder.close(CLOSE_WAIT_MS);
      // Events still queued die with the process: say how many, since no counter outlives it.
      if (recorder.pending > 0) {
        log.warn({ database: db.display, events: recorder.pending }, "lock history events were not written before shutdown: the database did not take them");
      }
    });
    return { store, recorder };
  });
}

/**
 * Runs the migrations at start, so a wrong URL or a missing permission shows in the log at once (the
 * password masked); the console starts anyway, and the audit refuses releases until the database answers.
 */
export function startAuditDatabase(): void {
  const db = getDatabase();
  if (!db) return;
  getHistory();
  // However long the upgrade takes (a release or a history write meanwhile waits for it no longer than for a query).
  db.ready(0).then(
    () => getLogger().info({ database: db.display }, "audit database ready"),
    (error: unknown) =>
      getLogger().error(
        { database: db.display, err: error instanceof Error ? error.message.slice(0, 300) : String(error) },
        "audit database not ready; force releases are refused until it answers",
      ),
  );
}

/** Holds acquired this recently are left to their own end event (it may still be on its way from another console). */
const UNSEEN_GRACE_MS = 60_000;
const OPEN_HOLDS_PAGE = 1_000;

/**
 * Ends the deployment's open holds whose lock the live view does not hold with that value, as `unseen` at the
 * time of the check: their end came while no console watched (the console restarted, or the end event was
 * dropped while the database was down). This console's queued events are written first; holds acquired
 * within the last minute are left alone. Returns how many were ended (0 without a database).
 */
export async function endUnseenHolds(deployment: string, holds: (resource: string, token: string) => boolean, now = Date.now()): Promise<number> {
  const history = getHistory();
  if (!history) return 0;
  // An end still queued (the database was down, and may be back by the next query) must not be taken for one
  // nobody saw: with the queue not written, the check waits for its next turn.
  if (!(await history.recorder.flush())) throw new Error("this console's queued history events could not be written first");
  let ended = 0;
  let after: string | null = null;
  for (;;) {
    const page = await history.store.openHolds({ deployment, acquiredBefore: now - UNSEEN_GRACE_MS, after, limit: OPEN_HOLDS_PAGE });
    const unseen = page.filter((h) => !holds(h.resource, h.token));
    if (unseen.length > 0) {
      // A lock that ended since the queue was written (while its hold was read) is not held now, and its end is
      // queued: written first, it ends its hold as it happened, and the hold is no longer open to end as unseen.
      if (!(await history.recorder.flush())) throw new Error("this console's queued history events could not be written first");
      ended += await history.store.endUnseen(deployment, unseen, Date.now());
    }
    const last = page.at(-1);
    if (page.length < OPEN_HOLDS_PAGE || !last) return ended;
    after = last.resource;
    // The live view goes on between pages (a million open holds are a thousand pages).
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/**
 * A deployment no console has watched for this long is taken to be gone from every console's configuration (or
 * renamed): longer than a console is down for an upgrade or a night's outage.
 */
const UNWATCHED_AFTER_MS = 24 * 60 * 60_000;

/**
 * Notes that this console watches `deployments` (all of its own, at once: one not noted yet may be one whose last
 * mark is old), then ends the open holds of every deployment no console has watched for a day as `unwatched`, at
 * when it was last watched: no console will see their end. Returns how many were ended (0 without a database).
 */
export async function keepWatched(deployments: readonly string[], now = Date.now()): Promise<number> {
  const history = getHistory();
  if (!history) return 0;
  await history.store.markWatched(deployments, now);
  return history.store.endUnwatched(now - UNWATCHED_AFTER_MS, now);
}

/**
 * A lock key the history never records (see `MAX_RECORDED_KEY_BYTES`): asked about, the answer says so (422), not
 * an empty history as if its events were still to come. Without a database the routes' `recording: false` says enough.
 */
export function checkRecordedKey(resource: string | undefined): void {
  if (resource === undefined || getDatabase() === null) return;
  const bytes = Buffer.byteLength(resource);
  if (bytes <= MAX_RECORDED_KEY_BYTES) return;
  throw new ApiError(
    "unprocessable",
    `Lock history is not recorded for a key longer than ${MAX_RECORDED_KEY_BYTES.toLocaleString("en-US")} bytes (this one has ${bytes.toLocaleString("en-US")}): the database cannot index it. The live view still shows the lock.`,
  );
}

/** Whether lock history is recorded (AUDIT_DATABASE_URL is set). */
export function historyRecorded(): boolean {
  return getDatabase() !== null;
}

/** The sink the live view feeds, or null when history is not recorded. */
export function getHistorySink(): HistorySink | null {
  return getHistory()?.recorder ?? null;
}

function unavailable(error: unknown): never {
  const db = getDatabase();
  getLogger().warn({ database: db?.display, err: databaseErrorText(error) }, "lock history read failed");
  throw new ApiError("unavailable", `Lock history cannot be read: the database (${db?.display ?? "unset"}) ${readFailure(error)}.`);
}

/** The routes add the deployments the console watches. */
type Answer<T> = Omit<T, "deployments">;

export async function historyEvents(options: { limit: number; before?: string; filters: HistoryFilters }): Promise<Answer<EventsAnswer>> {
  const history = getHistory();
  if (!history) return { events: [], next: null, recording: false };
  try {
    return { ...(await history.store.events(options)), recording: true };
  } catch (error) {
    return unavailable(error);
  }
}

export async function historyHeldAt(options: HeldAtOptions): Promise<Answer<HoldsAnswer>> {
  const history = getHistory();
  if (!history) return { at: options.at, holds: [], next: null, recording: false };
  try {
    return { at: options.at, ...(await history.store.heldAt(options)), recording: true };
  } catch (error) {
    return unavailable(error);
  }
}
