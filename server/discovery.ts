import "server-only";
import { setTimeout as sleep } from "node:timers/promises";
import type { Cluster, Redis } from "ioredis";
import { groupCandidates, type DiscoveryResult } from "@/lib/locks/discovery";
import { isNeverLock } from "@/lib/locks/formats/defaults";
import { discoverFormat, isAccessRefused, readLockKeys, type FormatName, type KeyReading, type ReadLimits } from "@/lib/locks/formats";
import { lockKeyMatcher } from "@/lib/locks/glob";
import { clusterDiscovery } from "./deployments/cluster";
import { singleton } from "./global";
import { whenReady } from "./health";
import { getLogger } from "./logger";
import { getDeploymentNodes } from "./nodes";
import { getPatternStore } from "./patterns";
import { onShutdown } from "./shutdown";
import { errorText } from "@/lib/echoed-arguments";

/**
 * A bounded background SCAN of every lock node that finds lock-shaped keys outside the patterns (Redisson
 * locks, whose names are the application's, above all) and suggests a glob for each family. It is paced so a
 * busy production node does not notice it: each step is one `SCAN cursor COUNT <count>` and one read script
 * over the keys it returned (a bounded peek at each value, one call per string key, TYPE and one read for the
 * others, all inside the script: one round trip), and steps are spaced to `stepsPerSecond`. Never KEYS.
 * A full pass over a node with N keys takes about N / (count × stepsPerSecond) seconds; the next pass starts
 * `passIntervalMs` after one ends.
 */

export type DiscoveryClient = Pick<Redis, "scan" | "evalsha" | "eval">;

export interface DiscoveryNode {
  id: string;
  client: DiscoveryClient;
  /** Walks the node's keys instead of `client.scan` (a cluster: every primary in turn). */
  scan?: (cursor: string, count: number) => Promise<[string, string[]]>;
  /** Reads keys instead of one script on `client` (a cluster: one per hash slot). */
  read?: (keys: string[], limits: Partial<ReadLimits>) => Promise<KeyReading[]>;
  /** Resolves once the connection can take commands (false: not now); the pass on this node waits for it. */
  ready?: () => Promise<boolean>;
}

export interface DiscoveryOptions {
  /** Keys SCAN visits per step. @default 100 */
  count?: number;
  /** Steps per second per node. @default 5 */
  stepsPerSecond?: number;
  /** Pause between two full passes. @default 600000 (10 minutes) */
  passIntervalMs?: number;
  /** Pause before trying again after a node failed mid-pass (down, or not connected yet). @default 5000 */
  retryMs?: number;
  /** The current lock patterns: keys under them are shown already and never suggested. */
  patterns: () => readonly string[];
  /** Most candidate keys remembered per node (the rest are counted in no group). @default 10000 */
  maxCandidatesPerNode?: number;
}

const DEFAULTS = Object.freeze({ count: 100, stepsPerSecond: 5, passIntervalMs: 600_000, retryMs: 5_000, maxCandidatesPerNode: 10_000 });

/** The bounded peek a discovery step takes of each key: enough to recognise a layout, nothing more. */
const PEEK = Object.freeze({ maxBytes: 256, maxItems: 8, companions: false, peek: true });

interface NodeScan {
  scanned: number;
  /** Keys outside the patterns that the node's ACL does not let the console's Redis user read: passed over. */
  refused: number;
  found: Map<string, FormatName>;
}

interface NodeState {
  node: DiscoveryNode;
  current: NodeScan;
  lastComplete: NodeScan | null;
  /** The patterns `lastComplete` passed over as locks (their keys were neither read nor suggested). */
  lastGlobs: readonly string[];
  /** When `lastComplete` ended, on the wall clock: people read it as "scanned 3 min ago". */
  lastCompleteAt: number | null;
  error: string | null;
}

export class Discovery {
  private readonly options: Required<DiscoveryOptions>;
  private readonly states: NodeState[];
  private abort = new AbortController();
  private running: Promise<void> | null = null;

