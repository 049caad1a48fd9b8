import "server-only";
import { Cluster, type Redis } from "ioredis";
import type { RedisNode } from "@/lib/redis-node";
import { newRunId, RUNS_KEPT } from "@/lib/lab/keys";
import { removeRunKeys } from "@/lib/lab/cleanup";
import { LabRun, type NodeProcessControl } from "@/lib/lab/runner";
import { checkAgainstNodes, settingsNotes, type RunSettings } from "@/lib/lab/settings";
import type { LabInfo, RunRecord, RunStatus, StopReason } from "@/lib/lab/types";
import { consoleName } from "../cluster/identity";
import { isNodesFailed, isResourceHeld, LEASE_KEYS, takeLease, type Lease } from "../cluster/lease";
import { embeddedNodesOwned } from "../config";
import { reachableByUrls } from "../deployments";
import { instrumentRedlock } from "../engine-metrics";
import { whenReady } from "../health";
import { ApiError, nodeFailureText } from "../errors";
import { peekGlobal, singleton } from "../global";
import { getLogger } from "../logger";
import { counter } from "../metrics";
import { getDeploymentNodes, type DeploymentNodes, type LockNode } from "../nodes";
import { isShuttingDown, onShutdown } from "../shutdown";
import { addRun, cancelRequested, clearCancel, dropRun, listRuns, listStoredRuns, markStale, readRun, requestCancel, saveRun, sortNewestFirst } from "./store";
import { errorText } from "@/lib/echoed-arguments";

/**
 * The console's contention lab: one run at a time across every console over the same lock nodes (the run
 * holds a lease taken with the console's own Redlock engine for as long as it lasts), its record kept on
 * node 0 (so every console instance lists it), progress written about every second, and the run stopped
 * cleanly on cancel and on shutdown.
 */

/** The lab lease's TTL; `using()` extends it while the run lasts, so only a dead console's lingers this long. */
const LAB_LEASE_TTL_MS = 10_000;
/** The lease's holder label: which run, on which console (a 409 from another console quotes it). */
const LEASE_LABEL = /^lab run (\S+) on (.+)$/;

const PROGRESS_EVERY_MS = 1000;
/** A finished run node 0 did not take is written again this often, for this long. */
const STORE_RETRY_MS = 2_000;
const STORE_RETRY_FOR_MS = 10 * 60_000;

interface ActiveRun {
  record: RunRecord;
  lease: Lease;
  run: LabRun;
  controller: AbortController;
  done: Promise<void>;
}

/**
 * The deployment the lab runs on: the first one its workers reach by URL alone (see `reachableByUrls`); where
 * none is, the first (and the lab refuses to start, saying why).
 */
function labDeployment(): DeploymentNodes {
  const all = getDeploymentNodes();
  return all.find((d) => reachableByUrls(d.deployment)) ?? (all[0] as DeploymentNodes);
}

function labNodes(): LockNode[] {
  return labDeployment().nodes;
}

const CLUSTER_REFUSAL = "The lab runs on independent lock nodes (a Redlock set or a standalone instance); this console watches a Redis Cluster.";

function stockNode(): LockNode & { client: Redis } {
  const node = labNodes()[0];
  if (!node) throw new ApiError("unavailable", "No lock nodes are configured.");
  // The lab's workers dial independent nodes by URL; a cluster client is not one of them. That never changes while
  // the console runs, so it is a refusal (422, as POST answers), not a 503 that tells the client to try again later.
  if (node.cluster || node.client instanceof Cluster) throw new ApiError("unprocessable", CLUSTER_REFUSAL);
  return node as LockNode & { client: Redis };
}

/** Node 0's console connection, or a 503 that says node 0 is needed and unreachable. */
async function historyClient() {
  const node = stockNode();
  if (!(await whenReady(node.client, 2000))) {
    throw new ApiError("unavailable", `Node 0 (${node.maskedUrl}) holds the lab's stock and run history and is not reachable right now.`);
  }
  return node.client;
}

