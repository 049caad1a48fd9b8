import type { Engine, FenceRepairer } from "./engine.ts";
import { FenceUnavailableError, type FenceNodeEvidence } from "./errors.ts";
import { randomId } from "./identity.ts";
import { FENCE_MARKER_KEY, FENCE_RESEED_KEY } from "./keys.ts";
import { FENCE_EXPORT_LUA, FENCE_IMPORT_LUA, RESEED_BEGIN_LUA, RESEED_MARK_LUA } from "./reseed.lua.ts";
import { runRound } from "./round.ts";
import { defineScript, type Script } from "./script.ts";

const BEGIN = defineScript(RESEED_BEGIN_LUA);
const EXPORT = defineScript(FENCE_EXPORT_LUA);
const IMPORT = defineScript(FENCE_IMPORT_LUA);
const MARK = defineScript(RESEED_MARK_LUA);

/** How long a re-seed may take before its token lapses (the node is then not marked: a later one retries). */
const RESEED_TTL_MS = 60_000;
const PAGE = 1000;
/** A node is re-seeded at most this often by one engine instance (re-seeds are triggered by acquisitions). */
const REPAIR_COOLDOWN_MS = 1000;
/**
 * Tries of one repair in all: one that could not finish (too few marked sources answered in time, a node
 * error) is tried again after the cooldown by itself, since acquisitions, which would trigger it, are refused
 * while too few nodes vouch for the fence.
 */
const REPAIR_TRIES = 10;

/** What `reseedFences()` did on each node. */
export interface ReseedResult {
  nodes: Array<{ index: number; result: "marked" | "kept" }>;
  /** How many resources' fences were merged into every node. */
  resources: number;
}

/** One script on one node, with the per-node timeout: the reply, or a rejection with the node's error. */
async function runOn(engine: Engine, index: number, script: Script, args: ReadonlyArray<string | number>): Promise<unknown> {
  const [outcome] = await runRound([engine.clients[index]!], script, {
    keys: [],
    args,
    timeoutMs: engine.settings.nodeTimeoutMs,
    parse: (raw) => raw,
    nodes: [index],
  });
  if (outcome!.state === "ok") return outcome!.value;
  throw outcome!.state === "error" ? outcome!.error : new Error(`node ${index} gave no answer`);
}

/** Starts a re-seed on a node: its marker when it has one (nothing recorded), or null after recording `token`. */
async function begin(engine: Engine, index: number, token: string): Promise<string | null> {
  const reply = await runOn(engine, index, BEGIN, [token, RESEED_TTL_MS]);
  if (!Array.isArray(reply)) throw new Error(`Unexpected reply from the re-seed script: ${String(reply)}`);
  return reply[0] === 1 ? String(reply[1]) : null;
}

/**
 * Every fence a node holds, read page by page with SCAN, and its marker, which must be the same on every
 * page: a node that lost its data (or was re-seeded) during the scan is no source.
 */
async function exportFences(engine: Engine, index: number): Promise<{ marker: string | null; fences: Map<string, string> }> {
  const fences = new Map<string, string>();
  let cursor = "0";
  let marker: string | null | undefined;
  do {
    const reply = await runOn(engine, index, EXPORT, [cursor, PAGE]);
    if (!Array.isArray(reply) || typeof reply[0] !== "string") throw new Error(`Unexpected reply from the fence export script: ${String(reply)}`);
    const pageMarker = typeof reply[1] === "string" ? reply[1] : null;
    if (marker !== undefined && pageMarker !== marker) throw new Error(`node ${index} changed its fence marker while its fences were read`);
    marker = pageMarker;
    for (let i = 2; i + 1 < reply.length; i += 2) fences.set(String(reply[i]), String(reply[i + 1]));
    cursor = reply[0];
  } while (cursor !== "0");
  return { marker: marker ?? null, fences };
}

function newer(a: string, b: string): boolean {
  return BigInt(a) > BigInt(b);
}

function mergeMax(target: Map<string, string>, source: ReadonlyMap<string, string>): void {
  for (const [resource, fence] of source) {
    const known = target.get(resource);
    if (known === undefined || newer(fence, known)) target.set(resource, fence);
  }
}

/** Writes `fences` into a node (each only where higher), guarded: false when the guard key changed. */
async function importFences(engine: Engine, index: number, guardKey: string, guard: string, fences: ReadonlyMap<string, string>): Promise<boolean> {
  let batch: string[] = [];
  const flush = async () => {
    const reply = await runOn(engine, index, IMPORT, [guardKey, guard, ...batch]);
    batch = [];
    return reply === 1;
  };
  for (const [resource, fence] of fences) {
    batch.push(resource, fence);
    if (batch.length >= 2 * PAGE && !(await flush())) return false;
  }
  return flush();
}

/**
 * Repairs a node without marker from a quorum of nodes that have theirs: every `fence:*` key of each
 * source, max-merged, is merged into the node, and only then does it get its marker. Resolves true when
 * the node has a marker at the end; false when too few sources could be read (it stays untrusted).
 */
