import "server-only";
import { clientIp, refuseWrongToken, tokensEqual } from "./auth";
import { getConfig } from "./config";
import { ApiError } from "./errors";
import { singleton } from "./global";
import { HEALTH_NODE_WAIT_MAX_MS, getHealth } from "./health";
import { getDeploymentLives, getKeyspaceEventCounts, getLiveEvents, getStreamHub, getWatcherStatus } from "./live";
import { getLogger } from "./logger";
import { isLabResource } from "@/lib/lab/keys";
import { readNodeSafety } from "@/lib/safety-signals";
import { startMetricsReporter } from "./cluster/reporter";
import { DEPLOYMENT_LABEL, KEYSPACE_EVENTS, LOCK_EVENT_TYPES, LOCK_STATES, METRIC_CATALOG, NOTIFICATION_STATUSES, count, declared, getRegistry, initialiseFor, initialisePerDeployment, metricGroup, seriesShown, seriesToShow } from "./metrics";
import { getDeploymentNodes, getNodes, quorumOf } from "./nodes";

const KNOWN_KEYSPACE_EVENTS = new Set<string>(KEYSPACE_EVENTS);
const KNOWN_LOCK_EVENTS = new Set<string>(LOCK_EVENT_TYPES);

/** The deployments, where the console watches several (their series carry `deployment`); null with one. */
function deploymentsLabelled(): string[] | null {
  const all = getDeploymentNodes();
  return all.length > 1 ? all.map((d) => d.deployment.name) : null;
}

/** `labels` plus the deployment where several are watched (the same object otherwise). */
function withDeployment<L extends Record<string, string>>(labels: L, deployment: string | undefined, multi: boolean): L | (L & { deployment: string }) {
  return multi && deployment !== undefined ? { ...labels, deployment } : labels;
}

/** Counts that change with every lock change, kept as plain numbers and added to their counters when scraped. */
interface HotCounts {
  /** Series carry `deployment` (several deployments are watched). */
  multi: boolean;
  /** Lock events since the last scrape, by type (`type deployment` where several are watched). */
  lockEvents: Map<string, number>;
  /** Keyspace notifications already added to the counter, by `deployment node event` (the watchers keep the totals). */
  keyspaceExported: Map<string, number>;
}

/**
 * Counts what the live view sees on the lock nodes (lock lifecycle events, keyspace notifications,
 * subscriber reconnects and gaps, contention telemetry) into the metrics. Attached once per process; a
 * lock key never becomes a label: contention goes by `metricGroup`, the rest by type and node (and
 * deployment, where several are watched). The counts that move with every change (lock events, keyspace
 * notifications) cost the live view a number each; the counters take them when scraped.
 */
export function startConsoleMetrics(): HotCounts {
  return singleton("console-metrics-started", () => {
    const deployments = deploymentsLabelled();
    if (deployments) {
      for (const { deployment, nodes } of getDeploymentNodes()) {
        for (const name of ["lockscope_keyspace_events_total", "lockscope_watcher_reconnects_total", "lockscope_watcher_gaps_total", "lockscope_locks_lost_in_restart_total", "lockscope_node_restart_hazards_total"]) {
          initialisePerDeployment(name, [deployment.name], { node: nodes.map((n) => n.id) });
        }
      }
      initialisePerDeployment("lockscope_lock_events_total", deployments);
      initialisePerDeployment("lockscope_locks_held", deployments);
    } else {
      const nodeIds = getNodes().map((n) => n.id);
      for (const name of ["lockscope_keyspace_events_total", "lockscope_watcher_reconnects_total", "lockscope_watcher_gaps_total", "lockscope_locks_lost_in_restart_total", "lockscope_node_restart_hazards_total"]) {
        initialiseFor(name, { node: nodeIds });
      }
    }
    const multi = deployments !== null;
    const hot: HotCounts = { multi, lockEvents: new Map(), keyspaceExported: new Map() };
    const reconnects = declared<"node" | "deployment">("lockscope_watcher_reconnects_total");
    const gaps = declared<"node" | "deployment">("lockscope_watcher_gaps_total");
    const lostInRestart = declared<"node" | "outcome" | "deployment">("lockscope_locks_lost_in_restart_total");
    const restartHazards = declared<"node" | "deployment">("lockscope_node_restart_hazards_total");
    const events = getLiveEvents();
    const keyOf = (type: string, deployment: string | undefined) => (multi && deployment !== undefined ? `${type} ${deployment}` : type);
    events.on("lock-event", (e) => {
      if (!KNOWN_LOCK_EVENTS.has(e.type)) return;
      const key = keyOf(e.type, e.deployment);
      hot.lockEvents.set(key, (hot.lockEvents.get(key) ?? 0) + 1);
      // One end told twice (seen as a release, then told it was a force release): counted once, as the latter. The
      // first telling is taken back while it waits for the scrape, as it does but for a scrape a moment after it.
      if (e.replaces !== undefined) {
        const replaced = keyOf(e.replaces, e.deployment);
        const pending = hot.lockEvents.get(replaced) ?? 0;
        if (pending > 0) hot.lockEvents.set(replaced, pending - 1);
      }
    });
    events.on("reconnect", (e) => reconnects.inc(withDeployment({ node: e.nodeId }, e.deployment, multi)));
    events.on("gap", (e) => gaps.inc(withDeployment({ node: e.nodeId }, e.deployment, multi)));
    events.on("lost-in-restart", (e) => {
      if (e.gone > 0) lostInRestart.inc(withDeployment({ node: e.nodeId, outcome: "gone" }, e.deployment, multi), e.gone);
      if (e.heldByQuorum > 0) lostInRestart.inc(withDeployment({ node: e.nodeId, outcome: "held_by_quorum" }, e.deployment, multi), e.heldByQuorum);
    });
    events.on("restart-hazard", (e) => restartHazards.inc(withDeployment({ node: e.nodeId }, e.deployment, multi)));
    events.on("contention", (e) => {
      const group = metricGroup(e.resource);
      // Per deployment where several are watched: a group's name says nothing of which nodes its locks are on.
      // Series stay bounded: METRICS_MAX_GROUPS groups (and other) × traffic × the deployments configured.
      const on: Record<string, readonly string[]> = multi && e.deployment !== undefined ? { [DEPLOYMENT_LABEL]: [e.deployment] } : {};
      initialiseFor("lockscope_lock_contention_events_total", { group: [group], ...on });
      count("lockscope_lock_contention_events_total", withDeployment({ group, traffic: isLabResource(e.resource) ? "lab" : "production" }, e.deployment, multi));
    });
    return hot;
  });
}