/**
 * Reads or writes the run history on node 0; a node that fails meanwhile (its connection up, its commands
 * timing out: a stalled or overloaded node) is a 503 that says so, not a 500.
 */
async function onHistory<T>(use: (client: Redis) => Promise<T>): Promise<T> {
  const client = await historyClient();
  try {
    return await use(client);
  } catch (error) {
    if (error instanceof ApiError) throw error;
    const why = nodeFailureText(error instanceof Error ? error.message : undefined) ?? "failed (details in the console's log)";
    getLogger().warn({ err: (error as Error).message }, "the lab's run history on node 0 could not be read or written");
    throw new ApiError("unavailable", `Node 0 (${stockNode().maskedUrl}) holds the lab's stock and run history and ${why}.`);
  }
}

/** The embedded nodes, when this console started them itself (only then may the lab kill and pause them). */
function processControl(): NodeProcessControl | null {
  if (!embeddedNodesOwned()) return null;
  const nodes = peekGlobal<RedisNode[]>("embedded-nodes");
  if (!nodes) return null;
  const node = (index: number) => {
    const found = nodes[index];
    if (!found) throw new RangeError(`no embedded node ${index}`);
    return found;
  };
  return {
    kill: (index) => node(index).kill(),
    restart: async (index) => {
      await node(index).restart();
      // The launcher keeps the embedded nodes' pids on disk to reap orphans after a crash.
      peekGlobal<() => void>("embedded-pids-writer")?.();
    },
    pause: (index) => node(index).pause(),
    resume: (index) => node(index).resume(),
  };
}

function statusOf(reason: StopReason): RunStatus {
  if (reason === "cancelled" || reason === "shutdown") return "cancelled";
  if (reason === "error") return "failed";
  return "done";
}

export class Lab {
  #active: ActiveRun | null = null;
  /** The runs this console finished, newest last (the last RUNS_KEPT), served even when node 0 lost them. */
  readonly #finished = new Map<string, RunRecord>();

  constructor() {
    onShutdown("lab", 20, () => this.stopForShutdown());
  }