  constructor(nodes: readonly DiscoveryNode[], options: DiscoveryOptions) {
    this.options = { ...DEFAULTS, ...options };
    for (const [name, value] of [["count", this.options.count], ["stepsPerSecond", this.options.stepsPerSecond]] as const) {
      if (!(Number.isFinite(value) && value > 0)) throw new TypeError(`Expected \`${name}\` to be a positive number, got \`${String(value)}\` (${typeof value})`);
    }
    this.states = nodes.map((node) => ({ node, current: { scanned: 0, refused: 0, found: new Map() }, lastComplete: null, lastGlobs: [], lastCompleteAt: null, error: null }));
  }

  /**
   * Starts the background passes (idempotent): each node on its own schedule, so that a node down, retried
   * every `retryMs`, does not make the healthy ones scan again before their `passIntervalMs`.
   */
  start(): void {
    if (this.running) return;
    const signal = this.abort.signal;
    this.running = Promise.all(
      this.states.map(async (state) => {
        while (!signal.aborted) {
          if (!(await this.scanNode(state, signal))) {
            await sleep(this.options.retryMs, undefined, { signal }).catch(() => {});
            continue;
          }
          // The next pass starts when it is due, or at once when a pattern is taken out: the keys it covered were
          // passed over as locks, so the pass that ended cannot tell whether they are lock-shaped keys outside.
          const due = performance.now() + this.options.passIntervalMs;
          while (!signal.aborted && performance.now() < due && !this.narrowed(state.lastGlobs)) {
            await sleep(Math.min(1_000, due - performance.now()), undefined, { signal }).catch(() => {});
          }
        }
      }),
    ).then(() => undefined);
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
    this.running = null;
    this.abort = new AbortController();
  }

  /** One full pass over every node, nodes in parallel, each paced on its own; true when a node failed. */
  async runPass(signal: AbortSignal = this.abort.signal): Promise<boolean> {
    const done = await Promise.all(this.states.map((state) => this.scanNode(state, signal)));
    return done.includes(false);
  }

  /** Whether a pattern of `globs` is no longer one of the lock patterns. */
  private narrowed(globs: readonly string[]): boolean {
    const now = this.options.patterns();
    return globs.some((glob) => !now.includes(glob));
  }

  /** Scans one node to its end; false when it failed on the way. */
  private async scanNode(state: NodeState, signal: AbortSignal): Promise<boolean> {
    const { count, stepsPerSecond, maxCandidatesPerNode } = this.options;
    const stepMs = 1000 / stepsPerSecond;
    let globs = this.options.patterns();
    let isLockKey = lockKeyMatcher(globs);
    state.current = { scanned: 0, refused: 0, found: new Map() };
    let cursor = "0";
    try {
      if (state.node.ready && !(await state.node.ready())) throw new Error("not connected");
      do {
        if (this.narrowed(globs)) {
          // A pattern taken out mid-pass: the keys it covered were passed over until now. The pass starts again.
          globs = this.options.patterns();
          isLockKey = lockKeyMatcher(globs);
          state.current = { scanned: 0, refused: 0, found: new Map() };
          cursor = "0";
        }
        const started = performance.now();
        const [next, keys] = state.node.scan ? await state.node.scan(cursor, count) : await state.node.client.scan(cursor, "COUNT", count);
        cursor = next;
        state.current.scanned += keys.length;
        const outside = keys.filter((key) => !isLockKey(key) && !isNeverLock(key));
        if (outside.length > 0) {
          for (const reading of await this.readAllowed(state, outside)) {
            const format = discoverFormat(reading);
            if (format && state.current.found.size < maxCandidatesPerNode) state.current.found.set(reading.key, format.name);
          }
        }
        const rest = stepMs - (performance.now() - started);
        if (cursor !== "0" && rest > 0) await sleep(rest, undefined, { signal });
      } while (cursor !== "0" && !signal.aborted);
      if (cursor === "0") {
        state.lastComplete = state.current;
        state.lastGlobs = globs;
        state.lastCompleteAt = Date.now();
        state.error = null;
      }
      return true;
    } catch (error) {
      if (signal.aborted) return true;
      // Shown to viewers (GET /api/discovery): without the arguments Redis repeats in a refusal (a key's name).
      const message = errorText(error).slice(0, 200);
      // Said once per failure, not at every retry of a node that stays down.
      if (message !== state.error) getLogger().warn({ node: state.node.id, err: message }, "lock discovery scan failed on a node; it tries again shortly");
      state.error = message;
      return false;
    }
  }

