import "server-only";
import { createHash } from "node:crypto";
import path from "node:path";
import { setReplyDeadline } from "@lockscope/redlock";
import { isLabResource } from "@/lib/lab/keys";
import type { KeyReading } from "@/lib/locks/formats";
import { lockKeyFilter } from "@/lib/locks/formats/defaults";
import type { EndCause } from "@/lib/locks/merge";
import { restartRisk, uptimeMsAt } from "@/lib/locks/node-state";
import type { LiveStats, LockDetail, LockLoss, WatcherStatus } from "@/lib/locks/types";
import { clientLimitKey } from "@/lib/client-address";
import { clientIp, type Principal } from "../auth";
import { getConfig } from "../config";
import { singleton } from "../global";
import { shareFirstSeen } from "./first-seen";
import { healthContributors } from "../health";
import { endUnseenHolds, getHistorySink } from "../history/service";
import { getLogger } from "../logger";
import { getDeploymentNodes, quorumOf, type DeploymentNodes } from "../nodes";
import { getPatternStore } from "../patterns";
import { ClusterFailoverMonitor } from "../deployments/cluster";
import { EndpointFailoverMonitor, SentinelFailoverMonitor, type FailoverTarget, type ServerChange } from "../deployments/failover";
import { watchReplication } from "../deployments/replication";
import { onShutdown } from "../shutdown";
import { composeDeployments, lockDetail, sumCounts, type LiveView } from "./deployments";
import { getLiveEvents, type LiveEvents } from "./events";
import { LockGroups } from "./groups";
import { isSessionRevoked } from "../session-revocation";
import { HEARTBEAT_MS, SESSION_CHECK_MS, StreamHub, TICK_MS } from "./hub";
import { LossJournal } from "./losses-journal";
import { LockStore, type NodeSample } from "./store";
import type { StreamOwner } from "./stream-limits";
import { NodeWatcher, READ_BATCH } from "./watcher";

export { getLiveEvents } from "./events";
export { deploymentFilter, deploymentNames, historyDeployment, namedDeployment, resolveDeployment, type LiveView } from "./deployments";
export type { LiveEventMap, LiveEvents, LockEventType } from "./events";
export type { LockCounts } from "./store";

/**
 * Dirty keys are read as soon as a notification marks them, once the batch before has been applied and at
 * least `FLUSH_GAP_MS` after it started (every node's batch at once, so a Redlock write is one change): under
 * load the keys that come meanwhile make the next batch. `FLUSH_MS` is the backstop for keys marked otherwise.
 */
const FLUSH_GAP_MS = 1;
const FLUSH_MS = 10;
/** Keys a node that does not answer may owe before it owes a reconcile instead (see `owe`). */
const MAX_OWED_KEYS = 50_000;
/** History holds whose end no console saw: checked this long after the live view first read the nodes, then every `UNSEEN_CHECK_MS`. */
const UNSEEN_FIRST_CHECK_MS = 5 * 60_000;
const UNSEEN_CHECK_MS = 60 * 60_000;
/** Without notifications a node is rescanned this often. */
const DEGRADED_SCAN_MS = 2_000;
/** How often each node's `notify-keyspace-events` is read again (it can be switched off at runtime). */
export const NOTIFY_CHECK_MS = 5_000;
/** How often an idle node is pinged, so a frozen one is noticed when no lock changes. */
const PROBE_MS = 500;

/** One deployment's live view: its store (its node ids and quorum), watchers, failover monitor and timers. */
export interface DeploymentLive {
  deployment: string;
  store: LockStore;
  /** The console's stream hub (with several deployments, the one they share). */
  hub: StreamHub;
  groups: LockGroups;
  watchers: NodeWatcher[];
  isLockKey: (key: string) => boolean;
  stats: () => LiveStats;
  stop: () => Promise<void>;
  /** Ends the history's open holds of this deployment that its live view does not hold (see `endUnseenHolds`). */
  endUnseenHolds: () => Promise<number>;
}

/** Given where several deployments are watched: the hub they share, which the composition ticks itself. */
export interface SharedLive {
  hub: StreamHub;
  /** The deployment's own emitter, which tells the process-wide one with the deployment named. */
  events: LiveEvents;
}

