import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { METRIC_CATALOG, getRegistry } from "@/server/metrics";

const ROOT = path.resolve(import.meta.dirname, "../..");
const read = (file: string) => readFileSync(path.join(ROOT, file), "utf8");

interface Target {
  expr?: string;
  refId?: string;
  legendFormat?: string;
}
interface Panel {
  id: number;
  type: string;
  title: string;
  description?: string;
  targets?: Target[];
  panels?: Panel[];
  gridPos?: { h: number; w: number; x: number; y: number };
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; query?: unknown }> };
}

/** The series names a PromQL expression or ops file refers to (histograms through their _bucket/_sum/_count). */
function metricNames(text: string): string[] {
  const names = new Set<string>();
  for (const [name] of text.matchAll(/\blockscope_[a-z0-9_]+/g)) names.add(name.replace(/_(bucket|sum|count)$/, ""));
  return [...names].sort();
}

/**
 * The labels each metric the console exports carries: the catalog's, and those of the lock history's three
 * (made only with AUDIT_DATABASE_URL, in server/history/service.ts). Node.js's process metrics are left out: the
 * shipped queries read them by name alone.
 */
const METRIC_LABELS = new Map<string, readonly string[]>([
  ...METRIC_CATALOG.map((d): [string, readonly string[]] => [d.name, d.labels]),
  ["lockscope_history_events_total", ["outcome"]],
  ["lockscope_history_write_failures_total", []],
  ["lockscope_history_queue_events", []],
]);

/** Labels every series has once scraped (`job`, `instance`), and a histogram's buckets (`le`). */
const SCRAPE_LABELS = ["job", "instance", "le"];

/**
 * The labels a PromQL expression selects, groups or joins by (`{x="…"}`, `by (x)`, `on (x)`, `group_left (x)`…),
 * with those `shown` (a legend's `{{x}}`, an annotation's `$labels.x`), that no metric it names carries: a label
 * that does not exist matches nothing, groups nothing and shows nothing, silently.
 */