  /** Starts a run in the background; resolves its record once it is in the history. */
  async start(settings: RunSettings, actor: string): Promise<RunRecord> {
    if (isShuttingDown()) throw new ApiError("unavailable", "The console is shutting down; start the run on another instance.");
    this.#refuseIfBusy();
    const nodes = labNodes();
    // The workers dial the nodes' URLs with their own connections: a deployment they cannot reach that way
    // (a Cluster; Sentinel; TLS or credentials from files) is refused here rather than failing every order, and
    // before the settings are checked against its nodes, which the lab would not run on.
    const { deployment } = labDeployment();
    if (!reachableByUrls(deployment)) {
      throw new ApiError(
        "unprocessable",
        deployment.kind === "cluster"
          ? CLUSTER_REFUSAL
          : "The lab runs only on Redlock or standalone deployments reached by plain URLs (no Sentinel, TLS files or password files).",
      );
    }
    const mismatch = checkAgainstNodes(settings, nodes.length, getDeploymentNodes().length > 1 ? deployment.name : undefined);
    if (mismatch) throw new ApiError("unprocessable", `Invalid body: ${mismatch}`);
    const client = await historyClient();
    this.#refuseIfBusy();

    const id = newRunId();
    // Across consoles (and between two requests to this one): whoever holds the lease runs.
    const lease = await takeLabLease(id);
    const controller = new AbortController();
    let run: LabRun;
    try {
      run = new LabRun({
        id,
        settings,
        nodeUrls: nodes.map((n) => n.url),
        processControl: processControl(),
        signal: controller.signal,
        // The workers' clients are the nodes' in order: their errors count under the nodes' ids, made at 0 now.
        onRedlock: (redlock) => instrumentRedlock(redlock, { nodeIds: nodes.map((n) => n.id) }),
      });
    } catch (error) {
      await lease.release();
      throw error;
    }
    const now = Date.now();
    const record: RunRecord = {
      id,
      status: "running",
      settings,
      actor,
      createdAt: now,
      finishedAt: null,
      heartbeatAt: now,
      progress: run.progress(),
      notes: settingsNotes(settings, run.faultMode, nodes.length),
      ...(run.fault() ? { fault: run.fault()! } : {}),
    };
    const active: ActiveRun = { record, lease, controller, run, done: Promise.resolve() };
    this.#active = active;
    // Lost only when a quorum of nodes stayed away for longer than its TTL: another console may then start
    // a run, so this one stops rather than run alongside it.
    lease.signal.addEventListener("abort", () => {
      if (this.#active !== active) return;
      getLogger().warn({ run: id }, "the lab lease was lost (a quorum of lock nodes did not answer); stopping the run");
      controller.abort(new Error("the lab lease was lost: a quorum of lock nodes did not answer for longer than its TTL, so another console may run the lab"));
    }, { once: true });
    try {
      await onHistory((history) => addRun(history, record));
    } catch (error) {
      this.#active = null;
      // The record was sent: a node that stalled runs it once it answers again. Taking it back on the same
      // connection runs after it, so a run the caller was told did not start never shows in the history.
      dropRun(client, id).catch(() => {});
      await lease.release();
      throw error;
    }
    getLogger().info({ run: id, actor, strategy: settings.strategy, workers: settings.workers, stock: settings.stock, fault: settings.fault ?? null, faultMode: run.faultMode }, "lab run started");
    active.done = this.#drive(active);
    void this.#sweepAbandoned(client, id).catch((error: unknown) => getLogger().warn({ err: (error as Error).message }, "could not sweep abandoned lab runs"));
    return this.#snapshot(active);
  }

  #refuseIfBusy(): void {
    if (!this.#active) return;
    throw new ApiError("conflict", `Run ${this.#active.record.id} is still running on this console: wait for it or cancel it first.`, {
      runningId: this.#active.record.id,
    });
  }

  async #drive(active: ActiveRun): Promise<void> {
    const { record, run, controller } = active;
    const client = stockNode().client;
    let writing = false;
    const heartbeat = setInterval(() => {
      if (writing) return;
      writing = true;
      void (async () => {
        try {
          const snapshot = this.#snapshot(active);
          // With its chart so far: another console over the same nodes serves the run from node 0 alone.
          await saveRun(client, { ...snapshot, series: undefined }, snapshot.series ?? []);
          if (await cancelRequested(client, record.id)) controller.abort("cancelled");
        } catch {
          // Node 0 unreachable for a moment: the run itself notices when it lasts.
        } finally {
          writing = false;
        }
      })();
    }, PROGRESS_EVERY_MS);
    let finished: RunRecord;
    try {
      const outcome = await run.run();
      finished = {
        ...record,
        status: statusOf(outcome.stopReason),
        stopReason: outcome.stopReason,
        finishedAt: Date.now(),
        heartbeatAt: Date.now(),
        progress: run.progress(),
        ...(outcome.result ? { result: outcome.result } : {}),
        notes: [...record.notes, ...outcome.notes],
        ...(outcome.fault ? { fault: outcome.fault } : {}),
        ...(outcome.error !== undefined ? { error: outcome.error } : {}),
        series: outcome.series,
      };
    } catch (error) {
      finished = {
        ...this.#snapshot(active),
        status: "failed",
        stopReason: "error",
        finishedAt: Date.now(),
        error: `The run stopped on an unexpected error: ${errorText(error)}`,
      };
      getLogger().error({ err: error, run: record.id }, "lab run crashed");
    } finally {
      clearInterval(heartbeat);
    }
    const { strategy } = record.settings;
    counter("lockscope_lab_runs_total", "Lab runs finished, by strategy and status.", ["strategy", "status"]).inc({ strategy, status: finished.status });
    const lost = Math.max(0, finished.result?.lostUpdates ?? 0);
    counter("lockscope_lab_lost_updates_total", "Sales of units already sold in lab runs (lost updates), by strategy.", ["strategy"]).inc({ strategy }, lost);
    // This console keeps the finished run (and serves it) until node 0 has taken it.
    this.#finished.set(record.id, finished);
    while (this.#finished.size > RUNS_KEPT) this.#finished.delete(this.#finished.keys().next().value!);
    // The lease goes first: whoever reads the run ended, on any console, can start the next one at once. Until
    // the final record is stored the run still reads "running" everywhere (this console serves it as active);
    // a console that dies in between leaves it "running" with a heartbeat that lapses, and the next run's
    // start closes it (`#sweepAbandoned`).
    await active.lease.release();
    await this.#store(finished, 0);
    getLogger().info(
      { run: record.id, status: finished.status, stopReason: finished.stopReason, strategy, result: finished.result ?? null, error: finished.error },
      "lab run finished",
    );
    // Together, once the record is stored: whoever sees the run ended here can start the next one and read it back.
    Object.assign(record, finished);
    this.#active = null;
  }

  /**
   * Writes a finished run to node 0. When node 0 does not take it (down, or restarting), tries again every
   * STORE_RETRY_MS for up to STORE_RETRY_FOR_MS in the background; meanwhile this console serves the run
   * from memory. Resolves after the first attempt.
   */
  async #store(finished: RunRecord, attempt: number): Promise<void> {
    const client = stockNode().client;
    try {
      await saveRun(client, { ...finished, series: undefined }, finished.series);
      await clearCancel(client, finished.id);
      return;
    } catch (error) {
      if (attempt === 0) getLogger().warn({ run: finished.id, err: (error as Error).message }, "could not store the lab run's result on node 0; retrying");
    }
    if ((attempt + 1) * STORE_RETRY_MS > STORE_RETRY_FOR_MS) {
      getLogger().warn({ run: finished.id }, "gave up storing the lab run's result on node 0; only this console lists it");
      return;
    }
    setTimeout(() => void this.#store(finished, attempt + 1), STORE_RETRY_MS).unref();
  }

  /**
   * Runs whose console died mid-run (still "running" in the history, their heartbeat on node 0 gone: silent for
   * HEARTBEAT_TTL_MS, by when their keys' TTLs, renewed while they ran, have run out too): their
   * keys are removed and their record closed. The run's TTLs remove most of them anyway; this catches
   * the keys an engine write had just left without one (a SET clears a key's TTL until the next renewal).
   */
  async #sweepAbandoned(client: Redis, currentId: string): Promise<void> {
    const now = Date.now();
    // Judged by node 0's clock (the heartbeat's TTL), never by the dead console's timestamps against ours.
    const abandoned = (await listStoredRuns(client, RUNS_KEPT))
      .filter(({ record, silentMs }) => record.status === "running" && record.finishedAt === null && record.id !== currentId && silentMs === null)
      .map(({ record }) => markStale(record, null));
    for (const run of abandoned) {
      const notes = await removeRunKeys(labNodes().map((n) => n.url), run.id);
      const note = "Its console stopped mid-run; another console removed its keys.";
      await saveRun(client, { ...run, finishedAt: now, stopReason: "error", notes: [...run.notes, note, ...notes] });
      getLogger().info({ run: run.id }, "removed the keys of an abandoned lab run");
    }
  }

