import "server-only";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type Metric } from "prom-client";
import { singleton } from "./global";

/**
 * One registry per process, kept on globalThis, with get-or-create metrics: hot reload and the separate
 * route bundles never hit prom-client's "already registered".
 */
export function getRegistry(): Registry {
  return singleton("metrics-registry", () => {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: "lockscope_" });
    return registry;
  });
}

function getOrCreate<T extends Metric>(name: string, create: (registry: Registry) => T): T {
  const registry = getRegistry();
  const existing = registry.getSingleMetric(name);
  if (existing) return existing as T;
  return create(registry);
}

export function counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
  return getOrCreate(name, (registry) => new Counter<L>({ name, help, labelNames, registers: [registry] }));
}

export function gauge<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
  return getOrCreate(name, (registry) => new Gauge<L>({ name, help, labelNames, registers: [registry] }));
}

export function histogram<L extends string>(name: string, help: string, labelNames: readonly L[], buckets: number[]): Histogram<L> {
  return getOrCreate(name, (registry) => new Histogram<L>({ name, help, labelNames, buckets, registers: [registry] }));
}

/** Called by the route wrapper for every request; `route` is the route's pattern, never a lock key. */
export function observeHttpRequest(route: string, method: string, status: number, seconds: number): void {
  const labels = { route, method, status: String(status) };
  counter("lockscope_http_requests_total", "HTTP requests answered, by route pattern, method and status.", ["route", "method", "status"]).inc(labels);
  histogram(
    "lockscope_http_request_duration_seconds",
    "Time to produce an HTTP response (for streams: until the stream opened).",
    ["route", "method"],
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  ).observe({ route, method }, seconds);
}
