import "server-only";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type Metric } from "prom-client";
import { lockGroup, OTHER_GROUP, statelessPattern } from "@/lib/locks/groups";
import type { LockEventType } from "@/lib/locks/reducer";
import { LOCK_STATES } from "@/lib/locks/types";
import packageJson from "@/package.json";
import { getConfig } from "./config";
import { singleton } from "./global";

/**
 * The console's metrics: one prom-client registry per process, kept on globalThis, with get-or-create
 * metrics, so hot reload and the separate route bundles never hit prom-client's "already registered".
 *
 * Every metric the console exports is declared in `METRIC_CATALOG` below, with the label values known in
 * advance, and registered (at 0) as soon as the registry exists: a counter that first appears at 1 is a
 * step `rate()` never sees. Other parts of the console still call `counter()`/`gauge()`/`histogram()`
 * with the same name, help and labels and get the declared metric back.
 *
 * Label rule: no label ever holds a lock key. Per-group breakdowns go through `metricGroup()`.
 */

export type MetricType = "counter" | "gauge" | "histogram";

export interface MetricDefinition {
  name: string;
  type: MetricType;
  help: string;
  labels: readonly string[];
  buckets?: readonly number[];
  /**
   * Label values known in advance, per label; every combination is initialised at 0. A label missing
   * here (node ids, groups, routes) is initialised when its values become known.
   */
  known?: Readonly<Record<string, readonly string[]>>;
  /**
   * A fact about the lock nodes or the locks, the same whichever console reports it: exported only by the
   * console holding the metrics-reporter lease, so N replicas never show it N times (server/cluster/reporter.ts).
   */
  shared?: true;
}

export { LOCK_STATES };
export const LOCK_EVENT_TYPES = ["acquired", "extended", "released", "expired", "evicted", "force-released", "lost"] as const satisfies readonly LockEventType[];
export const ATTEMPT_RESULTS = ["acquired", "conflict", "nodes-failed", "validity"] as const;
export const ENGINE_OPERATIONS = ["acquire", "commit-fence", "release", "extend", "leave-queue", "subscribe"] as const;
export const NOTIFICATION_STATUSES = ["on", "enabled-by-console", "unavailable"] as const;
/** Keyspace event names counted by name; any other is counted as `other` (the label set stays closed). */
export const KEYSPACE_EVENTS = ["set", "del", "expire", "expired", "evicted", "persist", "rename_from", "rename_to", "hset", "hdel", "new"] as const;
export const LAB_STRATEGIES = ["none", "naive", "redlock", "redlock-fenced", "atomic"] as const;
export const LAB_STATUSES = ["done", "cancelled", "failed"] as const;
/** `stream`: the audit stream on the lock nodes (one write per node); `file`: the JSON-lines file. */
export const AUDIT_SINKS = ["stream", "file"] as const;
export const AUDIT_OUTCOMES = ["ok", "failed"] as const;
/** `lab`: the contention lab's own locks (`lock:lab:*`); production alerts select `traffic="production"`. */
export const TRAFFIC = ["production", "lab"] as const;
/** What became of a lock a restarted node came back without: gone, or still held on a quorum of the other nodes. */
export const LOST_IN_RESTART_OUTCOMES = ["gone", "held_by_quorum"] as const;
/** The audit log's outcomes of a release (`refused`: not attempted because the audit could not be written). */
export const FORCE_RELEASE_OUTCOMES = ["released", "partial", "conflict", "absent", "failed", "refused"] as const;

/** The codes of the answers given before any page or route runs (lib/request-guard.ts, proxy.ts). */
export const REFUSAL_CODES = ["misdirected_request", "bad_request", "not_found", "method_not_allowed", "request_timeout", "headers_too_large"] as const;

