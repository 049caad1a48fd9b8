import "server-only";
import { EventEmitter } from "node:events";
import type { LockSummary } from "@/lib/locks/groups";
import type { LiveStats, Lock, LockDetail, WatcherStatus } from "@/lib/locks/types";
import { getConfig } from "../config";
import { ApiError } from "../errors";
import type { DeploymentNodes } from "../nodes";
import { isSessionRevoked } from "../session-revocation";
import { onShutdown } from "../shutdown";
import { getLiveEvents, type LiveEventMap, type LiveEvents } from "./events";
import { LockGroups, type GroupSource } from "./groups";
import { HEARTBEAT_MS, SESSION_CHECK_MS, StreamHub, TICK_MS, type HubStore } from "./hub";
import type { DeploymentLive, SharedLive } from "./index";
import type { LockCounts, WantedLocks } from "./store";

/**
 * The live view of every deployment the console watches. With one deployment it is that deployment's
 * runtime as it always was (its own hub and grouped view, nothing in between). With several, each keeps its
 * own runtime (store with its node ids and quorum, watchers, failover monitor, timers) and this composes them:
 * one stream hub and one grouped view read across their stores, and every lock, removal and contention figure
 * names its deployment. A lock is (deployment, resource): the same resource on two deployments is two locks.
 */
export interface LiveView {
  /** In the configuration's order. */
  readonly runtimes: readonly DeploymentLive[];
  /** More than one deployment is watched. */
  readonly multi: boolean;
  readonly hub: StreamHub;
  readonly groups: LockGroups;
  runtime(deployment: string): DeploymentLive | undefined;
  /** Every node's watcher; with several deployments each names its deployment (node ids repeat across them). */
  watcherStatus(): WatcherStatus[];
  stats(): LiveStats;
}

type Start = (entry: DeploymentNodes, shared: SharedLive | null) => DeploymentLive;

export function composeDeployments(entries: readonly DeploymentNodes[], start: Start): LiveView {
  if (entries.length === 1) {
    const only = start(entries[0] as DeploymentNodes, null);
    return {
      runtimes: [only],
      multi: false,
      hub: only.hub,
      groups: only.groups,
      runtime: (name) => (name === only.deployment ? only : undefined),
      watcherStatus: () => only.watchers.map((w) => w.status()),
      stats: () => only.stats(),
    };
  }
  const config = getConfig();
  const runtimes: DeploymentLive[] = [];
  const locks = new ComposedLocks(runtimes);
  const groups = new LockGroups(locks, config.metricsGroupPattern);
  const watcherStatus = () => runtimes.flatMap((r) => r.watchers.map((w): WatcherStatus => ({ ...w.status(), deployment: r.deployment })));
  const stats = () => sumStats(runtimes.map((r) => r.stats()));
  const hub = new StreamHub(
    { store: locks, snapshotKeys: (group, deployment) => locks.keys(group, deployment, groups.groupOf), groupOf: groups.groupOf, watcherStatus, stats },
    { limits: { perAddress: config.maxStreamsPerAddress, perCredential: config.maxStreamsPerToken }, sessionRevoked: isSessionRevoked },
  );
  const events = getLiveEvents();
  for (const entry of entries) runtimes.push(start(entry, { hub, events: namedEvents(entry.deployment.name, events) }));

  // The shared hub's timers, once for every deployment (each runtime ticks its own store).
  const timers = [
    setInterval(() => hub.tick(Date.now()), TICK_MS),
    setInterval(() => hub.sendStats(), 1_000),
    setInterval(() => hub.heartbeat(), HEARTBEAT_MS),
    setInterval(() => void hub.checkSessions().catch(() => undefined), SESSION_CHECK_MS),
    setInterval(() => hub.sendNodes(), 5_000),
  ];
  for (const t of timers) t.unref();
  onShutdown("live-streams", 10, () => {
    for (const t of timers) clearInterval(t);
    hub.closeAll("shutdown");
  });
  return {
    runtimes,
    multi: true,
    hub,
    groups,
    runtime: (name) => runtimes.find((r) => r.deployment === name),
    watcherStatus,
    stats,
  };
}

/**
 * A deployment's own emitter of live events: each is told again on the process-wide emitter with the
 * deployment named, so the metrics can label it (node ids repeat across deployments).
 */
