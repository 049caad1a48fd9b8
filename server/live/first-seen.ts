import "server-only";
import { createHash } from "node:crypto";
import type { LockClient } from "../deployments";
import { whenReady } from "../health";
import type { LockStore } from "./store";

/** One small string per foreign lock value, on node 0: `lockscope:first-seen:<hash of resource and value>`. */
export const FIRST_SEEN_PREFIX = "lockscope:first-seen:";
/** The record outlives its lock by this much, so a console that sees the lock a little late still finds it. */
const MARGIN_MS = 10 * 60_000;
/** A lock without a TTL keeps its record this long after it was last seen acquired or extended. */
const WITHOUT_TTL_KEEP_MS = 7 * 24 * 60 * 60_000;
/** How long a sighting waits for the connection to node 0 before this console keeps its own time. */
const READY_WAIT_MS = 10_000;

export function firstSeenKey(resource: string, token: string): string {
  return FIRST_SEEN_PREFIX + createHash("sha1").update(resource).update("\n").update(token).digest("base64url");
}

/**
 * Shares when each foreign lock (one whose value carries no acquisition time) was first seen, so its age is
 * the same on every console and survives a restart. The first console to see a value records the time
 * (`SET NX`); every console reads it back and adopts it when it is earlier than its own; an extension renews
 * the record's expiry. Costs, per console, one pipelined SET NX + PEXPIRE + GET on node 0 per foreign value
 * acquired or extended, and one key per live foreign lock on node 0 (expiring with the lock plus 10 min).
 * While node 0 does not answer, each console keeps the time it saw itself.
 */
export function shareFirstSeen(store: LockStore, node0: LockClient | undefined): void {
  if (!node0) return;
  // The locks already held when the console starts are found before its connection to node 0 is up: every
  // sighting until then waits on the same promise (one listener, however many locks).
  let connecting: Promise<boolean> | null = null;
  const ready = (): Promise<boolean> => {
    if (node0.status === "ready") return Promise.resolve(true);
    connecting ??= whenReady(node0, READY_WAIT_MS).finally(() => (connecting = null));
    return connecting;
  };
  const share = async (resource: string, token: string, seenAt: number, ttlMs: number | null): Promise<void> => {
    if (!(await ready())) return;
    const key = firstSeenKey(resource, token);
    const keepMs = (ttlMs ?? WITHOUT_TTL_KEEP_MS) + MARGIN_MS;
    const replies = await node0.multi().set(key, String(seenAt), "PX", keepMs, "NX").pexpire(key, keepMs).get(key).exec();
    const first = Number(replies?.[2]?.[1]);
    if (Number.isFinite(first) && first > 0) store.adoptFirstSeen(resource, token, first);
  };
  store.firstSeen = (resource, token, seenAt, ttlMs) => {
    share(resource, token, seenAt, ttlMs).catch(() => {
      // Node 0 unreachable: this console's own first sighting stands until the next extension asks again.
    });
  };
}