/** Seconds from a millisecond up to half a minute: how long a caller waited for a lock. */
const WAIT_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds from 10 ms to an hour: how long a lock was held. */
const HOLD_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
/** Validity left at release; the negative buckets are releases after the lock had already expired. */
const MARGIN_BUCKETS = [-1, -0.1, 0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/** One catalog entry: name, labels, help, then what a few add (known label values, buckets, `shared`). */
const metric =
  (type: MetricType) =>
  (name: string, labels: readonly string[], help: string, more: Pick<MetricDefinition, "buckets" | "known" | "shared"> = {}): MetricDefinition => ({ name, type, help, labels, ...more });
const counterMetric = metric("counter");
const gaugeMetric = metric("gauge");
const histogramMetric = metric("histogram");

export const METRIC_CATALOG: readonly MetricDefinition[] = Object.freeze<MetricDefinition[]>([
  // The console itself.
  gaugeMetric("lockscope_build_info", ["version"], "Always 1; labels say which console version runs."),
  counterMetric("lockscope_http_requests_total", ["route", "method", "status"], "HTTP requests answered, by route pattern, method and status."),
  counterMetric("lockscope_http_refused_total", ["code"], "Requests refused before any page or route ran, by error code (misdirected_request: a Host the console does not answer to).", { known: { code: REFUSAL_CODES } }),
  histogramMetric("lockscope_http_request_duration_seconds", ["route", "method"], "Time to produce an HTTP response (for streams: until the stream opened).", { buckets: HTTP_BUCKETS }),
  gaugeMetric("lockscope_metrics_reporter", [], "1 on the one console that exports the lock nodes' and the locks' metrics (the reporter lease), 0 on the others."),
  gaugeMetric("lockscope_sse_clients", [], "Browser live streams (Server-Sent Events) open now."),
  counterMetric("lockscope_audit_writes_total", ["sink", "outcome"], "Audit records written, by sink (stream: the audit stream on the lock nodes, once per node; file: the audit file; postgres: the audit database, with AUDIT_DATABASE_URL) and outcome.", { known: { sink: AUDIT_SINKS, outcome: AUDIT_OUTCOMES } }),
  gaugeMetric("lockscope_audit_outcomes_pending", [], "Audit outcomes (how a force release or a pattern change ended) the audit store has not taken yet, kept in this console's memory and offered again every 5 s (at most 10 000; lost if the console stops)."),
  counterMetric("lockscope_force_releases_total", ["outcome"], "Force releases asked for by operators, by outcome.", { known: { outcome: FORCE_RELEASE_OUTCOMES } }),
  counterMetric("lockscope_lab_runs_total", ["strategy", "status"], "Lab runs finished, by strategy and status.", { known: { strategy: LAB_STRATEGIES, status: LAB_STATUSES } }),
  counterMetric("lockscope_lab_lost_updates_total", ["strategy"], "Sales of units already sold in lab runs (lost updates), by strategy.", { known: { strategy: LAB_STRATEGIES } }),

  // The lock engine, from the events of the console's own Redlock instances.
  counterMetric("lockscope_redlock_acquire_attempts_total", ["group", "result"], "Lock acquisition attempts by the console's Redlock engine, by lock group and result."),
  histogramMetric("lockscope_redlock_acquire_wait_seconds", [], "Time from asking for a lock to holding it.", { buckets: WAIT_BUCKETS }),
  histogramMetric("lockscope_redlock_hold_seconds", [], "Time a lock was held, from acquisition to release.", { buckets: HOLD_BUCKETS }),
  counterMetric("lockscope_redlock_extensions_total", ["result"], "Lock extensions by the engine, by result (ok or failed).", { known: { result: ["ok", "failed"] } }),
  counterMetric("lockscope_redlock_locks_lost_total", ["group"], "Locks lost before their holder released them, by lock group."),
  histogramMetric("lockscope_redlock_release_validity_margin_seconds", [], "Validity left when a lock was released; below zero the holder worked past its lock.", { buckets: MARGIN_BUCKETS }),
  counterMetric("lockscope_redlock_node_errors_total", ["node", "operation"], "Errors from a lock node during an engine operation, by node and operation.", { known: { operation: ENGINE_OPERATIONS } }),

  // The keyspace watcher (live view): what it sees on the lock nodes.
  gaugeMetric("lockscope_locks_held", ["state", "deployment"], "Locks the console knows of, by state (held counts the quorum-held ones).", { shared: true, known: { state: LOCK_STATES } }),
  gaugeMetric("lockscope_lock_oldest_held_acquired_timestamp_seconds", ["deployment"], "Acquisition time (Unix seconds) of the lock held longest now; 0 when none is held.", { shared: true }),
  counterMetric("lockscope_lock_events_total", ["type", "deployment"], "Lock lifecycle events seen on the lock nodes, by type.", { shared: true, known: { type: LOCK_EVENT_TYPES } }),
  counterMetric("lockscope_lock_contention_events_total", ["group", "traffic", "deployment"], "Failed acquisition attempts published by lock engines (contention telemetry), by lock group and traffic (production or lab); group other: keys without a group or past METRICS_MAX_GROUPS.", { shared: true, known: { traffic: TRAFFIC } }),
  counterMetric("lockscope_keyspace_events_total", ["node", "event", "deployment"], "Keyspace notifications received on lock keys, by node and event.", { shared: true, known: { event: [...KEYSPACE_EVENTS, "other"] } }),
  counterMetric("lockscope_watcher_reconnects_total", ["node", "deployment"], "Keyspace subscriber reconnections, by node."),
  counterMetric("lockscope_watcher_gaps_total", ["node", "deployment"], "Times the watcher missed events (subscriber down) and reconciled with a SCAN, by node."),
  counterMetric("lockscope_locks_lost_in_restart_total", ["node", "outcome", "deployment"], "Locks a lock node came back without after it restarted, though their TTL had not run out, by node and outcome (gone: no quorum of nodes holds it any more, its holder may think it holds what another can take; held_by_quorum: a Redlock still held on a quorum of the other nodes).", { known: { outcome: LOST_IN_RESTART_OUTCOMES } }),
  counterMetric("lockscope_node_restart_hazards_total", ["node", "deployment"], "Restarts of the node without persistence sooner than the longest TTL the console knew on it, counted as the console saw them (the hazard gauge can miss one shorter than the scrape interval), by node."),
  gaugeMetric("lockscope_watcher_connected", ["node", "deployment"], "1 while the console watches the node: its keyspace subscriber subscribed, the node reconciled and answering."),
  counterMetric("lockscope_failovers_total", ["deployment"], "Failovers seen (Sentinel +switch-master, a cluster replica promoted, a standalone instance's URL reaching another server already running: a managed primary endpoint or a virtual IP moved), by deployment."),
  counterMetric("lockscope_locks_lost_in_failover_total", ["deployment"], "Locks held on a primary that its promoted replica did not have after a failover, by deployment."),
  counterMetric("lockscope_force_releases_undone_total", ["deployment"], "Force releases a failover undid: the promoted replica had not copied the delete and holds the lock again, for the holder it was released from, by deployment."),
  gaugeMetric("lockscope_watcher_last_event_timestamp_seconds", ["node", "deployment"], "When the node's subscriber last received a notification (Unix seconds); 0 before the first."),
  gaugeMetric("lockscope_node_up", ["node", "deployment"], "1 when the lock node answers PING within the node timeout (a Redis Cluster: and says it serves, cluster_state:ok).", { shared: true }),
  gaugeMetric("lockscope_node_latency_seconds", ["node", "deployment"], "PING round trip to the lock node at the last scrape; absent while it is down.", { shared: true }),
  gaugeMetric("lockscope_node_read_only", ["node", "deployment"], "1 while the lock node is a replica (INFO replication, read every 2 s: demoted by a failover, or named so by its URL): no lock can be taken, extended or force-released there; 0 otherwise. Absent while the node does not answer.", { shared: true }),
  gaugeMetric("lockscope_node_unserved_slots", ["node", "deployment"], "A Redis Cluster's slots that no primary serves now (a shard lost its primary and no replica was promoted, while the cluster serves the rest): no lock whose key falls in them can be taken, extended or released; 0 while every slot is served. Cluster deployments only.", { shared: true }),
  gaugeMetric("lockscope_node_refused_patterns", ["node", "deployment"], "Lock patterns the node refuses the console's Redis user now (its ACL lacks the pattern's keyspace channel or its keys): their locks are not read on that node; 0 when it refuses none. Absent while the node cannot be read.", { shared: true }),
  gaugeMetric("lockscope_node_notifications", ["node", "status", "deployment"], "Keyspace notification status per node: 1 for the current status, 0 for the others.", { shared: true, known: { status: NOTIFICATION_STATUSES } }),
  // Lock safety: the hazards Redlock's guarantees depend on (lab locks left out).
  gaugeMetric("lockscope_node_uptime_seconds", ["node", "deployment"], "Seconds since the lock node started (INFO server); absent while the node cannot be read.", { shared: true }),
  gaugeMetric("lockscope_node_restart_hazard", ["node", "deployment"], "1 when the node restarted without persistence sooner than the longest TTL seen on it: it may grant a lock that is still held.", { shared: true }),
  gaugeMetric("lockscope_node_clock_skew_seconds", ["node", "deployment"], "The node's clock minus the console's (TIME), in seconds; absent while the node is down.", { shared: true }),
  gaugeMetric("lockscope_node_longest_ttl_seconds", ["node", "deployment"], "The longest lock TTL seen on the node, in seconds.", { shared: true }),
  gaugeMetric("lockscope_node_persistence", ["node", "kind", "deployment"], "1 when the node persists its keys by that kind (aof: appendonly yes; rdb: a save schedule), 0 when not.", { shared: true }),
  gaugeMetric("lockscope_locks_without_ttl", ["deployment"], "Locks present on the nodes with no TTL (only a release ends them).", { shared: true }),
  gaugeMetric("lockscope_locks_below_quorum", ["deployment"], "Locks held by fewer nodes than a quorum.", { shared: true }),
  gaugeMetric("lockscope_locks_past_ttl", ["deployment"], "Locks whose TTL has run out while their key is still on a node.", { shared: true }),
  gaugeMetric("lockscope_lock_oldest_past_ttl_expiry_timestamp_seconds", ["deployment"], "When the TTL of the lock longest past its TTL ran out (Unix seconds), its key still on a node; 0 when none is past its TTL.", { shared: true }),
  gaugeMetric("lockscope_lock_oldest_acquired_timestamp_seconds", ["deployment"], "Acquisition time (Unix seconds) of the oldest lock present on the nodes, held by a quorum or not, past its TTL or not; 0 when none.", { shared: true }),
  gaugeMetric("lockscope_quorum_size", ["deployment"], "Nodes that must agree for a Redlock lock (floor(N/2)+1).", { shared: true }),
  gaugeMetric("lockscope_nodes", ["deployment"], "Lock nodes configured.", { shared: true }),
  // One series per deployment configured, kind from a closed set (DEPLOYMENT_KINDS): bounded.
  gaugeMetric("lockscope_deployment_info", ["kind", "deployment"], "Always 1; kind says what the deployment is (redlock: N independent nodes; standalone, sentinel, cluster: one node to the console).", { shared: true }),
])

const catalogByName = new Map(METRIC_CATALOG.map((d) => [d.name, d]));

/**
 * The label naming a deployment on series about locks and nodes. A console of one deployment leaves it out
 * (its series are as they always were); one watching several sets it on every such series, since node ids
 * (`node-0`…) repeat across deployments.
 */
export const DEPLOYMENT_LABEL = "deployment";

/**
 * A console watching several deployments: the series of `name` known in advance are made per deployment,
 * and those without the label (made when the registry was created) go.
 */
export function initialisePerDeployment(name: string, deployments: readonly string[], values: Readonly<Record<string, readonly string[]>> = {}): void {
  const definition = catalogByName.get(name);
  const metric = getRegistry().getSingleMetric(name);
  if (!definition || !metric) return;
  if (metric instanceof Counter || metric instanceof Gauge || metric instanceof Histogram) {
    for (const labels of knownCombinations(definition, values) ?? []) metric.remove(labels);
  }
  initialiseFor(name, { ...values, [DEPLOYMENT_LABEL]: deployments });
}

/**
 * Every combination of the known label values (labels without known values are left out). `deployment` is
 * set only where the console watches several deployments (see `DEPLOYMENT_LABEL`): without its values the
 * series go without it, as on a console of one.
 */
function knownCombinations(definition: MetricDefinition, extra: Readonly<Record<string, readonly string[]>> = {}): Array<Record<string, string>> | null {
  const known = { ...definition.known, ...extra };
  const labels = definition.labels.filter((l) => l !== DEPLOYMENT_LABEL || (known[l]?.length ?? 0) > 0);
  if (labels.length === 0) return null;
  if (!labels.every((l) => (known[l]?.length ?? 0) > 0)) return null;
  let combos: Array<Record<string, string>> = [{}];
  for (const label of labels) {
    const values = known[label] ?? [];
    combos = combos.flatMap((c) => values.map((v) => ({ ...c, [label]: v })));
  }
  return combos;
}

function create(registry: Registry, d: MetricDefinition): Metric {
  const common = { name: d.name, help: d.help, labelNames: [...d.labels], registers: [registry] };
  if (d.type === "counter") return new Counter(common);
  if (d.type === "gauge") return new Gauge(common);
  return new Histogram({ ...common, buckets: [...(d.buckets ?? [])] });
}

/** Sets every known label combination to 0 (counters and histograms: creates the series); returns them. */
function initialise(metric: Metric, definition: MetricDefinition, extra?: Readonly<Record<string, readonly string[]>>): Array<Record<string, string>> {
  const combos = knownCombinations(definition, extra);
  if (!combos) return [];
  for (const labels of combos) {
    if (metric instanceof Counter) metric.inc(labels, 0);
    else if (metric instanceof Gauge) metric.inc(labels, 0);
    else if (metric instanceof Histogram) metric.zero(labels);
  }
  return combos;
}

export function getRegistry(): Registry {
  return singleton("metrics-registry", () => {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: "lockscope_" });
    // prom-client names these gauges `_total`, a suffix Prometheus reserves for counters (`promtool check
    // metrics` refuses them); their per-type breakdowns (`lockscope_nodejs_active_handles{type}` …) stay.
    for (const name of ["handles", "requests", "resources"]) registry.removeSingleMetric(`lockscope_nodejs_active_${name}_total`);
    for (const definition of METRIC_CATALOG) initialise(create(registry, definition), definition);
    (registry.getSingleMetric("lockscope_build_info") as Gauge<"version">).set({ version: packageJson.version }, 1);
    return registry;
  });
}