function unknownLabels(expr: string, shown: readonly string[] = []): string[] {
  const carried = new Set(SCRAPE_LABELS);
  for (const name of metricNames(expr)) for (const label of METRIC_LABELS.get(name) ?? []) carried.add(label);
  const used = new Set(shown);
  for (const [, list] of expr.matchAll(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g)) {
    for (const label of list!.split(",").map((l) => l.trim()).filter(Boolean)) used.add(label);
  }
  for (const [, matchers] of expr.matchAll(/\{([^{}]*)\}/g)) for (const [, label] of matchers!.matchAll(/([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)/g)) used.add(label!);
  return [...used].filter((label) => !carried.has(label)).sort();
}

async function exportedNames(): Promise<Set<string>> {
  const metrics = await getRegistry().getMetricsAsJSON();
  return new Set(metrics.map((m) => m.name));
}

describe("the Grafana dashboard", () => {
  const dashboard = JSON.parse(read("ops/grafana/lockscope.json")) as Dashboard;
  const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);

  it("is a dashboard with a stable uid, panels with unique ids and a query on every graph", () => {
    expect(dashboard.uid).toBe("lockscope");
    expect(dashboard.title).toMatch(/Lockscope/);
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const panel of panels.filter((p) => p.type !== "row")) {
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets ?? []) expect(target.expr, panel.title).toMatch(/lockscope_|time\(\)/);
      expect(panel.gridPos).toBeDefined();
    }
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(["datasource", "job", "instance"]);
  });

  it("queries only metrics the console exports", async () => {
    const exported = await exportedNames();
    // Exported only with AUDIT_DATABASE_URL (server/history/service.ts); tests/integration/audit-postgres.test.ts reads them.
    for (const name of ["lockscope_history_events_total", "lockscope_history_queue_events", "lockscope_history_write_failures_total"]) exported.add(name);
    const queried = metricNames(panels.flatMap((p) => p.targets ?? []).map((t) => t.expr ?? "").join("\n"));
    expect(queried.length).toBeGreaterThan(20);
    expect(queried.filter((name) => !exported.has(name))).toEqual([]);
  });

  it("shows the locks, the nodes, the engine and the console", () => {
    const queried = metricNames(read("ops/grafana/lockscope.json"));
    for (const name of [
      "lockscope_locks_held",
      "lockscope_node_up",
      "lockscope_lock_contention_events_total",
      "lockscope_redlock_acquire_attempts_total",
      "lockscope_redlock_hold_seconds",
      "lockscope_http_requests_total",
      "lockscope_lab_lost_updates_total",
    ]) {
      expect(queried).toContain(name);
    }
  });
  it("selects, groups and shows only labels the metrics it queries carry", () => {
    const targets = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, expr: t.expr ?? "", legend: t.legendFormat ?? "" })));
    expect(targets.length).toBeGreaterThan(40);
    const wrong = targets
      .map(({ panel, expr, legend }) => ({ panel, labels: unknownLabels(expr.replace(/\$[a-z_]+/g, "x"), [...legend.matchAll(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g)].map((m) => m[1]!)) }))
      .filter((t) => t.labels.length > 0);
    expect(wrong).toEqual([]);
  });

  it("shows a rate of seconds (CPU time per second) as a share, not as a duration", () => {
    // `rate(x_seconds_total)` is seconds per second: 0.05 is 5 % of a core, which the unit `s` would show as "50 ms".
    const unitOf = (panel: Panel & { fieldConfig?: { defaults?: { unit?: string }; overrides?: Array<{ matcher: { id: string; options: string }; properties: Array<{ id: string; value: unknown }> }> } }, refId: string) =>
      (panel.fieldConfig?.overrides ?? []).find((o) => o.matcher.id === "byFrameRefID" && o.matcher.options === refId)?.properties.find((p) => p.id === "unit")?.value ?? panel.fieldConfig?.defaults?.unit;
    const rates = panels.flatMap((p) => (p.targets ?? []).filter((t) => /\brate\(\w+_seconds_total\b/.test(t.expr ?? "")).map((t) => ({ panel: p.title, refId: t.refId ?? "", unit: unitOf(p, t.refId ?? "") })));
    expect(rates.length).toBeGreaterThan(0);
    expect(rates.filter((r) => r.unit !== "percentunit")).toEqual([]);
  });

  it("shows, on a panel that names an alert, a metric that alert watches", () => {
    // Each rule's expression, by alert name.
    const rules = new Map(
      read("ops/prometheus/alerts.yml")
        .split(/^\s*- alert: /m)
        .slice(1)
        .map((block): [string, string] => [block.split("\n")[0]!, /^\s+expr: (\|\n(?:\s{10,}.*\n)+|.*\n)/m.exec(block)?.[1] ?? ""]),
    );
    const claims = panels.flatMap((p) => [...(p.description ?? "").matchAll(/\bLockscope[A-Z][A-Za-z]+/g)].map(([alert]) => ({ panel: p.title, alert, queried: metricNames((p.targets ?? []).map((t) => t.expr ?? "").join("\n")) })));
    expect(claims.length).toBeGreaterThan(5);
    const unrelated = claims.filter(({ alert, queried }) => {
      const watched = metricNames(rules.get(alert) ?? "");
      return watched.length === 0 || !queried.some((name) => watched.includes(name));
    });
    expect(unrelated.map(({ panel, alert }) => `${panel}: ${alert}`)).toEqual([]);
  });

  it("colours a stat tile green only when what it shows is healthy, and never red for a healthy figure", () => {
    type Step = { color: string; value: number | null };
    type Field = { thresholds?: { steps: Step[] }; mappings?: Array<{ type: string; options: Record<string, { color?: string }> }> };
    type StatPanel = Panel & { options?: { colorMode?: string }; fieldConfig?: { defaults?: Field; overrides?: Array<{ matcher: { id: string; options: string }; properties: Array<{ id: string; value: unknown }> }> } };
    // Grafana's thresholds when a panel sets none: green, red from 80.
    const GRAFANA_DEFAULT: Step[] = [{ color: "green", value: null }, { color: "red", value: 80 }];
    /** The colour Grafana gives the tile of the series of `refId` at `value` (value mappings first, then thresholds). */
    const colourOf = (title: string, refId: string, value: number): string => {
      const panel: StatPanel | undefined = panels.find((p) => p.title === title);
      if (!panel) throw new Error(`no panel ${title}`);
      expect(panel.type, title).toBe("stat");
      if (panel.options?.colorMode === "none") return "none";
      const field: Field = { ...panel.fieldConfig?.defaults };
      for (const o of panel.fieldConfig?.overrides ?? []) {
        if (o.matcher.id !== "byFrameRefID" || o.matcher.options !== refId) continue;
        for (const p of o.properties) if (p.id === "thresholds" || p.id === "mappings") Object.assign(field, { [p.id]: p.value });
      }
      for (const m of field.mappings ?? []) if (m.type === "value" && m.options[String(value)]?.color) return m.options[String(value)]!.color!;
      const steps = field.thresholds?.steps ?? GRAFANA_DEFAULT;
      return steps.filter((s) => s.value === null || value >= s.value).at(-1)!.color;
    };
    const refOf = (title: string, legend: RegExp) => {
      const target = panels.find((p) => p.title === title)?.targets?.find((t) => legend.test(t.legendFormat ?? ""));
      if (!target?.refId) throw new Error(`no series ${legend} on ${title}`);
      return target.refId;
    };
    const healthy = (title: string, legend: RegExp, value: number) => colourOf(title, refOf(title, legend), value);
    // What the lock-safety alerts fire on is not shown green; what is fine is not shown red.
    const safety = "Node persistence and restart hazard";
    expect(healthy(safety, /\{\{kind\}\}$/, 0)).not.toBe("green");
    expect(healthy(safety, /\{\{kind\}\}$/, 1)).toBe("green");
    expect(healthy(safety, /restart hazard$/, 1)).not.toBe("green");
    expect(healthy(safety, /restart hazard$/, 0)).toBe("green");
    expect(healthy(safety, /restart hazards \(30 min\)$/, 1)).not.toBe("green");
    expect(healthy(safety, /restart hazards \(30 min\)$/, 0)).toBe("green");
    const counts = "Locks without TTL, below quorum, past TTL";
    for (const legend of [/^no TTL/, /^below quorum/]) {
      expect(healthy(counts, legend, 3), String(legend)).not.toBe("green");
      expect(healthy(counts, legend, 0), String(legend)).toBe("green");
    }
    // Locks ending by their TTL are past it for the moment Redis takes to reclaim their keys: under a steady flow of
    // them the count is above 0 at most scrapes on a healthy console. What LockscopeLockStuckPastTtl fires on is how
    // long the oldest has been past it (the ages' tile below), so the count is coloured neither good nor bad.
    for (const n of [0, 3, 23]) expect(["none", "blue", "text", "transparent"]).toContain(healthy(counts, /^past TTL/, n));
    // Ages: against the alerts' thresholds (15 minutes held, 2 minutes past the TTL), not Grafana's 80.
    const ages = "Oldest lock present, longest past its TTL";
    expect(healthy(ages, /^oldest present/, 300)).toBe("green");
    expect(healthy(ages, /^oldest present/, 1_200)).not.toBe("green");
    expect(healthy(ages, /^past its TTL/, 30)).toBe("green");
    expect(healthy(ages, /^past its TTL/, 300)).not.toBe("green");
    expect(healthy("Oldest held lock", /^age/, 300)).toBe("green");
    expect(healthy("Oldest held lock", /^age/, 1_200)).not.toBe("green");
    // A node whose notifications are unavailable is not shown green; one whose are on is.
    expect(healthy("Keyspace notifications", /^(?!.*unavailable).*: \{\{status\}\}$/, 1)).toBe("green");
    expect(healthy("Keyspace notifications", /unavailable/, 1)).not.toBe("green");
    // Figures that are neither good nor bad are not coloured as either.
    expect(["none", "blue", "text"]).toContain(healthy("Live streams open", /./, 200));
    expect(["none", "blue", "text"]).toContain(healthy("Nodes up", /^configured/, 100));
  });

  it("has a panel for every metric an alert rule watches: the on-call paged by one finds it on the dashboard", () => {
    const queried = new Set(metricNames(panels.flatMap((p) => p.targets ?? []).map((t) => t.expr ?? "").join("\n")));
    // The rules' expressions only (their annotations may name a metric to look at, as a description does).
    const exprs = [...read("ops/prometheus/alerts.yml").matchAll(/^\s+expr: (\|\n(?:\s{10,}.*\n)+|.*\n)/gm)].map((m) => m[1]!);
    expect(exprs.length).toBeGreaterThanOrEqual(21);
    expect(metricNames(exprs.join("\n")).filter((name) => !queried.has(name))).toEqual([]);
  });
});

