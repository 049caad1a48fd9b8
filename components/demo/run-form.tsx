"use client";

import { useState, type FormEvent } from "react";
import { STRATEGIES, type RunSettings, type Strategy } from "@/lib/lab/settings";
import type { FaultMode, LabInfo } from "@/lib/lab/types";
import styles from "./lab.module.css";

export const STRATEGY_TEXT: Record<Strategy, string> = {
  none: "No lock: read, work, write back (the race)",
  naive: "Naive SETNX lock on node 0",
  redlock: "Redlock over every node",
  "redlock-fenced": "Redlock, stock written only with a current fence",
  atomic: "Atomic Lua decrement, no lock (the ceiling)",
};

/** What each fault kind does, in the mode the run will use (see describeFault for the run's own account). */
const FAULT_KIND_TEXT: Record<FaultMode, Record<"kill" | "pause", string>> = {
  process: { kill: "kill (crash, restarts empty)", pause: "pause (stops answering)" },
  connections: {
    kill: "kill (cuts the lab workers' connections to it; the node keeps running, with its keys)",
    pause: "pause (holds the lab workers' commands to it; the node keeps running)",
  },
};

/** The form's fields, as typed (strings), so a half-typed number never fights the input. */
interface Fields {
  strategy: Strategy;
  stock: string;
  workers: string;
  orders: string;
  ttlMs: string;
  workMs: string;
  pauseOn: boolean;
  pauseProbability: string;
  pauseMs: string;
  faultOn: boolean;
  faultNode: string;
  faultKind: "kill" | "pause";
  faultAtMs: string;
  faultForMs: string;
}

export function fieldsOf(s: RunSettings): Fields {
  return {
    strategy: s.strategy,
    stock: String(s.stock),
    workers: String(s.workers),
    orders: s.orders === undefined ? "" : String(s.orders),
    ttlMs: String(s.ttlMs),
    workMs: String(s.workMs),
    pauseOn: s.pause !== undefined,
    pauseProbability: String(s.pause?.probability ?? 0.05),
    pauseMs: String(s.pause?.ms ?? 500),
    faultOn: s.fault !== undefined,
    faultNode: String(s.fault?.node ?? 1),
    faultKind: s.fault?.kind ?? "kill",
    faultAtMs: String(s.fault?.atMs ?? 1000),
    faultForMs: s.fault?.forMs === undefined ? "" : String(s.fault.forMs),
  };
}

/** Builds the request body; the server checks every limit and answers 422 with the reason. */
function settingsOf(f: Fields): RunSettings {
  const num = (text: string) => (text.trim() === "" ? Number.NaN : Number(text));
  return {
    strategy: f.strategy,
    stock: num(f.stock),
    workers: num(f.workers),
    ...(f.orders.trim() !== "" ? { orders: num(f.orders) } : {}),
    ttlMs: num(f.ttlMs),
    workMs: num(f.workMs),
    ...(f.pauseOn ? { pause: { probability: num(f.pauseProbability), ms: num(f.pauseMs) } } : {}),
    ...(f.faultOn
      ? {
          fault: {
            node: num(f.faultNode),
            kind: f.faultKind,
            atMs: num(f.faultAtMs),
            ...(f.faultForMs.trim() !== "" ? { forMs: num(f.faultForMs) } : {}),
          },
        }
      : {}),
  };
}

interface Props {
  initial: RunSettings;
  /** Bumped by the page when a preset loads new settings into the form. */
  version: number;
  /** The nodes the lab runs on and how a fault acts on them; null while unknown (no fault can be set up yet). */
  lab: Pick<LabInfo, "deployment" | "nodes" | "faultMode"> | null;
  disabled: boolean;
  onSubmit: (settings: RunSettings) => void;
}

export function RunForm(props: Props) {
  // Remounted (key) when a preset is loaded, so the fields start from the preset.
  return <RunFormFields key={props.version} {...props} />;
}