function sameLabels(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((l, i) => l === b[i]);
}

function getOrCreate<T extends Metric>(name: string, type: MetricType, labels: readonly string[], make: (registry: Registry) => T): T {
  const registry = getRegistry();
  const existing = registry.getSingleMetric(name);
  const declared = catalogByName.get(name);
  if (declared && (declared.type !== type || !sameLabels(declared.labels, labels))) {
    // A programming error: the caller and the catalog disagree, and prom-client would throw on the
    // first inc() with a less helpful message.
    throw new Error(`Metric ${name} is declared in server/metrics.ts as a ${declared.type} with labels [${declared.labels.join(", ")}]; asked for a ${type} with [${labels.join(", ")}].`);
  }
  if (existing) return existing as T;
  return make(registry);
}

export function counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
  return getOrCreate(name, "counter", labelNames, (registry) => new Counter<L>({ name, help, labelNames, registers: [registry] }));
}

export function gauge<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
  return getOrCreate(name, "gauge", labelNames, (registry) => new Gauge<L>({ name, help, labelNames, registers: [registry] }));
}

export function histogram<L extends string>(name: string, help: string, labelNames: readonly L[], buckets: number[]): Histogram<L> {
  return getOrCreate(name, "histogram", labelNames, (registry) => new Histogram<L>({ name, help, labelNames, buckets, registers: [registry] }));
}