/** Adds the lock events and keyspace notifications counted since the last scrape to their counters. */
function exportHotCounts(hot: HotCounts): void {
  const lockEvents = declared<"type" | "deployment">("lockscope_lock_events_total");
  for (const [key, n] of hot.lockEvents) {
    const [type = key, deployment] = key.split(" ");
    lockEvents.inc(withDeployment({ type }, deployment, hot.multi), n);
  }
  hot.lockEvents.clear();
  const keyspace = declared<"node" | "event" | "deployment">("lockscope_keyspace_events_total");
  for (const { deployment, nodeId, counts } of getKeyspaceEventCounts()) {
    for (const [event, total] of counts) {
      const seen = `${deployment} ${nodeId} ${event}`;
      const delta = total - (hot.keyspaceExported.get(seen) ?? 0);
      if (delta <= 0) continue;
      hot.keyspaceExported.set(seen, total);
      keyspace.inc(withDeployment({ node: nodeId, event: KNOWN_KEYSPACE_EVENTS.has(event) ? event : "other" }, deployment, hot.multi), delta);
    }
  }
}

/** Time a scrape keeps for itself besides waiting for the nodes (the live view's counts, the rendering, the network). */
const SCRAPE_MARGIN_MS = 1_000;

/**
 * How long a scrape waits for a lock node before `lockscope_node_up` says it does not answer: the node timeout,
 * the console's own measure of a node that does not answer (its live view and engine wait as long), not
 * /api/health's cap of a second for health checkers, which would page nodes slow to answer but within it. Within
 * the scrape timeout Prometheus sends (`X-Prometheus-Scrape-Timeout-Seconds`), less a margin, so that a node that
 * hangs is told down in the answer instead of failing the scrape (a second at least).
 */
export function scrapeNodeWaitMs(nodeTimeoutMs: number, scrapeTimeoutSeconds: string | null): number {
  const scrapeTimeout = scrapeTimeoutSeconds === null ? Number.NaN : Number(scrapeTimeoutSeconds) * 1000;
  if (!Number.isFinite(scrapeTimeout) || scrapeTimeout <= 0) return nodeTimeoutMs;
  return Math.min(nodeTimeoutMs, Math.max(HEALTH_NODE_WAIT_MAX_MS, scrapeTimeout - SCRAPE_MARGIN_MS));
}