/**
 * Starts the live view once per process (idempotent, kept on globalThis): per deployment, one watcher per
 * lock node, the batched reader and their timers; the stream hub. Every accessor below starts it on first
 * use, so a route works even where instrumentation did not run (tests).
 */
export function startLive(): LiveView {
  return singleton("live-runtime", () => composeDeployments(getDeploymentNodes(), startDeploymentLive));
}

/** The losses list kept in the data folder for every deployment (see `LossJournal`), written out at shutdown. */
function getLossJournal(): LossJournal {
  return singleton("loss-journal", () => {
    const journal = new LossJournal(path.resolve(getConfig().dataDir, "losses.jsonl"), (err) =>
      getLogger().warn({ err }, "could not keep the losses list in the data folder: a restarted console will not list the losses found before"),
    );
    onShutdown("loss-journal", 45, () => journal.flush());
    return journal;
  });
}

/**
 * One deployment's live view (idempotent per deployment). `shared` is null where it is the only deployment:
 * it then owns the stream hub and its timers, as a console of one deployment always did.
 */
export function startDeploymentLive(entry: DeploymentNodes, shared: SharedLive | null): DeploymentLive {
  return singleton(`live-runtime:${entry.deployment.name}`, () => {
    const config = getConfig();
    const log = getLogger().child({ part: "live", ...(shared ? { deployment: entry.deployment.name } : {}) });
    const guard = (what: string) => (error: unknown) => log.warn({ err: error instanceof Error ? error.message : String(error) }, `live view: ${what} failed`);
    const nodes = entry.nodes;
    const events = shared?.events ?? getLiveEvents();
    const store = new LockStore(
      nodes.map((n) => n.id),
      quorumOf(nodes.length),
      events,
    );
    store.deployment = entry.deployment.name;
    store.history = getHistorySink();
    const lossJournal = getLossJournal();
    store.restoreLosses(lossJournal.restore(entry.deployment.name));
    store.onLoss = (loss) => lossJournal.record(entry.deployment.name, loss);
    const firstSeen = shareFirstSeen(store, nodes[0]?.client);
    // The patterns in force: LOCK_PATTERNS, or what an operator set since (PUT /api/patterns), changed live.
    const patternStore = getPatternStore();
    let patterns: readonly string[] = patternStore.current().patterns.map((p) => p.glob);
    let matcher = lockKeyFilter(patterns);
    const isLockKey = (key: string) => matcher(key);
    store.declaredScope = (resource) => patternStore.declaredScope(resource);
    store.covers = isLockKey;
    // (Bound below, once the batched read exists.)
    let onDirty = () => {};
    let drained: (until: number) => Promise<void> = () => Promise.resolve();
    // (Bound below to the failover monitor of a Sentinel deployment or a standalone instance.)
    let onServerReplaced: (change: ServerChange) => void = () => {};
    const watchers: NodeWatcher[] = nodes.map(
      (node) =>
        new NodeWatcher(node, {
          store,
          patterns: () => patterns,
          isLockKey,
          events,
          log,
          timeoutMs: config.nodeTimeoutMs,
          deadlineMs: config.nodeTimeoutMs,
          peers: () => watchers,
          onDirty: () => onDirty(),
          drained: (until) => drained(until),
          onServerReplaced: (change) => onServerReplaced(change),
        }),
    );
    // A change's new patterns are first tried on these nodes (a pattern the console's Redis user may not watch is refused).
    const stopAccessCheck = patternStore.checkAccessWith((globs, until) => Promise.all(watchers.map((w) => w.tryPatterns(globs, until))));
    let patternChanges = 0;
    // The patterns before the first change whose reconciles have not all run (changes can follow one another
    // faster than a large keyspace is read).
    let coveredBefore: ((resource: string) => boolean) | null = null;
    const unsubscribePatterns = patternStore.onChange((state) => {
      patterns = state.patterns.map((p) => p.glob);
      coveredBefore ??= matcher;
      const before = coveredBefore;
      matcher = lockKeyFilter(patterns);
      const dropped = store.retain(isLockKey);
      log.info({ patterns, dropped }, "lock patterns changed: re-subscribing and reconciling every node");
      // The locks the reconciles find under the keys the changes brought in were held before them: so marked
      // until every node has read the keys under the patterns now in force (a reconcile already running when
      // they changed owes another; a node down reads them when it is back), for at most 10 minutes.
      const change = ++patternChanges;
      store.patternsWidened((resource) => !before(resource));
      const until = Date.now() + 600_000;
      void Promise.all(watchers.map((w) => w.resubscribe().catch(guard(`re-subscribe of ${w.id}`)))).then(async () => {
        while (change === patternChanges && Date.now() < until && !watchers.every((w) => w.reconciled)) await new Promise((resolve) => setTimeout(resolve, 500).unref());
        if (change !== patternChanges) return;
        coveredBefore = null;
        store.patternsWidened(null);
      });
    });
    const stats = (): LiveStats => {
      const now = Date.now();
      const counts = store.counts();
      const nodesUp = watchers.filter((w) => w.up && w.answering).length;
      const nodesNotAnswering = watchers.filter((w) => w.readable && !w.answering).length;
      const nodesWithoutNotifications = watchers.filter((w) => w.notifications === "unavailable").length;
      return {
        serverTime: now,
        held: counts.held,
        locks: counts.held + counts.byState.partial,
        acquisitionsPerSec: round1(store.acquisitions.sum(now, 5_000) / 5),
        contentionPerSec: round1(store.contention.total.sum(now, 5_000) / 5),
        expirationsPerSec: round1(store.expirations.sum(now, 5_000) / 5),
        nodesUp,
        nodesTotal: watchers.length,
        nodesNotAnswering,
        nodesWithoutNotifications,
        degraded: nodesUp < watchers.length || nodesWithoutNotifications > 0 || watchers.some((w) => w.partlyWatched),
      };
    };
    const timers: NodeJS.Timeout[] = [];
    /**
     * The live view's locks say which holds ended only once it has read every node (since its last connection) and
     * every key under the patterns: a lock on a node that is down, or not read yet, may be held still.
     */
    const unread = () => watchers.filter((w) => !w.status().up || w.partlyWatched).map((w) => w.id);
    const endUnseen = () => (unread().length > 0 ? Promise.resolve(0) : endUnseenHolds(store.deployment, (resource, token) => store.holdsAcquisition(resource, token)));
    /** History holds whose end no console saw are ended once the live view has read the nodes, and hourly. */
    const checkUnseenHolds = () => {
      const notRead = unread();
      if (notRead.length > 0) {
        log.info({ nodes: notRead }, "lock history: open holds not checked while these nodes are not read; next check in an hour");
        return;
      }
      endUnseen().then(
        (ended) => {
          if (ended > 0) log.info({ holds: ended }, "lock history: ended the holds whose end no console saw");
        },
        (error: unknown) => log.warn({ err: error instanceof Error ? error.message.slice(0, 200) : String(error) }, "lock history: checking open holds failed; retrying in an hour"),
      );
    };
    const groups = new LockGroups(store, config.metricsGroupPattern, (listener) => {
      store.onListed = listener;
    });
    const hub =
      shared?.hub ??
      new StreamHub(
        { store, groupOf: groups.groupOf, watcherStatus: () => watchers.map((w) => w.status()), stats },
        { limits: { perAddress: config.maxStreamsPerAddress, perCredential: config.maxStreamsPerToken }, sessionRevoked: isSessionRevoked },
      );
    for (const watcher of watchers) {
      watcher.onChange = () => {
        if (!store.watching && watchers.every((w) => w.settled)) {
          store.watching = true;
          firstSeen.shareFound();
          const first = setTimeout(checkUnseenHolds, UNSEEN_FIRST_CHECK_MS);
          first.unref();
          timers.push(first);
        }
        hub.sendNodes();
      };
    }
    // Sentinel deployments: failovers compared with the console's last view (locks lost in failover).
    // Clusters: a primary's slots served by its replica, compared the same way.
    const deployment = entry.deployment;
    const failoverTarget: FailoverTarget = {
      locks: (now) => store.list(now),
      noteLost: (lock, detail, seenAt) => store.noteLostInFailover(lock, detail, seenAt),
      noteSurvived: (resource, detail) => store.noteFailoverSurvived(resource, detail),
      forceReleased: () => store.forceReleased(),
      noteReleaseUndone: (resource, detail) => store.noteReleaseUndone(resource, detail),
    };
    const clustered = nodes.find((n) => n.cluster);
    // Standalone: its endpoint moved to another server (a managed service's primary endpoint, a virtual IP).
    const standalone = deployment?.kind === "standalone" ? nodes[0] : undefined;
    const failovers =
      deployment?.kind === "sentinel"
        ? new SentinelFailoverMonitor(deployment, failoverTarget, log, config.nodeTimeoutMs)
        : clustered?.cluster
          ? new ClusterFailoverMonitor(clustered.deployment, clustered.cluster, failoverTarget, log, config.nodeTimeoutMs)
          : standalone
            ? new EndpointFailoverMonitor(standalone.deployment, { label: standalone.maskedUrl, connect: standalone.connect }, failoverTarget, log, config.nodeTimeoutMs)
            : null;
    // A watcher that reached the promoted replica before the sentinels announced the failover: compared then.
    if (failovers instanceof SentinelFailoverMonitor) onServerReplaced = (change) => failovers.primaryReached(change);
    else if (failovers instanceof EndpointFailoverMonitor) onServerReplaced = (change) => failovers.serverReplaced(change);
    // A node that is a replica now (demoted by a failover, or named so by its URL): its pill in the header says so.
    const stopReplication = watchReplication(nodes, (nodeId, readOnly) => {
      const w = watchers.find((x) => x.id === nodeId);
      if (!w) return;
      w.readOnly = readOnly;
      hub.sendNodes();
    });
    store.onProbe = (resources) => {
      // (A cause a notification already gave for the key stays.)
      for (const w of watchers) if (w.readable) for (const r of resources) w.dirty.set(r, w.dirty.get(r) ?? null);
    };

    /** Applies one node's (or several nodes') readings of `list`, merged per key. */
    const applyReadings = (list: readonly string[], keys: Map<string, Array<EndCause | undefined>>, answered: Array<{ w: NodeWatcher; readings: Array<KeyReading | null | undefined> }>) => {
      const now = Date.now();
      for (let k = 0; k < list.length; k++) {
        const key = list[k] as string;
        const causes = keys.get(key);
        // Made at its size (every change of every lock comes here: an array grown by push starts at 16 places).
        let count = 0;
        for (const { readings } of answered) if (readings[k] !== undefined) count += 1;
        if (count === 0) continue;
        const samples = new Array<NodeSample>(count);
        let i = 0;
        for (const { w, readings } of answered) {
          const reading = readings[k];
          if (reading !== undefined) samples[i++] = w.sampleOf(reading, causes?.[w.index] ?? null, now);
        }
        store.apply(key, samples, now);
      }
    };
    /** Keeps what `w` owes us for a later round (its read failed, or it was left out while busy). */
    const owe = (w: NodeWatcher, keys: Map<string, Array<EndCause | undefined>>) => {
      if (!w.readable) return;
      // A node that does not answer for long (frozen, a hung host with its connection open) would owe every key
      // changed meanwhile: past the cap, it owes a reconcile instead (read once it answers again).
      if (w.dirty.size + keys.size > MAX_OWED_KEYS) {
        w.oweReconcile();
        return;
      }
      for (const [key, causes] of keys) if (!w.dirty.has(key) || causes[w.index]) w.dirty.set(key, causes[w.index] ?? w.dirty.get(key) ?? null);
    };

    /**
     * Whether a batch reads `w` now. While the console starts, a node is read only once its watcher has
     * subscribed: a reading taken before would count as read there (its SCAN then skips the key) and could miss
     * a change made before the subscription. Its keys stay dirty until then.
     */
    const readableNow = (w: NodeWatcher) => w.readable && !w.busy && (store.watching ? w.readInBatches : w.subscribedForReads);
    let flushing = false;
    /** Batches read so far (see `drained`). */
    let flushesDone = 0;
    let stopped = false;
    let flushStartedAt = 0;
    let flushTimer: NodeJS.Timeout | null = null;
    /** Reads what is dirty as soon as the batch before allows (see `FLUSH_GAP_MS`). */
    const flushSoon = () => {
      if (flushTimer !== null || flushing || stopped) return;
      flushTimer = setTimeout(
        () => {
          flushTimer = null;
          void flush().catch(guard("batched read"));
        },
        Math.max(0, flushStartedAt + FLUSH_GAP_MS - Date.now()),
      );
      flushTimer.unref();
    };
    onDirty = flushSoon;
    drained = async (until) => {
      // The keys dirty now are read by as many batches as they fill (a batch takes the oldest first), after the one
      // running: changes that keep coming after this call are not waited for.
      const backlog = watchers.reduce((n, w) => n + (readableNow(w) ? w.dirty.size : 0), 0);
      const enough = flushesDone + Math.ceil(backlog / (READ_BATCH * 2)) + (flushing ? 1 : 0);
      while (Date.now() < until && !stopped && (flushing || flushesDone < enough)) {
        if (!flushing && !watchers.some((w) => w.dirty.size > 0 && readableNow(w))) return;
        flushSoon();
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };
    const flush = async () => {
      if (flushing) return;
      if (flushTimer !== null) {
        clearTimeout(flushTimer);
        flushTimer = null;
      }
      const keys = new Map<string, Array<EndCause | undefined>>();
      const targets = watchers.filter(readableNow);
      for (const w of targets) {
        const dirty = w.dirty;
        // All of it fits: the map itself is taken, and a fresh one collects what comes next (see
        // `LockStore.changed`).
        const whole = keys.size + dirty.size <= READ_BATCH * 2;
        if (whole) w.dirty = new Map();
        for (const [key, cause] of dirty) {
          if (!whole && keys.size >= READ_BATCH * 2 && !keys.has(key)) break;
          if (!whole) dirty.delete(key);
          let causes = keys.get(key);
          if (!causes) {
            // (At its size: an empty array given its third place first grows to 17.)
            causes = new Array<EndCause | undefined>(watchers.length);
            keys.set(key, causes);
          }
          causes[w.index] = cause;
        }
      }
      if (keys.size === 0) return;
      // A node still busy with an earlier batch reads these keys once it answers again.
      for (const w of watchers) if (w.busy) owe(w, keys);
      flushing = true;
      flushStartedAt = Date.now();
      // A read that failed (a node refusing it, a key that fails the script there) is owed again: the next
      // try waits for the 10 ms interval rather than coming back at once.
      let failed = false;
      try {
        const list = [...keys.keys()];
        // Every node's batch at once, so a write to every node is one change; but a node that misses the
        // per-node deadline (frozen, overloaded) does not hold the others back: its readings are applied
        // on their own when they come, and until then it is left out of later batches.
        const answered: Array<{ w: NodeWatcher; readings: Array<KeyReading | null | undefined> }> = [];
        const settled = new Set<NodeWatcher>();
        let onTime = true;
        const reads = targets.map((w) =>
          w.readDirty(list).then(
            (readings) => {
              if (onTime) {
                settled.add(w);
                answered.push({ w, readings });
              } else {
                // (Whatever happens to these readings, the node is read again from the next batch on.)
                try {
                  applyReadings(list, keys, [{ w, readings }]);
                } finally {
                  w.busy = false;
                }
              }
            },
            () => {
              settled.add(w);
              w.busy = false;
              failed = true;
              owe(w, keys);
            },
          ),
        );
        let cancelDeadline: (() => void) | undefined;
        // At the deadline, replies already in the sockets are read first: a stall of this console's own loop must
        // not make an answering node look late.
        await Promise.race([Promise.all(reads), new Promise<void>((resolve) => (cancelDeadline = setReplyDeadline(resolve, config.nodeTimeoutMs)))]);
        cancelDeadline?.();
        onTime = false;
        for (const w of targets) {
          if (!settled.has(w)) {
            w.busy = true;
            w.checkAnswering();
          }
        }
        applyReadings(list, keys, answered);
        // What the batch changed goes out now, not at the next tick.
        hub.tick(Date.now());
      } finally {
        flushing = false;
        flushesDone += 1;
      }
      // What came meanwhile makes the next batch.
      if (failed) return;
      if (watchers.some((w) => w.dirty.size > 0 && readableNow(w))) flushSoon();
    };

    const every = (ms: number, fn: () => void) => {
      const timer = setInterval(fn, ms);
      timer.unref();
      timers.push(timer);
    };
    every(FLUSH_MS, () => {
      const now = Date.now();
      for (const w of watchers) w.stampEvents(now);
      void flush().catch(guard("batched read"));
    });
    every(TICK_MS, () => {
      const now = Date.now();
      store.tick(now);
      // (A shared hub is ticked once for every deployment, by the composition.)
      if (!shared) hub.tick(now);
    });
    every(UNSEEN_CHECK_MS, checkUnseenHolds);
    every(1_000, () => {
      store.sweepContention();
      if (!shared) hub.sendStats();
    });
    if (!shared) every(HEARTBEAT_MS, () => hub.heartbeat());
    if (!shared) every(SESSION_CHECK_MS, () => void hub.checkSessions().catch(guard("session check of the streams")));
    every(PROBE_MS, () => {
      const now = Date.now();
      for (const w of watchers) {
        w.checkAnswering(now);
        w.probe();
        w.checkSubscriber(now);
      }
    });
    every(NOTIFY_CHECK_MS, () => {
      for (const w of watchers) void w.recheckNotifications().catch(guard(`notification check of ${w.id}`));
    });
    if (!shared) every(5_000, () => hub.sendNodes());
    let factRound = 0;
    const refreshFacts = () => {
      const withInfo = factRound++ % 6 === 0;
      for (const w of watchers) void w.refreshFacts(withInfo);
    };
    every(5_000, refreshFacts);
    setTimeout(refreshFacts, 500).unref();
    const scanning = new Set<NodeWatcher>();
    every(DEGRADED_SCAN_MS, () => {
      for (const w of watchers) {
        if (w.notifications !== "unavailable" || !w.up || scanning.has(w)) continue;
        scanning.add(w);
        void w
          .reconcile({ periodic: true })
          .catch(guard(`periodic scan of ${w.id}`))
          .finally(() => scanning.delete(w));
      }
    });

    healthContributors().set(`live:${entry.deployment.name}`, (nodeId, deploymentName) => {
      if (deploymentName !== entry.deployment.name) return {};
      const w = watchers.find((x) => x.id === nodeId);
      if (!w) return {};
      const now = Date.now();
      const uptimeMs = uptimeMsAt(w.run, now);
      const answering = w.answering;
      const refusedPatterns = w.refusedRules();
      return {
        // A connected node that keeps commands waiting is not up, whatever its connection says.
        ...(answering ? {} : { up: false, latencyMs: null }),
        answering,
        notifications: w.notifications,
        watcher: { up: w.up && answering, answering, lastEventAt: w.lastEventAt, lastEventAgeMs: w.lastEventAt === null ? null : now - w.lastEventAt, reconnects: w.reconnects, gaps: w.gaps },
        keyNamesNotText: w.keyNamesNotText,
        persistence: { appendonly: w.facts.appendonly, save: w.facts.save },
        // Counted on from the last reading while the node can be read; unknown while it cannot (killed, or away: it
        // may be running or not, and comes back with its own uptime).
        uptimeSec: uptimeMs === null || !w.readable || !answering ? null : Math.floor(uptimeMs / 1000),
        // Unknown (null) until the node was read: a node never reached has no longest TTL and no hazard to tell.
        longestTtlMs: w.ttlsRead ? w.longestTtlMs : null,
        // (A restart not witnessed left the node empty of what it held: the longest TTL is the other nodes'.)
        restartRisk:
          uptimeMs === null || !w.ttlsRead
            ? null
            : restartRisk(w.run, w.facts.appendonly === "yes", w.run.restartedAt === null ? Math.max(...watchers.map((x) => x.longestTtlMs)) : w.longestTtlMs, now, store.oldestLockAt()),
        restartedAt: w.run.restartedAt,
        clockSkewMs: w.facts.skewMs,
        ...(refusedPatterns ? { refusedPatterns } : {}),
        ...(w.unservedSlots.length > 0 ? { unservedSlots: w.unservedSlots } : {}),
        degraded: w.notifications === "unavailable" || !answering || (!w.up && w.readable) || w.partlyWatched,
      };
    });

    const stop = async () => {
      stopped = true;
      unsubscribePatterns();
      stopAccessCheck();
      for (const t of timers) clearInterval(t);
      if (flushTimer !== null) clearTimeout(flushTimer);
      stopReplication();
      await Promise.allSettled([...watchers.map((w) => w.stop()), failovers?.stop()]);
    };
    if (!shared) onShutdown("live-streams", 10, () => hub.closeAll("shutdown"));
    onShutdown(`live-watchers:${entry.deployment.name}`, 40, stop);
    return { deployment: entry.deployment.name, store, hub, groups, watchers, isLockKey, stats, stop, endUnseenHolds: endUnseen };
  });
}

const round1 = (n: number) => Math.round(n * 10) / 10;

export interface LockStoreView {
  list: LockStore["list"];
  summaries: LockStore["summaries"];
  /** A lock with its timeline on the deployment named (else the one it resolves to: see `resolveDeployment`). */
  get: (resource: string, now?: number, deployment?: string) => LockDetail | null;
  serverTime: () => number;
  counts: LockStore["counts"];
}

/** The merged locks of every deployment, for routes and metrics. */
export function getLockStore(): LockStoreView {
  const view = startLive();
  return {
    list: (now) => view.runtimes.flatMap((r) => r.store.list(now)),
    summaries: (visit, now) => {
      for (const r of view.runtimes) r.store.summaries(visit, now);
    },
    get: (resource, now, deployment) => lockDetail(view, resource, deployment, now),
    serverTime: () => Date.now(),
    counts: () => (view.multi ? sumCounts(view.runtimes.map((r) => r.store.counts())) : (view.runtimes[0] as DeploymentLive).store.counts()),
  };
}

/**
 * The locks nodes lost while their TTL ran (restarts, failovers) in the last 24 hours, newest first, as
 * `GET /api/losses` lists them: the contention lab's own locks, which its faults lose on purpose, left out.
 * `deployment`: that deployment's only.
 */
export function getLosses(deployment?: string, now = Date.now()): LockLoss[] {
  const all = startLive()
    .runtimes.filter((r) => deployment === undefined || r.deployment === deployment)
    .flatMap((r) => r.store.losses(r.deployment, now).filter((loss) => !isLabResource(loss.resource)));
  return all.sort((a, b) => b.at - a.at);
}

/**
 * The nodes whose readings the live view does not have now (watcher not up: not yet read, down, refusing its
 * reads, not answering), of `deployment` or of all; where several deployments are watched each is named
 * `<deployment>/<node>`. `of`: how many nodes were asked about. A lock absent from the store may be held on these.
 */
export function unreadNodes(deployment?: string): { unread: string[]; of: number } {
  const view = startLive();
  const runtimes = view.runtimes.filter((r) => deployment === undefined || r.deployment === deployment);
  const unread = runtimes.flatMap((r) => r.watchers.filter((w) => !w.status().up).map((w) => (view.multi ? `${r.deployment}/${w.id}` : w.id)));
  return { unread, of: runtimes.reduce((n, r) => n + r.watchers.length, 0) };
}

/** Each deployment's live view (one where the console watches one). */
export function getDeploymentLives(): readonly DeploymentLive[] {
  return startLive().runtimes;
}

/**
 * `GET /api/locks` as a streamed JSON body, built 500 locks at a time as the client reads: 100,000 locks
 * never sit in memory as one string or one array of objects. `deployment`: that deployment's locks only.
 */
export function locksJsonStream(options: { state?: string; limit?: number; deployment?: string } = {}): ReadableStream<Uint8Array> {
  const view = startLive();
  const serverTime = Date.now();
  // One segment per deployment listed, each its store's resources (nothing allocated per lock beyond them).
  const segments: Array<{ store: LockStore; resources: string[] }> = [];
  let total = 0;
  let room = options.limit ?? Infinity;
  for (const { store, deployment } of view.runtimes) {
    if (options.deployment !== undefined && deployment !== options.deployment) continue;
    let resources = store.resources();
    if (options.state) resources = resources.filter((r) => store.lock(r, serverTime)?.state === options.state);
    total += resources.length;
    if (resources.length > room) resources = resources.slice(0, room);
    room -= resources.length;
    segments.push({ store, resources });
  }
  const encoder = new TextEncoder();
  let segment = 0;
  let pos = 0;
  let first = true;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        controller.enqueue(encoder.encode(`{"serverTime":${serverTime},"nodes":${JSON.stringify(view.watcherStatus())},"total":${total},"locks":[`));
      },
      pull(controller) {
        const parts: string[] = [];
        const now = Date.now();
        // Until something is written or every segment is done: a pull that writes nothing is not called again.
        for (let current = segments[segment]; current && parts.length === 0; current = segments[segment]) {
          for (const resource of current.resources.slice(pos, pos + 500)) {
            const lock = current.store.lock(resource, now);
            if (lock) parts.push(JSON.stringify(lock));
          }
          pos += 500;
          if (pos >= current.resources.length) {
            segment += 1;
            pos = 0;
          }
        }
        if (parts.length > 0) {
          controller.enqueue(encoder.encode(`${first ? "" : ","}${parts.join(",")}`));
          first = false;
        }
        if (segment >= segments.length) {
          controller.enqueue(encoder.encode("]}"));
          controller.close();
        }
      },
    },
    { highWaterMark: 256 * 1024, size: (chunk) => chunk.byteLength },
  );
}