/** The declared metric of the catalog, typed by its labels. */
export function declared<L extends string = string>(name: string): Counter<L> & Gauge<L> & Histogram<L> {
  const metric = getRegistry().getSingleMetric(name);
  if (!metric || !catalogByName.has(name)) throw new Error(`Metric ${name} is not in the catalog of server/metrics.ts.`);
  return metric as Counter<L> & Gauge<L> & Histogram<L>;
}

/**
 * Initialises the series of a metric for label values learnt at run time (node ids, a new group), once
 * per value, so their first increment is visible to `rate()`. A series made the moment it is first counted (a
 * group's) counts through `count()`, which keeps its counts until a scrape has shown it at 0.
 */
export function initialiseFor(name: string, values: Readonly<Record<string, readonly string[]>>): void {
  const definition = catalogByName.get(name);
  const metric = getRegistry().getSingleMetric(name);
  if (!definition || !metric) return;
  const seen = singleton("metrics-initialised", () => new Set<string>());
  const key = `${name}|${JSON.stringify(values)}`;
  if (seen.has(key)) return;
  seen.add(key);
  const made = initialise(metric, definition, values);
  if (metric instanceof Counter) for (const labels of made) newSeries().unshown.add(seriesKey(definition, labels));
}

/** One key per series: the metric's name and its label values in the catalog's order. */
function seriesKey(definition: MetricDefinition, labels: Readonly<Record<string, string>>): string {
  return `${definition.name}${JSON.stringify(definition.labels.map((l) => labels[l] ?? null))}`;
}