describe("the alert rules", () => {
  it("name only metrics the console exports", async () => {
    const exported = await exportedNames();
    // Exported only with AUDIT_DATABASE_URL (server/history/service.ts); tests/integration/audit-postgres.test.ts reads them.
    for (const name of ["lockscope_history_events_total", "lockscope_history_queue_events", "lockscope_history_write_failures_total"]) exported.add(name);
    const named = metricNames(read("ops/prometheus/alerts.yml"));
    expect(named.length).toBeGreaterThan(8);
    expect(named.filter((name) => !exported.has(name))).toEqual([]);
  });

  it("select, group and name in their messages only labels the metrics they query carry", () => {
    const rules = read("ops/prometheus/alerts.yml")
      .split(/^\s*- alert: /m)
      .slice(1)
      .map((block) => {
        const alert = block.split("\n")[0]!;
        const expr = /^\s+expr: (\|\n(?:\s{10,}.*\n)+|.*\n)/m.exec(block)?.[1] ?? "";
        // The queries the summaries and descriptions run (`printf "max(lockscope_nodes{job=%q, …})" … | query`).
        const queries = [...block.matchAll(/printf \\"((?:[^"\\]|\\[^"])*)\\"/g)].map((m) => m[1]!);
        const shown = [...block.matchAll(/\$labels\.([A-Za-z_][A-Za-z0-9_]*)/g), ...block.matchAll(/\| label \\"([A-Za-z_][A-Za-z0-9_]*)\\"/g)].map((m) => m[1]!);
        return { alert, expr, queries, shown };
      });
    expect(rules.length).toBeGreaterThanOrEqual(21);
    expect(rules.every((r) => r.expr !== "")).toBe(true);
    const wrong = rules
      .map(({ alert, expr, queries, shown }) => ({ alert, labels: unknownLabels([expr, ...queries].join("\n"), shown) }))
      .filter((r) => r.labels.length > 0);
    expect(wrong).toEqual([]);
  });

  it("tell the on-call where to look: every description names a console route that exists", () => {
    // `GET /path?query` in a description, its query and any template left out: a route or a page of app/.
    const routeExists = (route: string) => {
      const segments = route.replace(/^\//, "").split("/").filter(Boolean);
      const dir = path.join(ROOT, "app", ...segments);
      return existsSync(path.join(dir, "route.ts")) || existsSync(path.join(dir, "page.tsx"));
    };
    const rules = [...read("ops/prometheus/alerts.yml").matchAll(/- alert: (\S+)\n[\s\S]*?description: "((?:[^"\\]|\\.)*)"/g)].map((m) => ({ alert: m[1]!, description: m[2]! }));
    expect(rules.length).toBeGreaterThanOrEqual(21);
    const without = rules.filter(({ description }) => {
      const routes = [...description.matchAll(/\bGET (\/[A-Za-z0-9/_-]*)/g)].map((m) => m[1]!);
      return routes.length === 0 || !routes.every(routeExists);
    });
    expect(without.map((r) => r.alert)).toEqual([]);
  });

  it("have a unit test in alerts.test.yml for every alert", () => {
    const alerts = [...read("ops/prometheus/alerts.yml").matchAll(/^\s*- alert: (\S+)$/gm)].map((m) => m[1]);
    const tested = new Set([...read("ops/prometheus/alerts.test.yml").matchAll(/alertname: (\S+)$/gm)].map((m) => m[1]));
    expect(alerts.length).toBeGreaterThanOrEqual(8);
    expect(alerts.filter((a) => !tested.has(a))).toEqual([]);
  });
});