/**
 * Who opens a stream, for the per-address and per-token limits: the client address, and a fingerprint (never
 * the secret itself) of the bearer token or session cookie that signed it in; null for open reading.
 */
export function streamOwner(headers: Headers, principal: Principal | null): StreamOwner {
  // An IPv6 client counts by its /64 (see `clientLimitKey`).
  const address = clientLimitKey(clientIp(headers));
  let secret: string | null = null;
  if (principal?.via === "bearer") secret = /^Bearer\s+(.+)$/i.exec(headers.get("authorization") ?? "")?.[1] ?? null;
  // The session that signed the request in, by its id: of two session cookies sent, not merely the first.
  else if (principal?.via === "session") secret = principal.session ? `session:${principal.session.id}` : null;
  return { address, credential: secret === null ? null : createHash("sha256").update(secret).digest("base64url").slice(0, 22), session: principal?.session ?? null };
}

/** The grouped view and the server-paged lock list (across deployments where several are watched). */
export function getLockGroups(): LockGroups {
  return startLive().groups;
}

export function getStreamHub(): StreamHub {
  return startLive().hub;
}

export function isLockKey(key: string): boolean {
  // The lock patterns are the console's, the same for every deployment.
  return (startLive().runtimes[0] as DeploymentLive).isLockKey(key);
}

