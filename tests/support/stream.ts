import { lockOf, type CompactLock } from "@/lib/locks/compact-lock";
import type { Lock } from "@/lib/locks/types";
import { ORIGIN, VIEWER_TOKEN } from "./console";
import { until } from "./wait";

type StreamHandler = (request: Request, context: { params: Promise<Record<string, string>> }) => Promise<Response>;

/** Opens `/api/locks/stream` through its route handler, as a browser tab would; 200 expected. */
export async function openStream(handler: StreamHandler, options: { token?: string; lastEventId?: string; clientIp?: string; query?: string } = {}): Promise<StreamReader> {
  const abort = new AbortController();
  const headers = new Headers({ authorization: `Bearer ${options.token ?? VIEWER_TOKEN}`, host: new URL(ORIGIN).host });
  if (options.lastEventId) headers.set("last-event-id", options.lastEventId);
  if (options.clientIp) headers.set("x-lockscope-client-ip", options.clientIp);
  const response = await handler(new Request(`${ORIGIN}/api/locks/stream${options.query ? `?${options.query}` : ""}`, { headers, signal: abort.signal }), { params: Promise.resolve({}) });
  if (response.status !== 200) throw new Error(`the stream answered ${response.status}: ${await response.text()}`);
  return new StreamReader(response, abort);
}

/**
 * A test file's streams: `open` opens one through the route's handler (asked for at each open: the route is imported
 * once the console is set up), and `closeAll` (in `afterAll`) closes every stream it opened.
 */
export function streamsThrough(handler: () => StreamHandler): { open: (options?: Parameters<typeof openStream>[1]) => Promise<StreamReader>; closeAll: () => void } {
  const opened: StreamReader[] = [];
  return {
    open: async (options = {}) => {
      const reader = await openStream(handler(), options);
      opened.push(reader);
      return reader;
    },
    closeAll: () => {
      for (const s of opened) s.close();
    },
  };
}

export interface SseEvent {
  event: string;
  data: string;
  id: string | null;
}

/** Reads a live stream the way a browser's EventSource does, keeping every event for the test to inspect. */
export class StreamReader {
  readonly events: SseEvent[] = [];
  lastId: string | null = null;
  private buffer = "";
  private done = false;
  constructor(
    private readonly response: Response,
    private readonly abort: AbortController,
  ) {
    void this.pump();
  }
  private async pump() {
    const reader = this.response.body!.getReader();
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        this.buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = this.buffer.indexOf("\n\n")) >= 0) {
          const block = this.buffer.slice(0, end);
          this.buffer = this.buffer.slice(end + 2);
          let event = "message";
          const data: string[] = [];
          let id: string | null = null;
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "event") event = value;
            else if (field === "data") data.push(value);
            else if (field === "id") id = value;
          }
          if (id !== null) this.lastId = id;
          if (data.length > 0) this.events.push({ event, data: data.join("\n"), id });
        }
      }
    } catch {
      // aborted
    } finally {
      this.done = true;
    }
  }
  get ended(): boolean {
    return this.done;
  }
  /** Every lock this stream told of, in its latest state (snapshot, then upserts); null once removed. */
  locks(): Map<string, Lock | null> {
    const locks = new Map<string, Lock | null>();
    for (const e of this.events) {
      if (e.event === "snapshot") {
        for (const sent of (JSON.parse(e.data) as { locks: Array<Lock | CompactLock> }).locks) {
          const lock = lockOf(sent);
          locks.set(lock.resource, lock);
        }
      } else if (e.event === "lock") {
        const lock = lockOf(JSON.parse(e.data) as Lock | CompactLock);
        locks.set(lock.resource, lock);
      } else if (e.event === "lock-removed") locks.set((JSON.parse(e.data) as { resource: string }).resource, null);
    }
    return locks;
  }
  /** The latest state of a lock as this stream told it: undefined if never, null once removed. */
  lock(resource: string): Lock | null | undefined {
    return this.locks().get(resource);
  }
  /** The data of the latest event of this type, parsed. */
  latest<T>(event: string): T | null {
    for (let i = this.events.length - 1; i >= 0; i--) {
      const e = this.events[i];
      if (e && e.event === event) return JSON.parse(e.data) as T;
    }
    return null;
  }
  async until<T>(what: string, check: () => T | null | undefined | false, timeoutMs = 15_000): Promise<T> {
    try {
      return await until(what, check, timeoutMs, 25);
    } catch {
      throw new Error(`stream never showed: ${what}; last events: ${this.events.slice(-5).map((e) => `${e.event} ${e.data.slice(0, 300)}`).join(" | ")}`);
    }
  }
  close() {
    this.abort.abort();
  }
}