export async function repairNode(engine: Engine, target: number): Promise<boolean> {
  const token = randomId();
  if ((await begin(engine, target, token)) !== null) return true;
  const sources = engine.clients.map((_, i) => i).filter((i) => i !== target);
  const exports = await Promise.all(sources.map((i) => exportFences(engine, i).catch(() => null)));
  const merged = new Map<string, string>();
  let trusted = 0;
  for (const exported of exports) {
    if (!exported || exported.marker === null) continue;
    trusted += 1;
    mergeMax(merged, exported.fences);
  }
  // A quorum of sources with their markers: every fence handed out was recorded on a quorum of marked
  // nodes, and two quorums share a node (see docs/engine.md).
  if (trusted < engine.quorum) return false;
  if (!(await importFences(engine, target, FENCE_RESEED_KEY, token, merged))) return false;
  return (await runOn(engine, target, MARK, [token, randomId()])) === 1;
}

/**
 * Seeds every node from the highest fences over ALL nodes (every one must answer) and marks those without
 * a marker. Used automatically when no node has a marker (a new deployment, or one whose fences were
 * written before markers existed), and by `Redlock.reseedFences()` when an operator accepts the risk
 * described in docs/engine.md. With `onlyIfUnmarked` it does nothing when some node has a marker.
 */
export async function seedAll(engine: Engine, resources: readonly string[], onlyIfUnmarked: boolean): Promise<ReseedResult | null> {
  const token = randomId();
  const nodes = engine.clients.map((_, i) => i);
  const evidence: FenceNodeEvidence[] = nodes.map((index) => ({ index, state: "pending", fence: null }));
  const settle = async <T>(step: (index: number) => Promise<T>): Promise<T[]> => {
    const results = await Promise.allSettled(nodes.map(step));
    results.forEach((r, index) => {
      if (r.status === "rejected") evidence[index] = { index, state: "error", fence: null, error: r.reason instanceof Error ? r.reason : new Error(String(r.reason)) };
    });
    if (results.some((r) => r.status === "rejected")) throw new FenceUnavailableError(resources, "untrusted", evidence, engine.quorum, 0);
    return results.map((r) => (r as PromiseFulfilledResult<T>).value);
  };
  const markers = await settle((index) => begin(engine, index, token));
  if (onlyIfUnmarked && markers.some((m) => m !== null)) return null;
  const exports = await settle((index) => exportFences(engine, index));
  const merged = new Map<string, string>();
  for (const exported of exports) mergeMax(merged, exported.fences);
  const imported = await settle((index) =>
    markers[index] === null ? importFences(engine, index, FENCE_RESEED_KEY, token, merged) : importFences(engine, index, FENCE_MARKER_KEY, markers[index]!, merged),
  );
  const marked = await settle(async (index) => (markers[index] === null && imported[index] ? (await runOn(engine, index, MARK, [token, randomId()])) === 1 : false));
  return {
    nodes: nodes.map((index) => ({ index, result: marked[index] ? "marked" : "kept" })),
    resources: merged.size,
  };
}

/**
 * @internal One engine instance's re-seeds: a node found without marker by a fenced acquisition is repaired
 * in the background (at most one repair per node at a time, and not more often than REPAIR_COOLDOWN_MS: one
 * asked for sooner waits for the cooldown's end),
 * and a bootstrap (no node has a marker) runs once at a time.
 */
export class FenceRepairs implements FenceRepairer {
  readonly #running = new Set<number>();
  readonly #lastTry = new Map<number, number>();
  readonly #retries = new Map<number, ReturnType<typeof setTimeout>>();
  #bootstrap: Promise<unknown> | null = null;
  #stopped = false;

  constructor(private readonly engine: () => Engine) {}

  /**
   * Repairs node `index` in the background (errors are reported as that node's `node-error`). A repair that
   * does not leave the node marked is tried again after the cooldown, up to REPAIR_TRIES times in all.
   */
  schedule(index: number): void {
    if (this.#stopped || this.#running.has(index) || this.#retries.has(index)) return;
    const wait = (this.#lastTry.get(index) ?? -Infinity) + REPAIR_COOLDOWN_MS - performance.now();
    if (wait <= 0) return this.#attempt(index, 1);
    // Found unmarked again within the cooldown of its last repair (it restarted once more): the repair waits for
    // the cooldown's end rather than for an acquisition after it, which may never come.
    this.#later(index, 1, wait);
  }

  /** Stops the repairs' retries (the engine is closing); a repair under way finishes its current step. */
  stop(): void {
    this.#stopped = true;
    for (const timer of this.#retries.values()) clearTimeout(timer);
    this.#retries.clear();
  }

  #attempt(index: number, tries: number): void {
    this.#running.add(index);
    this.#lastTry.set(index, performance.now());
    const engine = this.engine();
    void repairNode(engine, index)
      .catch((error: unknown) => {
        engine.nodeError(index, error instanceof Error ? error : new Error(String(error)), "commit-fence");
        return false;
      })
      .then((marked) => {
        this.#running.delete(index);
        if (marked || this.#stopped || tries >= REPAIR_TRIES) return;
        this.#later(index, tries + 1, REPAIR_COOLDOWN_MS);
      });
  }

  /** Tries node `index`'s repair (its try number `tries`) in `ms`. */
  #later(index: number, tries: number, ms: number): void {
    const timer = setTimeout(() => {
      this.#retries.delete(index);
      if (!this.#stopped) this.#attempt(index, tries);
    }, ms);
    timer.unref?.();
    this.#retries.set(index, timer);
  }

  /** Seeds every node when none has a marker; shared by concurrent callers; rejects like `seedAll`. */
  bootstrap(resources: readonly string[]): Promise<unknown> {
    this.#bootstrap ??= seedAll(this.engine(), resources, true).finally(() => (this.#bootstrap = null));
    return this.#bootstrap;
  }
}
