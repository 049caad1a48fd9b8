"use client";

import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useMemo, useRef, useState } from "react";
import { LAB_PRESETS, type LabPreset } from "@/lib/lab/presets";
import { LOCKING_STRATEGIES, type RunSettings } from "@/lib/lab/settings";
import type { RunRecord } from "@/lib/lab/types";
import { apiFetch, ApiRequestError, errorText } from "../api-client";
import { useIsOperator, useSession } from "../session";
import { explainRun, presetNote, stockOf, stopText } from "./explain";
import { LabChart } from "./lab-chart";
import styles from "./lab.module.css";
import { ResultsTable } from "./results-table";
import { RunForm, STRATEGY_TEXT } from "./run-form";
import { RUNS_KEY, runKey, useRun, useRuns } from "./use-lab";
import { MessageText } from "../message-text";

interface Batch {
  name: string;
  /** Runs still to start, in order. */
  queue: RunSettings[];
  ids: string[];
  total: number;
}

/** The Demo page: presets, the settings form, the running experiment live, and every run side by side. */
export function LabClient() {
  const operator = useIsOperator();
  const session = useSession();
  const queryClient = useQueryClient();
  const runs = useRuns();
  const lab = runs.data?.lab ?? null;
  const [watching, setWatching] = useState<string | null>(null);
  const [batch, setBatch] = useState<Batch | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [formSettings, setFormSettings] = useState<RunSettings>(LAB_PRESETS[0]!.runs[0]!);
  const [formVersion, setFormVersion] = useState(0);
  const starting = useRef(false);
  const liveHeading = useRef<HTMLHeadingElement>(null);
  /** Runs whose end is still to be announced: started here, or seen running. */
  const awaitingEnd = useRef(new Set<string>());
  const [announcement, setAnnouncement] = useState("");

  // Follow a run already going when the page opens (started by someone else, or before a reload).
  const runningElsewhere = runs.data?.runs.find((r) => r.status === "running")?.id ?? null;
  useEffect(() => {
    if (watching === null && runningElsewhere !== null) setWatching(runningElsewhere);
  }, [watching, runningElsewhere]);

  const active = useRun(watching);
  const run = active.data ?? null;
  const running = run?.status === "running";

  async function start(settings: RunSettings): Promise<string | null> {
    setError(null);
    try {
      const { id } = await apiFetch<{ id: string }>("/api/demo/runs", { method: "POST", body: JSON.stringify(settings) });
      awaitingEnd.current.add(id);
      setWatching(id);
      await queryClient.invalidateQueries({ queryKey: RUNS_KEY });
      return id;
    } catch (e) {
      if (e instanceof ApiRequestError && e.status === 409) {
        const runningId = (e.details as { runningId?: string } | undefined)?.runningId;
        if (runningId) setWatching(runningId);
      }
      setError(errorText(e));
      return null;
    }
  }

  // A batch (a multi-run preset) starts its next run when the one it watches has ended.
  useEffect(() => {
    if (!batch || batch.queue.length === 0 || starting.current) return;
    if (watching !== null && (!run || run.id !== watching || run.status === "running")) return;
    const [next, ...rest] = batch.queue;
    starting.current = true;
    void start(next!).then((id) => {
      starting.current = false;
      setBatch((b) => (b ? { ...b, queue: id ? rest : [], ids: id ? [...b.ids, id] : b.ids } : b));
    });
  }, [batch, run, watching]);

  useEffect(() => {
    if (run && run.status !== "running") void queryClient.invalidateQueries({ queryKey: RUNS_KEY });
  }, [run?.status, run, queryClient]);

  // The status region says when the watched run ends: the page gives no other sign to someone not looking at it.
  useEffect(() => {
    if (!run) return;
    if (run.status === "running") {
      awaitingEnd.current.add(run.id);
      return;
    }
    if (!awaitingEnd.current.delete(run.id)) return;
    const position = batch && batch.total > 1 ? batch.ids.indexOf(run.id) + 1 : 0;
    const which = position > 0 && batch ? `Run ${position} of ${batch.total} (${batch.name}), ${run.settings.strategy},` : `The ${run.settings.strategy} run`;
    const all = position > 0 && batch && position === batch.total ? ` All ${batch.total} runs have ended.` : "";
    setAnnouncement(`${which} ended: ${stopText(run)}.${all}`);
  }, [run, batch]);

  // Starting or cancelling a run disables or removes the button pressed: focus goes to the Live panel, where the run shows.
  function focusLive() {
    liveHeading.current?.focus();
  }

  function play(preset: LabPreset) {
    focusLive();
    setFormSettings(preset.runs[0]!);
    setFormVersion((v) => v + 1);
    setBatch({ name: preset.name, queue: [...preset.runs], ids: [], total: preset.runs.length });
    setWatching(null);
  }

  async function cancel() {
    if (!run) return;
    focusLive();
    setBatch((b) => (b ? { ...b, queue: [] } : b));
    try {
      await apiFetch(`/api/demo/runs/${run.id}`, { method: "DELETE" });
    } catch (e) {
      setError(errorText(e));
    }
    await queryClient.invalidateQueries({ queryKey: runKey(run.id) });
  }

  // What a preset's lesson does not hold on the nodes the lab runs on here.
  const presetNotes = new Map(LAB_PRESETS.map((p) => [p.id, lab ? presetNote(p, lab) : null]));
  const highlight = useMemo(() => new Set(batch?.ids ?? (watching ? [watching] : [])), [batch, watching]);
  const batchBusy = batch !== null && batch.queue.length > 0;

  return (
    <div className={styles.lab}>
      <section className="panel" aria-labelledby="presets-title">
        <h2 id="presets-title">Presets</h2>
        <div className={styles.presets}>
          {LAB_PRESETS.map((p) => (
            <div key={p.id} className={styles.preset}>
              <strong>{p.name}</strong>
              <p className="muted">{p.lesson}</p>
              {presetNotes.get(p.id) && <p className={styles.note}>{presetNotes.get(p.id)}</p>}
              <div className={styles.presetActions}>
                <button
                  type="button"
                  className="button primary"
                  disabled={!operator || running || batchBusy}
                  aria-label={`Run preset: ${p.name}`}
                  onClick={() => play(p)}
                >
                  Run{p.runs.length > 1 ? ` all ${p.runs.length}` : ""}
                </button>
                {p.runs.length === 1 && (
                  <button
                    type="button"
                    className="button"
                    aria-label={`Edit preset: ${p.name}`}
                    onClick={() => {
                      setFormSettings(p.runs[0]!);
                      setFormVersion((v) => v + 1);
                    }}
                  >
                    Edit
                  </button>
                )}
              </div>
            </div>
          ))}
        </div>
        {!operator && session.isSuccess && <p className="muted">Sign in with the operator token to start runs; viewers can watch them.</p>}
      </section>

      <div className={styles.columns}>
        <section className="panel" aria-labelledby="settings-title">
          <h2 id="settings-title">Settings</h2>
          <RunForm
            initial={formSettings}
            version={formVersion}
            lab={lab}
            disabled={!operator || running || batchBusy}
            onSubmit={(settings) => {
              focusLive();
              setBatch({ name: "Custom run", queue: [], ids: [], total: 1 });
              void start(settings).then((id) => {
                if (id) setBatch({ name: "Custom run", queue: [], ids: [id], total: 1 });
              });
            }}
          />
          {error && (
            <p className="error-text" role="alert">
              <MessageText text={error} />
            </p>
          )}
        </section>

        <section className="panel" aria-labelledby="live-title">
          <h2 id="live-title" ref={liveHeading} tabIndex={-1}>
            Live
          </h2>
          <p role="status" className="sr-only">
            {announcement}
          </p>
          {run ? <LiveRun run={run} batch={batch} onCancel={operator ? cancel : null} /> : <p className="muted">Start a run to watch it here.</p>}
        </section>
      </div>

      <section className="panel" aria-labelledby="results-title">
        <h2 id="results-title">Results</h2>
        <dl className={styles.glossary}>
          <div>
            <dt>Remaining</dt>
            <dd>Stock left at the end. Above 0 after selling out means a late write raised the stock again: a buyer that had read an older stock wrote it back.</dd>
          </div>
          <div>
            <dt>Lost updates</dt>
            <dd>sold − (stock − remaining): sales of a unit already sold, because two buyers wrote back the same stock (a unit sold three times counts twice).</dd>
          </div>
          <div>
            <dt>Oversold</dt>
            <dd>sold − stock, when above 0: units sold that never existed. The stock itself never goes below 0 (every buyer checks it is above 0 before writing it one lower), so overselling shows here, not in the stock.</dd>
          </div>
          <div>
            <dt>Stale writes rejected</dt>
            <dd>Fenced Redlock only: writes refused because their lock had expired and a newer holder had already used the stock. Each one is a lost update prevented.</dd>
          </div>
          <div>
            <dt>Sold/s</dt>
            <dd>Units sold per second over the run. Orders that sold nothing (a stale write refused, the stock gone) are not counted.</dd>
          </div>
          <div>
            <dt>Wait</dt>
            <dd>Time to take the lock, per order. &ldquo;No lock taken&rdquo;: no order took the lock before the run stopped, so there is no wait to show. Orders still waiting for the lock when the run stopped never took it and are not counted: the table says how many, next to the p99.</dd>
          </div>
        </dl>
        <p className="muted">Every run the lab keeps (its last 50), newest first. Pick a strategy in the table to see that run&apos;s charts and what its numbers say.</p>
        {runs.isError ? <p className="error-text"><MessageText text={runs.error.message} /></p> : <ResultsTable runs={runs.data?.runs ?? []} highlight={highlight} onSelect={running || batchBusy ? null : setWatching} />}
      </section>
    </div>
  );
}