interface NewSeries {
  /** Counter series made at run time (`initialiseFor`) that no scrape has shown yet. */
  unshown: Set<string>;
  /** What was counted on them meanwhile. */
  waiting: Map<string, { metric: Counter; labels: Record<string, string>; n: number }>;
}

const newSeries = () => singleton("metrics-new-series", (): NewSeries => ({ unshown: new Set(), waiting: new Map() }));

/**
 * Adds `n` to a series of the declared counter `name`. A series made at run time that no scrape has shown yet (a
 * group seen for the first time) keeps its counts until one has shown it at 0: Prometheus takes a series' first
 * sample as its start, so counts in it are a step `rate()` and `increase()` never see (a first burst of contention
 * on a group, the engine's first attempts on it).
 */
export function count(name: string, labels: Readonly<Record<string, string>>, n = 1): void {
  const metric = declared(name);
  const fresh = newSeries();
  // (Nearly always none waits for its first scrape: no series key is made per count then.)
  const definition = fresh.unshown.size === 0 ? undefined : catalogByName.get(name);
  const key = definition === undefined ? null : seriesKey(definition, labels);
  if (key === null || !fresh.unshown.has(key)) {
    metric.inc(labels, n);
    return;
  }
  const waiting = fresh.waiting.get(key);
  if (waiting) waiting.n += n;
  else fresh.waiting.set(key, { metric, labels: { ...labels }, n });
}