/** Per-node health and the live view's counts, read when Prometheus scrapes (never kept up to date in between). */
export async function refreshConsoleMetrics(options: { nodeWaitMs?: number } = {}): Promise<void> {
  const hot = startConsoleMetrics();
  const all = getDeploymentNodes();
  const multi = all.length > 1;
  for (const d of all) {
    const labels: { deployment: string } | Record<string, never> = multi ? { deployment: d.deployment.name } : {};
    declared("lockscope_nodes").set(labels, d.nodes.length);
    declared("lockscope_quorum_size").set(labels, quorumOf(d.nodes.length));
    declared("lockscope_deployment_info").set({ ...labels, kind: d.deployment.kind }, 1);
  }

  const health = await getHealth({ nodeWaitMs: options.nodeWaitMs ?? getConfig().nodeTimeoutMs });
  const up = declared<"node" | "deployment">("lockscope_node_up");
  const latency = declared<"node" | "deployment">("lockscope_node_latency_seconds");
  const notifications = declared<"node" | "status" | "deployment">("lockscope_node_notifications");
  const readOnly = declared<"node" | "deployment">("lockscope_node_read_only");
  const unserved = declared<"node" | "deployment">("lockscope_node_unserved_slots");
  const refused = declared<"node" | "deployment">("lockscope_node_refused_patterns");
  const clusters = new Set(all.filter((d) => d.deployment.kind === "cluster").map((d) => d.deployment.name));
  for (const node of health.nodes) {
    const labels = withDeployment({ node: node.id }, node.deployment, multi);
    up.set(labels, node.up ? 1 : 0);
    // Known while the node answers (0 where its role is not known: a cluster, INFO refused); absent while it does not:
    // 0 would call a node nobody can read a writable primary.
    if (node.up) readOnly.set(labels, isReplica(node.replication) ? 1 : 0);
    else readOnly.remove(labels);
    // Known while the node can be read (a refusal is found by subscribing and reading there).
    if (node.up) refused.set(labels, patternCount(node.refusedPatterns));
    else refused.remove(labels);
    // A cluster that serves what it still covers answers PING and says cluster_state:ok: up, whatever its lost shard.
    if (clusters.has(node.deployment)) unserved.set(labels, slotCount(node.unservedSlots));
    if (node.latencyMs === null) latency.remove(labels);
    else latency.set(labels, node.latencyMs / 1000);
    for (const status of NOTIFICATION_STATUSES) notifications.set({ ...labels, status }, node.notifications === status ? 1 : 0);
    setNodeSafety(labels, readNodeSafety(node), node.up);
  }

  try {
    const lives = getDeploymentLives();
    const held = declared<"state" | "deployment">("lockscope_locks_held");
    for (const live of lives) {
      const labels: { deployment: string } | Record<string, never> = multi ? { deployment: live.deployment } : {};
      const counts = live.store.counts();
      for (const state of LOCK_STATES) held.set({ ...labels, state }, counts.byState[state] ?? 0);
      // Kept by the store as locks change: no pass over every lock per scrape.
      const safety = await live.store.safetyFacts();
      declared("lockscope_lock_oldest_held_acquired_timestamp_seconds").set(labels, safety.oldestHeldAt === null ? 0 : safety.oldestHeldAt / 1000);
      declared("lockscope_locks_without_ttl").set(labels, safety.withoutTtl);
      declared("lockscope_locks_below_quorum").set(labels, safety.belowQuorum);
      declared("lockscope_locks_past_ttl").set(labels, safety.pastTtl);
      declared("lockscope_lock_oldest_past_ttl_expiry_timestamp_seconds").set(labels, safety.oldestPastTtlAt === null ? 0 : safety.oldestPastTtlAt / 1000);
      declared("lockscope_lock_oldest_acquired_timestamp_seconds").set(labels, safety.oldestAcquiredAt === null ? 0 : safety.oldestAcquiredAt / 1000);
    }

    const connected = declared<"node" | "deployment">("lockscope_watcher_connected");
    const lastEvent = declared<"node" | "deployment">("lockscope_watcher_last_event_timestamp_seconds");
    for (const status of getWatcherStatus()) {
      const labels = withDeployment({ node: status.nodeId }, status.deployment, multi);
      connected.set(labels, status.up ? 1 : 0);
      lastEvent.set(labels, status.lastEventAt ? status.lastEventAt / 1000 : 0);
    }
    declared("lockscope_sse_clients").set(getStreamHub().clientCount);
    exportHotCounts(hot);
  } catch (error) {
    // The scrape still answers with everything else; the gap in the live view's series says the rest.
    getLogger().warn({ err: error instanceof Error ? error.message : String(error) }, "metrics: the live view could not be read");
  }
}

/** Whether a health entry's `replication` (the replication watch's fresh reading) says the node is a replica. */
function isReplica(replication: unknown): boolean {
  return typeof replication === "object" && replication !== null && (replication as { role?: unknown }).role === "replica";
}

