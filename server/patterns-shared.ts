import "server-only";
import { defineScript, runScript } from "@lockscope/redlock";
import { isScriptRefused } from "@/lib/locks/formats/read";
import { isNodesFailed, isResourceHeld, LEASE_KEYS, takeLease } from "./cluster/lease";
import { ApiError } from "./errors";
import { singleton } from "./global";
import { whenReady } from "./health";
import { getLogger } from "./logger";
import { getConfig } from "./config";
import { getNodes, type LockNode } from "./nodes";
import { getPatternStore, parsePatternsRecord, STAMP, type PatternsRecord, type PatternsShare, type PatternStore } from "./patterns";
import { onShutdown } from "./shutdown";

/**
 * The lock patterns are shared by every console over the same lock nodes: one hash on each node of the first
 * deployment, `{stamp, record}` (the record as JSON). A change is written to every node that answers; each
 * console reads the stamps every `SYNC_EVERY_MS`, applies a newer change, and copies the newest to a node that
 * missed it (a node that was down, or restarted empty). Costs one `HGET` per node per read.
 */
export const PATTERNS_KEY = "lockscope:patterns";
export const SYNC_EVERY_MS = 2_000;

/**
 * Writes `record` unless the node holds a change at least as new: an older write (a copy read a moment ago, a
 * console whose change lost the race) never replaces a newer one. Returns 1 when written, else the stamp kept.
 */
const WRITE_NEWER = defineScript(`
local kept = redis.call('HGET', KEYS[1], 'stamp')
if kept and string.match(kept, '^%d%d%d%d%d%d%d%d%d%d%d%d%d%-%x+$') and kept >= ARGV[1] then return kept end
redis.call('HSET', KEYS[1], 'stamp', ARGV[1], 'record', ARGV[2])
return 1
`);

/**
 * How long a pattern change's lease lasts before it is extended (it is while the change runs: the audit log's
 * record of intent, the nodes' writes), and how many times a change tries again, about 200 ms apart, while
 * another console's holds it.
 */
const CHANGE_LEASE_MS = 30_000;
const CHANGE_RETRIES = 15;

/** Writes a change on every node that answers within the node timeout, one change at a time over all consoles. */
export function nodesShare(store: PatternStore, nodes: () => readonly LockNode[], timeoutMs: number): PatternsShare {
  return {
    refresh: () => syncPatterns(store, nodes(), timeoutMs),
    async exclusive(label, change) {
      const list = nodes();
      const lease = await takeLease(LEASE_KEYS.patterns, CHANGE_LEASE_MS, label, CHANGE_RETRIES).catch((error: unknown) => {
        if (isResourceHeld(error)) {
          const by = error.heldBy.find((h) => h.holder?.label)?.holder?.label;
          throw new ApiError("conflict", `The lock patterns are being changed on another console${by ? ` (${by})` : ""}, and still were after ${Math.round(CHANGE_RETRIES / 5)} s; nothing changed. Read them again and make your change on that list.`);
        }
        if (isNodesFailed(error)) {
          const silent = error.votes.filter((v) => v.vote === "error").map((v) => list[v.index]?.id ?? `node-${v.index}`);
          throw new ApiError("unavailable", `The lock patterns are changed only while most lock nodes answer, so that two consoles never change them at once (${silent.join(", ") || "too many nodes"} did not answer in time); nothing changed.`);
        }
        throw error;
      });
      try {
        // Held while not lost (the lease is extended as the change runs; lost, its signal aborts).
        return await change(() => !lease.signal.aborted);
      } finally {
        await lease.release();
      }
    },
    async write(record) {
      const list = nodes();
      const done = await Promise.all(list.map((node) => writeTo(node, record, timeoutMs)));
      const newer = done.find((d): d is string => typeof d === "string") ?? null;
      return { recorded: list.filter((_, i) => done[i] === true).map((n) => n.id), missed: list.filter((_, i) => done[i] === false).map((n) => n.id), newer };
    },
  };
}