function namedEvents(deployment: string, to: LiveEvents): LiveEvents {
  const own: LiveEvents = new EventEmitter<LiveEventMap>();
  own.on("lock-event", (e) => to.emit("lock-event", { ...e, deployment }));
  own.on("reconnect", (e) => to.emit("reconnect", { ...e, deployment }));
  own.on("gap", (e) => to.emit("gap", { ...e, deployment }));
  own.on("lost-in-restart", (e) => to.emit("lost-in-restart", { ...e, deployment }));
  own.on("contention", (e) => to.emit("contention", { ...e, deployment }));
  own.on("restart-hazard", (e) => to.emit("restart-hazard", { ...e, deployment }));
  return own;
}

function sumStats(all: readonly LiveStats[]): LiveStats {
  const sum = (pick: (s: LiveStats) => number) => all.reduce((n, s) => n + pick(s), 0);
  const round1 = (n: number) => Math.round(n * 10) / 10;
  return {
    serverTime: Date.now(),
    held: sum((s) => s.held),
    locks: sum((s) => s.locks),
    acquisitionsPerSec: round1(sum((s) => s.acquisitionsPerSec)),
    contentionPerSec: round1(sum((s) => s.contentionPerSec)),
    expirationsPerSec: round1(sum((s) => s.expirationsPerSec)),
    nodesUp: sum((s) => s.nodesUp),
    nodesTotal: sum((s) => s.nodesTotal),
    nodesNotAnswering: sum((s) => s.nodesNotAnswering),
    nodesWithoutNotifications: sum((s) => s.nodesWithoutNotifications),
    degraded: all.some((s) => s.degraded),
  };
}

/**
 * The locks of several deployments' stores as one, for the hub (keys `<runtime index>:<resource>`: the index
 * has no `:`, so the first one ends it) and the grouped view (summaries naming their deployment).
 */
class ComposedLocks implements HubStore, GroupSource {
  /** Refilled for every summary visited (the stores do the same with theirs): nothing allocated per lock. */
  private readonly summary: LockSummary = { resource: "", state: "held", acquiredAt: null, expiresAt: null, token: null, reading: null, quorumHeld: 0, attemptsPerMin: null, waiters: null, deployment: "" };

  constructor(private readonly runtimes: readonly DeploymentLive[]) {}

  resources(): string[] {
    return this.keys(null, null, () => "");
  }

  /** The keys of the listed locks of `group` (null: all) on `deployment` (null: all). */
  keys(group: string | null, deployment: string | null, groupOf: (resource: string) => string): string[] {
    const out: string[] = [];
    this.runtimes.forEach((r, i) => {
      if (deployment !== null && r.deployment !== deployment) return;
      for (const resource of r.store.resources()) if (group === null || groupOf(resource) === group) out.push(`${i}:${resource}`);
    });
    return out;
  }

  /** A lock by hub key (`<index>:<resource>`), or by resource and deployment (the grouped view). */
  lock(keyOrResource: string, now: number, deployment?: string): Lock | null {
    if (deployment !== undefined) return this.runtimes.find((r) => r.deployment === deployment)?.store.lock(keyOrResource, now) ?? null;
    const colon = keyOrResource.indexOf(":");
    const runtime = this.runtimes[Number(keyOrResource.slice(0, colon))];
    return runtime ? runtime.store.lock(keyOrResource.slice(colon + 1), now) : null;
  }

  /** Every listed lock's summary in slices, deployment after deployment (see `LockStore.summariesInSlices`). */
  async summariesInSlices(visit: (summary: Readonly<LockSummary>) => void, slice = 2_000): Promise<void> {
    for (const r of this.runtimes) await r.store.summariesInSlices(this.naming(r.deployment, visit), slice);
  }

  /** A visitor of one deployment's summaries that passes them on naming the deployment (one object, refilled). */
  private naming(deployment: string, visit: (summary: Readonly<LockSummary>) => void): (s: Readonly<LockSummary>) => void {
    const summary = this.summary;
    return (s) => {
      Object.assign(summary, s);
      summary.deployment = deployment;
      visit(summary);
    };
  }