/** The series made at run time that the scrape about to be rendered shows for the first time (see `seriesShown`). */
export function seriesToShow(): ReadonlySet<string> {
  return new Set(newSeries().unshown);
}

/**
 * A scrape has shown `keys` (from `seriesToShow` before it was rendered), at 0 (on a console that is not the
 * reporter, the shared ones are not shown at all: its series appear with their counts if it becomes the reporter,
 * as any console's do): what was counted on them goes in now, and shows at the next scrape. A series made while the
 * scrape was rendered waits for the next one.
 */
export function seriesShown(keys: ReadonlySet<string>): void {
  const fresh = newSeries();
  for (const key of keys) {
    const waiting = fresh.waiting.get(key);
    if (waiting) waiting.metric.inc(waiting.labels, waiting.n);
    fresh.waiting.delete(key);
    fresh.unshown.delete(key);
  }
}

/** Called by the route wrapper for every request; `route` is the route's pattern, never a lock key. */
export function observeHttpRequest(route: string, method: string, status: number, seconds: number): void {
  const labels = { route, method, status: String(status) };
  counter("lockscope_http_requests_total", "HTTP requests answered, by route pattern, method and status.", ["route", "method", "status"]).inc(labels);
  histogram("lockscope_http_request_duration_seconds", "Time to produce an HTTP response (for streams: until the stream opened).", ["route", "method"], HTTP_BUCKETS).observe(
    { route, method },
    seconds,
  );
}

/** The group of lock keys beyond the cap, without a match, or when grouping is off. */
export { OTHER_GROUP };

/**
 * Which group a lock key counts under in metric labels: the first capture group of
 * `METRICS_GROUP_PATTERN` (`lock:orders/42` → `lock:orders` by default; the locks page groups by the same
 * rule). At most `METRICS_MAX_GROUPS` distinct groups per process; every key beyond them, or matching
 * nothing, is `other`. This keeps the number of series bounded however many distinct keys the nodes see.
 */
export class GroupLimiter {
  private readonly groups = new Set<string>();
  constructor(
    private readonly pattern: RegExp,
    private readonly maxGroups: number,
  ) {}

  groupOf(resource: string): string {
    const group = lockGroup(this.pattern, resource);
    if (group === OTHER_GROUP) return OTHER_GROUP;
    if (this.groups.has(group)) return group;
    if (this.groups.size >= this.maxGroups) return OTHER_GROUP;
    this.groups.add(group);
    return group;
  }

  get size(): number {
    return this.groups.size;
  }
}

export function metricGroup(resource: string): string {
  const limiter = singleton("metrics-groups", () => {
    const config = getConfig();
    return new GroupLimiter(statelessPattern(config.metricsGroupPattern), config.metricsMaxGroups);
  });
  return limiter.groupOf(resource);
}
