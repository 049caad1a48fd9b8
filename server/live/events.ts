import "server-only";
import { EventEmitter } from "node:events";
import type { LockEventType } from "@/lib/locks/reducer";
import { singleton } from "../global";

export type { LockEventType };

/** What the live view emits, for the metrics and anything else in the process that counts. */
export interface LiveEventMap {
  /**
   * `replaces`: the lock's end, told a moment ago as that event, was this one after all (a force release or a
   * failover told after the keys were seen gone): the same end, to be counted once.
   */
  "lock-event": [{ type: LockEventType; resource: string; nodeId?: string; replaces?: LockEventType } & Named];
  reconnect: [{ nodeId: string } & Named];
  gap: [{ nodeId: string } & Named];
  /**
   * A node restarted and came back without locks whose TTL had not run out (see `LockStore.lostInRestart`), the lab's
   * left out: `gone` no quorum holds any more, `heldByQuorum` still held on a quorum of the other nodes.
   */
  "lost-in-restart": [{ nodeId: string; gone: number; heldByQuorum: number } & Named];
  /** A failed acquisition attempt (engine telemetry); a waiter giving up is none. */
  contention: [{ resource: string } & Named];
  /**
   * The console saw a node restart without persistence sooner than the longest TTL it knew on it: a lock it held may
   * be granted again. Told once per restart seen, when it is seen (the hazard itself may be over by the next scrape).
   */
  "restart-hazard": [{ nodeId: string } & Named];
}

/** Where several deployments are watched, the process-wide emitter's events name theirs (see server/live/deployments.ts). */
interface Named {
  deployment?: string;
}

export type LiveEvents = EventEmitter<LiveEventMap>;

/** One emitter per process (on globalThis): listeners in any bundle see the watcher's events. */
export function getLiveEvents(): LiveEvents {
  return singleton("live-events", () => {
    const emitter = new EventEmitter<LiveEventMap>();
    emitter.setMaxListeners(50);
    return emitter;
  });
}
