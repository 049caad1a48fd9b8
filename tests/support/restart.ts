import type Redis from "ioredis";
import { expect } from "vitest";
import { call, listedLosses, lockDetail } from "./console";
import { until } from "./wait";

/** The console's first node as `GET /api/health` shows it. */
async function firstNode(): Promise<{ watcher: { reconnects: number; up: boolean } }> {
  const health = await import("@/app/api/health/route");
  const body = (await call(health.GET, "GET", "/api/health", { token: null })).body as { nodes: Array<{ watcher: { reconnects: number; up: boolean } }> };
  return body.nodes[0]!;
}

/** The watcher of the console's first node as `GET /api/health` shows it: its reconnects, and whether it is up. */
export async function firstWatcher(): Promise<{ reconnects: number; up: boolean }> {
  return (await firstNode()).watcher;
}

/**
 * Waits until the first node's watcher has reconnected (its count above `before`) and reconciled (up again). When it
 * does not within `timeoutMs`, the error gives the node's health as last read (whether it answers, its slots, the
 * watcher's counts).
 */
export async function untilFirstWatcherReconnected(before: number, timeoutMs = 15_000): Promise<void> {
  let last: unknown = null;
  try {
    await until("the watcher reconnected and reconciled", async () => {
      const node = await firstNode();
      last = node;
      return node.watcher.reconnects > before && node.watcher.up;
    }, timeoutMs);
  } catch (error) {
    throw new Error(`${error instanceof Error ? error.message : String(error)}; the first node's health last read: ${JSON.stringify(last)}`);
  }
}

/**
 * Every holder of `keys` extends its lock on `node`, and the node pauses writes right after: the notifications go
 * out, and the console's read of the keys (a script, which a write pause holds too) waits on the node. Resolves
 * once that read is seen waiting there.
 */
export async function holdConsoleReadOn(node: Redis, keys: readonly string[]): Promise<void> {
  const pipeline = node.pipeline();
  for (const key of keys) pipeline.pexpire(key, 600_000);
  pipeline.call("CLIENT", "PAUSE", "20000", "WRITE");
  await pipeline.exec();
  await until("the console's read of the keys waits on the node", async () => {
    const clients = String(await node.call("CLIENT", "LIST"));
    return clients.split("\n").some((line) => line.includes("name=lockscope:watcher-reader") && /\bcmd=eval(sha)?\b/.test(line) && /\bflags=\S*b/.test(line));
  }, 10_000, 20);
}

/**
 * Waits until `node` has handed every notification it sent to its subscribers' connections (no output left in its
 * own buffers, `omem=0`): a node killed before that never said the rest, and a console on one node cannot tell
 * what it did not hear from a loss. Handed over, they are the console's to read, however far behind it is.
 */
export async function untilNotificationsSent(node: Redis): Promise<void> {
  await until("the node handed every notification to its subscribers", async () => {
    const subscribers = String(await node.call("CLIENT", "LIST", "TYPE", "pubsub")).split("\n").filter((line) => line.trim() !== "");
    return subscribers.every((line) => /\bomem=0\b/.test(line));
  }, 30_000, 5);
}

/** Waits for the first node's watcher to have reconnected since `reconnectsBefore` and be up, and every lock of `keys` to have ended. */
export async function untilBackAndEnded(reconnectsBefore: number, keys: readonly string[]): Promise<void> {
  await untilFirstWatcherReconnected(reconnectsBefore, 60_000);
  await until("every lock ended", async () => (await Promise.all(keys.map(lockDetail))).every((d) => d !== null && d.state !== "held"), 30_000);
}

/** Every lock of `keys` ended lost in a restart: on its page, on the losses list, and counted in `/metrics`. */
export async function expectLostInRestart(keys: readonly string[]): Promise<void> {
  expect((await Promise.all(keys.map(lockDetail))).map((d) => d?.state)).toEqual(keys.map(() => "lost"));
  expect((await listedLosses()).filter((l) => l.kind === "restart").map((l) => l.resource).sort()).toEqual([...keys].sort());
  const metrics = await import("@/app/metrics/route");
  const text = (await call(metrics.GET, "GET", "/metrics")).body as string;
  expect(text).toMatch(new RegExp(`^lockscope_locks_lost_in_restart_total\\{[^}]*outcome="gone"[^}]*\\} ${keys.length}$`, "m"));
}
