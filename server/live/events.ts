import "server-only";
import { EventEmitter } from "node:events";
import type { LockEventType } from "@/lib/locks/reducer";
import { singleton } from "../global";

export type { LockEventType };

/** What the live view emits, for the metrics and anything else in the process that counts. */
export interface LiveEventMap {
  "lock-event": [{ type: LockEventType; resource: string; nodeId?: string }];
  reconnect: [{ nodeId: string }];
  gap: [{ nodeId: string }];
  contention: [{ resource: string }];
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