  /**
   * Peeks at `keys` on the node in one read; where its ACL refuses the console's Redis user one of them (a user
   * allowed only the lock patterns' keys refuses them all), one key at a time, passing over (and counting) those it
   * refuses, so the pass carries on and still finds the keys the user may read.
   */
  private async readAllowed(state: NodeState, keys: string[]): Promise<KeyReading[]> {
    const read = (batch: string[]) => (state.node.read ? state.node.read(batch, PEEK) : readLockKeys(state.node.client, batch, PEEK));
    try {
      return await read(keys);
    } catch (error) {
      if (!isAccessRefused(error)) throw error;
    }
    const readings: KeyReading[] = [];
    for (const key of keys) {
      try {
        readings.push(...(await read([key])));
      } catch (error) {
        if (!isAccessRefused(error)) throw error;
        state.current.refused += 1;
      }
    }
    return readings;
  }

  /**
   * What was found: each node's last full pass (or the one under way before the first ends), grouped.
   * `scannedAt`: when the oldest of those full passes ended (the findings are at least that recent), null until
   * every node has been scanned to its end.
   */
  result(): DiscoveryResult & {
    scannedAt: number | null;
    nodes: Array<{ id: string; scannedKeys: number; refusedKeys: number; complete: boolean; scannedAt: number | null; error: string | null }>;
  } {
    const isLockKey = lockKeyMatcher(this.options.patterns());
    const found = new Map<string, FormatName>();
    let scannedKeys = 0;
    for (const state of this.states) {
      const shown = state.lastComplete ?? state.current;
      scannedKeys += shown.scanned;
      for (const [key, format] of shown.found) if (!found.has(key)) found.set(key, format);
    }
    const ends = this.states.map((s) => s.lastCompleteAt);
    // A node's last full pass no longer covers what is outside the patterns once one of those it passed over as
    // locks is taken out: not complete until the next pass (which starts at once) ends.
    const complete = (s: NodeState) => s.lastComplete !== null && !this.narrowed(s.lastGlobs);
    return {
      scannedKeys,
      complete: this.states.every(complete),
      scannedAt: ends.length > 0 && ends.every((at): at is number => at !== null) ? Math.min(...ends) : null,
      // A key may have come under the patterns since it was found: it is shown as a lock now, not suggested.
      candidates: groupCandidates(found, (key) => !isLockKey(key)),
      nodes: this.states.map((s) => ({
        id: s.node.id,
        scannedKeys: (s.lastComplete ?? s.current).scanned,
        refusedKeys: (s.lastComplete ?? s.current).refused,
        complete: complete(s),
        scannedAt: s.lastCompleteAt,
        error: s.error,
      })),
    };
  }
}

/** The process's discovery over the configured nodes (of every deployment), started on first use. */
export function getDiscovery(): Discovery {
  return singleton("discovery", () => {
    const store = getPatternStore();
    const deployments = getDeploymentNodes();
    const discovery = new Discovery(
      deployments.flatMap((d) => d.nodes).map((n) => ({
        // Node ids repeat across deployments: where there are several, the deployment names its nodes.
        id: deployments.length > 1 ? `${n.deployment}/${n.id}` : n.id,
        client: n.client,
        // A cluster's walk also needs its topology (which primaries to scan).
        ready: async () => (await whenReady(n.client, 2_000)) && (n.cluster ? await n.cluster.topology.known(2_000) : true),
        ...(n.cluster ? clusterDiscovery(n.client as Cluster, n.cluster.topology) : {}),
      })),
      { patterns: () => store.current().patterns.map((p) => p.glob) },
    );
    discovery.start();
    onShutdown("lock-discovery", 40, () => discovery.stop());
    return discovery;
  });
}