  #snapshot(active: ActiveRun): RunRecord {
    const { record, run } = active;
    if (record.status !== "running") return { ...record };
    const fault = run.fault();
    return { ...record, heartbeatAt: Date.now(), progress: run.progress(), series: run.series(), ...(fault ? { fault } : {}) };
  }

  /** What a run started on this console would run on (the page's form says how a fault would act). */
  info(): LabInfo {
    const { deployment, nodes } = labDeployment();
    return { deployment: deployment.name, nodes: nodes.length, faultMode: processControl() ? "process" : "connections" };
  }

  /** The run, live when this console runs it, else as recorded on node 0; null when unknown. */
  async get(id: string): Promise<RunRecord | null> {
    const active = this.#active;
    if (active?.record.id === id) return this.#snapshot(active);
    const finished = this.#finished.get(id);
    if (finished) return { ...finished };
    return onHistory((client) => readRun(client, id));
  }

  /** Recent runs, newest first (without their chart series). */
  async list(limit: number): Promise<RunRecord[]> {
    const runs = await onHistory((client) => listRuns(client, limit));
    const active = this.#active;
    const listed = new Set(runs.map((r) => r.id));
    // This console's finished runs that node 0 does not have (it restarted empty, or is still to take one).
    const missing = [...this.#finished.values()].filter((r) => !listed.has(r.id)).map(({ series: _series, ...r }) => r);
    const merged = sortNewestFirst([...runs, ...missing]).slice(0, limit);
    return merged.map((r) => {
      if (active?.record.id !== r.id) return r;
      const { series: _series, ...live } = this.#snapshot(active);
      return live;
    });
  }

  /**
   * Cancels a run. On this console: stops it and resolves the final record, which says how the run ended: a run
   * that ended by itself while the cancel was under way keeps its own status (`done`, `failed`), not `cancelled`.
   * On another console: asks it to (through node 0) and resolves the record as it stands.
   */
  async cancel(id: string): Promise<{ record: RunRecord; pending: boolean }> {
    const active = this.#active;
    if (active?.record.id === id) {
      active.controller.abort("cancelled");
      await active.done;
      return { record: { ...active.record }, pending: false };
    }
    return onHistory(async (client) => {
      const record = this.#finished.get(id) ?? (await readRun(client, id));
      if (!record) throw new ApiError("not_found", `No lab run ${id} in the last runs.`);
      if (record.status !== "running") {
        throw new ApiError("conflict", `Run ${id} has already ended (${record.status}); there is nothing to cancel.`, { status: record.status });
      }
      await requestCancel(client, id);
      return { record, pending: true };
    });
  }

  async stopForShutdown(): Promise<void> {
    const active = this.#active;
    if (!active) return;
    active.controller.abort("shutdown");
    await active.done;
  }
}