/** How many distinct lock patterns a health entry's `refusedPatterns` (a pattern, with each ACL rule it lacks) names; 0 without it. */
function patternCount(refusals: unknown): number {
  if (!Array.isArray(refusals)) return 0;
  return new Set((refusals as unknown[]).map((r) => (typeof r === "object" && r !== null ? (r as { glob?: unknown }).glob : undefined)).filter((g) => typeof g === "string")).size;
}

/** How many slots a health entry's `unservedSlots` (ranges, from the watcher) covers; 0 without it. */
function slotCount(ranges: unknown): number {
  if (!Array.isArray(ranges)) return 0;
  let n = 0;
  for (const range of ranges as unknown[]) {
    if (Array.isArray(range) && typeof range[0] === "number" && typeof range[1] === "number") n += range[1] - range[0] + 1;
  }
  return n;
}

/** A node fact is exported while it is known, and absent (not 0) while it is not: 0 would be a claim. */
function setOrRemove(name: string, labels: Record<string, string>, value: number | null): void {
  const metric = declared(name);
  if (value === null) metric.remove(labels);
  else metric.set(labels, value);
}

/**
 * `up`: whether the node answers now. Its clock skew is measured at every reading: while it cannot be read the last
 * one is no reading of now (/api/health keeps it, as the Nodes panel shows it "when last read"), so the gauge goes.
 * Its persistence and longest TTL are what it was configured with and what it held: kept.
 */
function setNodeSafety(node: Record<string, string>, safety: ReturnType<typeof readNodeSafety>, up: boolean): void {
  const bit = (v: boolean | null) => (v === null ? null : v ? 1 : 0);
  setOrRemove("lockscope_node_uptime_seconds", node, safety.uptimeSec);
  setOrRemove("lockscope_node_restart_hazard", node, bit(safety.restartHazard));
  setOrRemove("lockscope_node_clock_skew_seconds", node, safety.clockSkewMs === null || !up ? null : safety.clockSkewMs / 1000);
  setOrRemove("lockscope_node_longest_ttl_seconds", node, safety.longestTtlMs === null ? null : safety.longestTtlMs / 1000);
  setOrRemove("lockscope_node_persistence", { ...node, kind: "aof" }, bit(safety.aof));
  setOrRemove("lockscope_node_persistence", { ...node, kind: "rdb" }, bit(safety.rdb));
}

/**
 * `METRICS_TOKEN`, where set, must come as `Authorization: Bearer <token>`; compared in constant time. A wrong one
 * (the operator's or viewer's too: they are no scrape credentials) counts against the client address's limit of
 * wrong tokens, the API's; past it, 429 with `Retry-After`. The right one is always accepted, whatever its address
 * sent before, so a guesser behind the scraper's address cannot stop the scrapes.
 */
export async function checkMetricsToken(headers: Headers): Promise<void> {
  const expected = getConfig().metricsToken;
  if (expected === null) return;
  const challenge = { "WWW-Authenticate": 'Bearer realm="lockscope-metrics"' };
  const authorization = headers.get("authorization");
  if (authorization === null) throw new ApiError("unauthorized", "Scraping /metrics needs `Authorization: Bearer <METRICS_TOKEN>`.", undefined, challenge);
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match?.[1]) throw new ApiError("unauthorized", "The Authorization header must be `Bearer <METRICS_TOKEN>`.", undefined, challenge);
  if (tokensEqual(match[1], expected)) return;
  await refuseWrongToken(match[1], clientIp(headers), "metrics", "The bearer token is not this console's METRICS_TOKEN.", challenge);
}

const SHARED_METRICS = new Set(METRIC_CATALOG.filter((d) => d.shared).map((d) => d.name));

/**
 * The Prometheus text exposition, with the scrape-time gauges refreshed: the console's own metrics always,
 * the shared ones (the nodes', the locks') only from the elected reporter (or from every console while
 * none can be elected).
 */
export async function scrapeMetrics(headers: Headers): Promise<Response> {
  await refreshConsoleMetrics({ nodeWaitMs: scrapeNodeWaitMs(getConfig().nodeTimeoutMs, headers.get("x-prometheus-scrape-timeout-seconds")) });
  const registry = getRegistry();
  const reporter = startMetricsReporter();
  declared("lockscope_metrics_reporter").set(reporter.holds() ? 1 : 0);
  const shown = seriesToShow();
  const exported = reporter.exports() ? await registry.metrics() : (await Promise.all(registry.getMetricsAsArray().filter((m) => !SHARED_METRICS.has(m.name)).map((m) => registry.getSingleMetricAsString(m.name)))).join("\n\n") + "\n";
  seriesShown(shown);
  return new Response(exported, {
    headers: { "Content-Type": registry.contentType, "Cache-Control": "no-store" },
  });
}