function RunFormFields({ initial, lab, disabled, onSubmit }: Props) {
  const faultMode = lab?.faultMode ?? null;
  const [f, setF] = useState<Fields>(() => fieldsOf(initial));
  const set = <K extends keyof Fields>(key: K) => (value: Fields[K]) => setF((old) => ({ ...old, [key]: value }));
  const text = (key: keyof Fields) => ({
    value: f[key] as string,
    onChange: (e: { target: { value: string } }) => set(key)(e.target.value),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    onSubmit(settingsOf(f));
  };
  // Node 0 holds the stock and cannot be faulted; the nodes are the lab's own deployment's, not every deployment's.
  const faultNodes = Array.from({ length: Math.max(0, (lab?.nodes ?? 0) - 1) }, (_, i) => i + 1);

  return (
    <form className={styles.form} onSubmit={submit} aria-label="Run settings">
      <fieldset disabled={disabled} className={styles.fieldset}>
        {/* With several deployments the lab runs on the first its workers reach by URL: say which, or a run is read as another's. */}
        {lab && (
          <p className={`${styles.wide} ${styles.hint}`}>
            Runs on deployment <strong>{lab.deployment}</strong>: {lab.nodes} lock {lab.nodes === 1 ? "node" : "nodes"} (node-0 holds the stock).
          </p>
        )}
        <label className={styles.wide}>
          Strategy
          <select value={f.strategy} onChange={(e) => set("strategy")(e.target.value as Strategy)}>
            {STRATEGIES.map((s) => (
              <option key={s} value={s}>
                {s}: {STRATEGY_TEXT[s]}
              </option>
            ))}
          </select>
        </label>
        <label>
          Stock
          <input type="number" min={1} max={100000} required {...text("stock")} />
        </label>
        <label>
          Workers
          <input type="number" min={1} max={500} required {...text("workers")} />
        </label>
        <label>
          Orders <span className={styles.hint}>(empty: until sold out)</span>
          <input type="number" min={1} {...text("orders")} />
        </label>
        <label>
          Lock TTL (ms)
          <input type="number" min={50} max={60000} required {...text("ttlMs")} />
        </label>
        <label>
          Work per order (ms)
          <input type="number" min={0} max={10000} required {...text("workMs")} />
        </label>

        <div className={styles.group}>
          <label className={styles.check}>
            <input type="checkbox" checked={f.pauseOn} onChange={(e) => set("pauseOn")(e.target.checked)} />
            Inject pauses (a holder stalls, like a GC pause)
          </label>
          {f.pauseOn && (
            <div className={styles.row}>
              <label>
                Probability per order
                {/* Any chance from 0 to 1, as the API takes it: one order in 250 (0.004) is a pause rate worth trying. */}
                <input type="number" min={0} max={1} step="any" {...text("pauseProbability")} />
              </label>
              <label>
                Pause (ms)
                <input type="number" min={1} max={60000} {...text("pauseMs")} />
              </label>
            </div>
          )}
        </div>

        <div className={styles.group}>
          <label className={styles.check}>
            {/* Without a node to fault it can only be switched off (a preset's fault), never on. */}
            <input type="checkbox" checked={f.faultOn} disabled={faultNodes.length === 0 && !f.faultOn} onChange={(e) => set("faultOn")(e.target.checked)} />
            Node fault {lab && faultNodes.length === 0 && <span className={styles.hint}>(needs two nodes or more)</span>}
          </label>
          {f.faultOn && (
            <div className={styles.row}>
              <label>
                Node
                <select value={f.faultNode} onChange={(e) => set("faultNode")(e.target.value)}>
                  {faultNodes.map((n) => (
                    <option key={n} value={String(n)}>
                      node-{n}
                    </option>
                  ))}
                </select>
              </label>
              <label>
                Kind
                <select value={f.faultKind} onChange={(e) => set("faultKind")(e.target.value as "kill" | "pause")}>
                  <option value="kill">{faultMode ? FAULT_KIND_TEXT[faultMode].kill : "kill"}</option>
                  <option value="pause">{faultMode ? FAULT_KIND_TEXT[faultMode].pause : "pause"}</option>
                </select>
              </label>
              <label>
                At (ms)
                <input type="number" min={0} {...text("faultAtMs")} />
              </label>
              <label>
                For (ms) <span className={styles.hint}>(empty: until the end)</span>
                <input type="number" min={1} {...text("faultForMs")} />
              </label>
            </div>
          )}
          {f.faultOn && faultMode === "connections" && (
            <p className={styles.hint}>This console did not start these nodes, so a fault never touches them: it acts on the lab workers&apos; own connections.</p>
          )}
        </div>
        <div className={styles.actions}>
          <button type="submit" className="button primary">
            Start run
          </button>
        </div>
      </fieldset>
    </form>
  );
}