  drain(now: number, coalesceMs: number, max: number, wanted?: WantedLocks): ReturnType<HubStore["drain"]> {
    const upserts: Lock[] = [];
    const removed: Array<{ resource: string; deployment: string }> = [];
    const contention: Array<ReturnType<HubStore["drain"]>["contention"][number]> = [];
    for (const r of this.runtimes) {
      const changes = r.store.drain(now, coalesceMs, Math.max(0, max - upserts.length), wanted);
      for (const lock of changes.upserts) upserts.push(lock);
      for (const resource of changes.removed) removed.push({ resource, deployment: r.deployment });
      for (const figures of changes.contention) contention.push({ ...figures, deployment: r.deployment });
    }
    return { upserts, removed, contention };
  }

  discardChanges(): boolean {
    let had = false;
    for (const r of this.runtimes) had = r.store.discardChanges() || had;
    return had;
  }
}

// ---- one lock among several deployments --------------------------------------------------------------

/** The deployment names the console watches, in the configuration's order. */
export function deploymentNames(view: LiveView): string[] {
  return view.runtimes.map((r) => r.deployment);
}

/**
 * A `deployment` filter (list, groups, stream) checked against the deployments watched: an unknown name is a
 * 400 naming them; the only deployment of a console of one is no filter at all (undefined).
 */
export function deploymentFilter(view: LiveView, name: string | undefined): string | undefined {
  if (name === undefined) return undefined;
  if (!view.runtime(name)) throw unknownDeployment(view, name);
  return view.multi ? name : undefined;
}

/** The deployment named, which the console must watch (else a 400 naming those it does). */
export function namedDeployment(view: LiveView, name: string): DeploymentLive {
  const named = view.runtime(name);
  if (!named) throw unknownDeployment(view, name);
  return named;
}

export function unknownDeployment(view: LiveView, name: string): ApiError {
  const names = deploymentNames(view);
  return new ApiError("bad_request", `No deployment is named \`${name.slice(0, 60)}\`: this console watches ${names.map((n) => `\`${n}\``).join(", ")}.`, {
    deployments: names,
  });
}

/**
 * The deployment a request about `resource` means: the one named (a 400 when unknown); else the only one;
 * else the one the live view knows the resource on (held, or recently ended). On several it is ambiguous: a
 * 409 naming them, to choose with `?deployment=`. On none: `null` (the caller says the lock is not known).
 */
export function resolveDeployment(view: LiveView, resource: string, name: string | undefined, now = Date.now()): DeploymentLive | null {
  if (name !== undefined) return namedDeployment(view, name);
  if (!view.multi) return view.runtimes[0] ?? null;
  const on = view.runtimes.filter((r) => r.store.get(resource, now) !== null);
  if (on.length > 1) {
    const names = on.map((r) => r.deployment);
    throw new ApiError(
      "conflict",
      `\`${resource.slice(0, 200)}\` is a lock on ${names.length} deployments (${names.join(", ")}): say which with ?deployment=${names[0]} (or ${names.slice(1).join(", ")}).`,
      { deployments: names },
    );
  }
  return on[0] ?? null;
}

/**
 * The deployment whose history of `resource` a request means: as `resolveDeployment`; where the live view knows
 * the resource on no deployment (it ended a while ago), its history may be on any of them: a 409 naming them all.
 */
export function historyDeployment(view: LiveView, resource: string, name: string | undefined, now = Date.now()): string {
  const resolved = resolveDeployment(view, resource, name, now);
  if (resolved) return resolved.deployment;
  const names = deploymentNames(view);
  throw new ApiError(
    "conflict",
    `\`${resource.slice(0, 200)}\` is not held on any of the ${names.length} deployments watched, and its history may be on any of them: say which with ?deployment=${names[0] ?? ""} (or ${names.slice(1).join(", ")}).`,
    { deployments: names },
  );
}

/** A lock with its timeline, from the deployment resolved for it (see `resolveDeployment`). */
export function lockDetail(view: LiveView, resource: string, name: string | undefined, now = Date.now()): LockDetail | null {
  return resolveDeployment(view, resource, name, now)?.store.get(resource, now) ?? null;
}

/** The counts of every deployment's store, added up (the oldest lock is the oldest of all). */
export function sumCounts(all: readonly LockCounts[]): LockCounts {
  const out: LockCounts = { byState: { held: 0, partial: 0, elapsed: 0, released: 0, expired: 0, "force-released": 0, lost: 0 }, held: 0 };
  for (const c of all) {
    for (const [state, n] of Object.entries(c.byState) as Array<[keyof LockCounts["byState"], number]>) out.byState[state] += n;
    out.held += c.held;
  }
  return out;
}