/** The lab lease for run `id`, or the 409 (another console's run) / 503 (no quorum) that says why not. */
async function takeLabLease(id: string): Promise<Lease> {
  try {
    // On the lab's own nodes, not the first deployment's: every console running the lab over them meets there, and
    // a deployment the lab does not run on can neither stop a run nor let a second one run alongside.
    const { deployment, nodes } = labDeployment();
    return await takeLease(LEASE_KEYS.lab, LAB_LEASE_TTL_MS, `lab run ${id} on ${consoleName()}`, 0, { deployment: deployment.name, nodes });
  } catch (error) {
    if (isResourceHeld(error)) {
      const label = error.heldBy.find((h) => h.holder?.label)?.holder?.label ?? "";
      const [, runningId, holder] = LEASE_LABEL.exec(label) ?? [];
      throw new ApiError(
        "conflict",
        holder
          ? `Run ${runningId} is running on console ${holder}: one lab run at a time across all consoles; wait for it or cancel it first.`
          : "A lab run is running on another console: one lab run at a time across all consoles; wait for it or cancel it first.",
        { ...(runningId ? { runningId } : {}), ...(holder ? { console: holder } : {}) },
      );
    }
    if (isNodesFailed(error)) {
      getLogger().warn({ err: error.message }, "the lab's lease could not be taken");
      if (error.reason === "too-slow") throw new ApiError("unavailable", `A lab run needs a quorum of lock nodes to take the lab's lease: ${error.message}.`);
      const nodes = labNodes();
      const failed = error.votes
        .filter((v) => v.vote === "error")
        .map((v) => `${nodes[v.index]?.id ?? `node ${v.index}`} ${nodeFailureText(v.error?.message) ?? "failed (details in the console's log)"}`);
      throw new ApiError(
        "unavailable",
        `A lab run needs a quorum of lock nodes to take the lab's lease: ${error.votes.length - failed.length} of ${error.votes.length} answered, ${error.quorum} needed (${failed.join("; ")}).`,
      );
    }
    throw error;
  }
}

export function getLab(): Lab {
  return singleton("lab", () => new Lab());
}