function LiveRun({ run, batch, onCancel }: { run: RunRecord; batch: Batch | null; onCancel: (() => Promise<void>) | null }) {
  const p = run.progress;
  const pct = Math.round(p.fraction * 100);
  const series = run.series ?? [];
  const x = series.map((s) => s.t / 1000);
  const explanation = explainRun(run);
  const position = batch && batch.ids.includes(run.id) ? `Run ${batch.ids.indexOf(run.id) + 1} of ${batch.total} (${batch.name}) · ` : "";
  return (
    <div className={styles.live}>
      <div className={styles.liveHead}>
        <div>
          <strong className="mono">{run.settings.strategy}</strong> <span className="muted">{STRATEGY_TEXT[run.settings.strategy]}</span>
          <div className="muted">
            {position}
            {run.id} · {stopText(run)}
          </div>
        </div>
        {onCancel && run.status === "running" && (
          <button type="button" className="button danger" onClick={() => void onCancel()}>
            Cancel run
          </button>
        )}
      </div>
      <div className={styles.progress} role="progressbar" aria-label="Run progress" aria-valuemin={0} aria-valuemax={100} aria-valuenow={pct}>
        <div className={styles.progressFill} style={{ width: `${pct}%` }} />
      </div>
      <div className={styles.counters}>
        <span>
          sold <strong>{p.sold}</strong> of {run.settings.stock}
        </span>
        <span>stock {stockOf(run) ?? "—"}</span>
        <span>orders {p.orders}</span>
        <span>retries {p.retries}</span>
        <span>stale writes rejected {p.staleWritesRejected}</span>
        <span title="Orders that failed on a node error (a node down, a timeout) and were placed again">node errors (orders retried) {p.errors}</span>
        <span title="How long the workers ran (the results table's Duration): undoing the fault and cleaning up are not counted">{(p.elapsedMs / 1000).toFixed(1)} s</span>
      </div>
      {run.fault && (
        <p className={styles.fault}>
          <strong>Fault ({run.fault.mode === "process" ? "on the node's process" : "on the lab's connections only"}):</strong> <MessageText text={run.fault.description} />
        </p>
      )}
      {run.notes.map((n) => (
        <p key={n} className={styles.note}>
          <MessageText text={n} />
        </p>
      ))}
      {run.error && (
        <p className="error-text">
          <MessageText text={run.error} />
        </p>
      )}
      {explanation.length > 0 && (
        <div className={styles.explain}>
          <h3>What the numbers say</h3>
          <ul>
            {explanation.map((line) => (
              <li key={line}>{line}</li>
            ))}
          </ul>
        </div>
      )}
      <div className={styles.charts}>
        <LabChart key={`o-${run.id}`} title="Units sold per second" unit="sold/s" lines={[{ label: "sold/s", color: "--chart-orders" }]} data={[x, series.map((s) => s.ordersPerSec)]} />
        {LOCKING_STRATEGIES.has(run.settings.strategy) ? (
          <LabChart
            key={`w-${run.id}`}
            title="Lock wait"
            unit="ms"
            lines={[
              { label: "p50", color: "--chart-p50" },
              { label: "p99", color: "--chart-p99", dashed: true },
            ]}
            data={[x, series.map((s) => s.waitP50Ms), series.map((s) => s.waitP99Ms)]}
          />
        ) : (
          <figure className={`lab-chart ${styles.noChart}`} aria-label="Lock wait">
            <figcaption>Lock wait</figcaption>
            <p className="muted">No lock in the {run.settings.strategy} strategy: nobody waits.</p>
          </figure>
        )}
        <LabChart key={`s-${run.id}`} title="Stock level" unit="units" lines={[{ label: "stock", color: "--chart-stock" }]} data={[x, series.map((s) => s.stock)]} />
      </div>
    </div>
  );
}