/** Every node's watcher; where several deployments are watched, each names its deployment. */
export function getWatcherStatus(): WatcherStatus[] {
  return startLive().watcherStatus();
}

/** Each node's keyspace notifications so far, by event name (totals since start, for the metrics); each names its deployment. */
export function getKeyspaceEventCounts(): Array<{ deployment: string; nodeId: string; counts: ReadonlyMap<string, number> }> {
  return startLive().runtimes.flatMap((r) => r.watchers.map((w) => ({ deployment: r.deployment, nodeId: w.id, counts: w.keyspaceEvents })));
}

/** True once every reachable node's watcher (of every deployment) has subscribed and reconciled; false after `timeoutMs`. */
export async function waitUntilReconciled(timeoutMs: number): Promise<boolean> {
  const watchers = startLive().runtimes.flatMap((r) => r.watchers);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (watchers.every((w) => w.settled)) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Records a force release on `deployment` (default: the first) so the lock ends as `force-released` (the
 * revocation message does the same on every console).
 */
export function noteForceRelease(resource: string, info: { value?: string | null; actor?: string | null; reason?: string | null } = {}, deployment?: string): void {
  storeOf(deployment)?.noteForceRelease(resource, info);
}

/** Takes back a force release noted before it ran (see `noteForceRelease`) that released nothing after all. */
export function withdrawForceRelease(resource: string, deployment?: string): void {
  storeOf(deployment)?.withdrawForceRelease(resource);
}

/** The lock store of `deployment` (default: the first). */
function storeOf(deployment: string | undefined): LockStore | undefined {
  const view = startLive();
  return (deployment === undefined ? view.runtimes[0] : view.runtime(deployment))?.store;
}
