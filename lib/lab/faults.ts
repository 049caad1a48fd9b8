import type { NodeSwitch } from "./connections";
import type { RunSettings } from "./settings";
import type { Worker } from "./strategy";
import type { FaultMode, FaultReport } from "./types";
import { errorText } from "../echoed-arguments";

/** Acts on the processes of nodes this program started itself (SIGKILL then restart, SIGSTOP then SIGCONT). */
export interface NodeProcessControl {
  kill(index: number): Promise<void>;
  restart(index: number): Promise<void>;
  pause(index: number): void;
  resume(index: number): void;
}

/** What the fault acts on, and what it reads of its run. */
export interface FaultEnvironment {
  processControl: NodeProcessControl | null;
  switches: readonly NodeSwitch[];
  workers: () => readonly Worker[];
  /** The run's notes, where a fault that failed says so. */
  notes: string[];
  /** performance.now() at the run's start, 0 before. */
  startedAt: () => number;
  /** ms from the workers' start to their stop (to now while they run): when the sale ended, for a fault it outran. */
  saleTimeMs: () => number;
  /** The run is still running (not halted, not stopping). */
  mayStart: () => boolean;
}

/** How long the end of a cut waits for a connection it closed to finish closing (a stalled node may never answer the close). */
const CUT_CLOSE_WAIT_MS = 2_000;


/**
 * The run's injected fault: a node killed (then restarted) or paused (then continued) when the run owns
 * its process, else the workers' own connections cut or stalled; at `atMs`, for `forMs` or until the end.
 */
export class FaultInjector {
  readonly report: FaultReport | null;
  #active = false;
  #timers: Array<ReturnType<typeof setTimeout>> = [];
  #work: Promise<void> = Promise.resolve();
  /** The workers' connections a cut closed, each with when it has finished closing. */
  #cut: Array<{ client: Worker["clients"][number]; closed: Promise<void> }> = [];

  constructor(
    private readonly fault: RunSettings["fault"],
    readonly mode: FaultMode,
    private readonly env: FaultEnvironment,
  ) {
    this.report = fault
      ? { node: fault.node, kind: fault.kind, mode, startedAtMs: null, endedAtMs: null, description: describeFault(fault, mode, null) }
      : null;
  }

  /** Clears the timers not yet fired; the run has ended, so a fault that never started says so. */
  cancel(): void {
    for (const timer of this.#timers) clearTimeout(timer);
    const report = this.report;
    if (this.fault && report && report.startedAtMs === null) {
      // The sale's end, not now: reading the stock at the end and undoing the run can take seconds past it.
      const endedAtMs = this.env.startedAt() === 0 ? 0 : Math.round(this.env.saleTimeMs());
      report.description = describeFault(this.fault, this.mode, report, endedAtMs);
    }
  }

  /** Ends the fault, noting (never throwing) when the node could not be brought back. */
  endOrNote(): Promise<void> {
    return this.end().catch((error: unknown) => {
      this.env.notes.push(`Could not bring node ${this.report?.node} back: ${errorText(error)}`);
    });
  }

  /** Arms the fault's start (and end) timers; the run calls it when its workers start. */
  schedule(): void {
    const fault = this.fault;
    if (!fault) return;
    this.#timers.push(
      setTimeout(() => {
        this.#work = this.#work.then(() => this.#start());
      }, fault.atMs),
    );
    if (fault.forMs !== undefined) {
      this.#timers.push(
        setTimeout(() => {
          void this.endOrNote();
        }, fault.atMs + fault.forMs),
      );
    }
  }

  async #start(): Promise<void> {
    const fault = this.fault;
    const report = this.report;
    if (!fault || !report || this.#active || !this.env.mayStart()) return;
    this.#active = true;
    report.startedAtMs = Math.round(performance.now() - this.env.startedAt());
    const control = this.env.processControl;
    try {
      if (control) {
        if (fault.kind === "kill") await control.kill(fault.node);
        else control.pause(fault.node);
      } else if (fault.kind === "kill") {
        // Cut: the workers' connections to the node close and refuse commands until the fault ends. A
        // connection is closed ("end") only once its socket is: the end of the cut waits for that.
        this.#cut = this.env.workers().flatMap((worker) => {
          const client = worker.clients[fault.node];
          if (!client) return [];
          const closed = client.status === "end" ? Promise.resolve() : new Promise<void>((resolve) => client.once("end", () => resolve()));
          client.disconnect();
          return [{ client, closed }];
        });
      } else {
        this.env.switches[fault.node]!.stall();
      }
    } catch (error) {
      this.env.notes.push(`The fault on node ${fault.node} failed: ${errorText(error)}`);
    }
    report.description = describeFault(fault, this.mode, report);
  }

  /** Ends the fault (idempotent), after any fault step already under way. */
  end(): Promise<void> {
    const step = this.#work.then(() => this.#restore());
    this.#work = step.catch(() => {});
    return step;
  }

  async #restore(): Promise<void> {
    const fault = this.fault;
    const report = this.report;
    if (!fault || !report || !this.#active) return;
    this.#active = false;
    const control = this.env.processControl;
    if (control) {
      if (fault.kind === "kill") await control.restart(fault.node);
      else control.resume(fault.node);
    } else if (fault.kind === "kill") {
      const cut = this.#cut;
      this.#cut = [];
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, CUT_CLOSE_WAIT_MS)));
      try {
        await Promise.all(
          cut.map(async ({ client, closed }) => {
            // A short cut ends before its sockets have closed: reconnecting a client still "ready" then did
            // nothing, and the close that came next left it cut until the run ended.
            await Promise.race([closed, late]);
            if (client.status === "connecting" || client.status === "connect" || client.status === "ready") return;
            await client.connect().catch(() => {});
          }),
        );
      } finally {
        clearTimeout(timer);
      }
    } else {
      this.env.switches[fault.node]!.resume();
    }
    report.endedAtMs = this.env.startedAt() === 0 ? null : Math.round(performance.now() - this.env.startedAt());
    report.description = describeFault(fault, this.mode, report);
  }
}

/** `runEndedAtMs`: the run ended then (ms since its workers started) without the fault having started. */
export function describeFault(fault: NonNullable<RunSettings["fault"]>, mode: FaultMode, report: FaultReport | null, runEndedAtMs?: number): string {
  const span = fault.forMs === undefined ? "until the run ends" : `for ${fault.forMs} ms`;
  const notOwned = "(the console does not own that node's process, so the node itself keeps running)";
  let what: string;
  if (mode === "process") {
    what =
      fault.kind === "kill"
        ? `Kills node ${fault.node}'s redis-server (SIGKILL) at ${fault.atMs} ms and restarts it, empty, ${fault.forMs === undefined ? "when the run ends" : `${fault.forMs} ms later`}`
        : `Stops node ${fault.node}'s redis-server (SIGSTOP) at ${fault.atMs} ms ${span}, then continues it (SIGCONT)`;
  } else {
    what =
      fault.kind === "kill"
        ? `Cuts the lab workers' own connections to node ${fault.node} at ${fault.atMs} ms ${span} ${notOwned}`
        : `Stalls the lab workers' own commands to node ${fault.node} at ${fault.atMs} ms ${span} ${notOwned}`;
  }
  if (!report || report.startedAtMs === null) {
    return runEndedAtMs === undefined ? `${what}.` : `${what}; it never happened: the run ended at ${runEndedAtMs} ms, before it was due.`;
  }
  const when = report.endedAtMs === null ? `; started at ${report.startedAtMs} ms` : `; it lasted from ${report.startedAtMs} to ${report.endedAtMs} ms`;
  return `${what}${when}.`;
}