/** true: written; false: no answer; a stamp: the node holds that change, newer than `record`. */
async function writeTo(node: LockNode, record: PatternsRecord, timeoutMs: number): Promise<boolean | string> {
  try {
    if (!(await whenReady(node.client, timeoutMs))) return false;
    const body = JSON.stringify(record);
    try {
      const reply = await runScript(node.client, WRITE_NEWER, [PATTERNS_KEY], [record.stamp, body]);
      return typeof reply === "string" ? reply : true;
    } catch (error) {
      // Where scripts are refused (some managed services), a plain write: two changes at once may then cross.
      if (!isScriptRefused(error)) throw error;
      const replies = await node.client.multi().hset(PATTERNS_KEY, "stamp", record.stamp, "record", body).exec();
      return replies !== null && replies.every(([e]) => e === null);
    }
  } catch {
    return false;
  }
}

/**
 * One read of the nodes: the newest change any of them holds is offered to the store, then copied to the nodes
 * that answered with an older one or none. When no node holds any (all restarted empty), this console's own
 * change is written back, so the patterns outlive the nodes' data as long as one console keeps them.
 */
export async function syncPatterns(store: PatternStore, nodes: readonly LockNode[], timeoutMs: number): Promise<void> {
  const stamps = await Promise.all(
    nodes.map(async (node) => {
      if (node.client.status !== "ready") return undefined; // not answering: neither read nor repaired
      try {
        const stamp = await node.client.hget(PATTERNS_KEY, "stamp");
        // Anything but a stamp (written by hand, damaged) counts as none: the node is given the newest change.
        return stamp !== null && STAMP.test(stamp) ? stamp : null;
      } catch {
        return undefined;
      }
    }),
  );
  let found: { stamp: string; node: LockNode } | null = null;
  let fromNodes: PatternsRecord | null = null;
  for (const [i, stamp] of stamps.entries()) {
    if (typeof stamp === "string" && (found === null || stamp > found.stamp)) found = { stamp, node: nodes[i] as LockNode };
  }
  if (found && found.stamp !== store.record()?.stamp) {
    const text = await found.node.client.hget(PATTERNS_KEY, "record").catch(() => null);
    const parsed = text === null ? null : parsePatternsRecord(text);
    if (!parsed || "problem" in parsed) {
      warnOnce(`unreadable:${found.stamp}`, { node: found.node.id, problem: parsed && "problem" in parsed ? parsed.problem : "missing" }, "the lock patterns kept on a lock node cannot be read; keeping the patterns in force");
      return;
    }
    fromNodes = parsed.record;
    await store.adopt(fromNodes);
  }
  // The newest change known, the nodes' or this console's own (one that some nodes missed, or that outlived them).
  const own = store.record();
  const record = fromNodes && (!own || fromNodes.stamp > own.stamp) ? fromNodes : own;
  if (!record) return;
  const behind = nodes.filter((_, i) => {
    const stamp = stamps[i];
    return stamp === null || (typeof stamp === "string" && stamp < record.stamp);
  });
  await Promise.all(behind.map((node) => writeTo(node, record, timeoutMs)));
}

const warned = new Set<string>();
function warnOnce(key: string, fields: Record<string, unknown>, message: string): void {
  if (warned.has(key)) return;
  warned.add(key);
  getLogger().warn(fields, message);
}

/**
 * Shares this console's lock patterns with the others: changes made here are written to the nodes, and the
 * nodes are read now (waiting at most the node timeout, so the live view starts with the shared patterns) and
 * every `SYNC_EVERY_MS` after.
 */
export function startPatternSharing(): Promise<void> {
  return singleton("pattern-sharing", async () => {
    const store = getPatternStore();
    const timeoutMs = getConfig().nodeTimeoutMs;
    store.shareVia(nodesShare(store, getNodes, timeoutMs));
    const run = () => syncPatterns(store, getNodes(), timeoutMs).catch((error: unknown) => getLogger().debug({ err: (error as Error).message }, "lock patterns: reading the nodes failed"));
    await Promise.all(getNodes().map((node) => whenReady(node.client, timeoutMs)));
    await run();
    let running = false;
    const timer = setInterval(() => {
      if (running) return;
      running = true;
      void run().finally(() => (running = false));
    }, SYNC_EVERY_MS);
    timer.unref();
    onShutdown("pattern-sharing", 44, () => {
      clearInterval(timer);
      return Promise.resolve();
    });
  });
}
