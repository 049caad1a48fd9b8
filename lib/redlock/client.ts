/**
 * The only Redis commands the engine sends. Typed narrowly on purpose: a test (or a reviewer) sees
 * exactly what the engine needs from a node, and any client with these methods works. An ioredis
 * `Redis` satisfies both interfaces structurally.
 */

/** A connection that runs the engine's Lua scripts (EVALSHA, with EVAL when the node lacks the script). */
export interface ScriptClient {
  evalsha(sha1: string, numkeys: number, ...keysAndArgs: Array<string | number>): Promise<unknown>;
  eval(script: string, numkeys: number, ...keysAndArgs: Array<string | number>): Promise<unknown>;
}

/**
 * A connection in subscribe mode. It can run no other command, so the engine makes its own with
 * `duplicate()` and never subscribes on the caller's connection.
 */
export interface SubscriberClient {
  subscribe(...channels: string[]): Promise<unknown>;
  unsubscribe(...channels: string[]): Promise<unknown>;
  on(event: "message", listener: (channel: string, message: string) => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
  disconnect(): void;
}

/**
 * What `new Redlock(clients)` takes: scripts; `SET key value PX ttl NX`, the first try of an uncontended
 * acquisition (see acquire.ts); and `duplicate()` for the lazily made subscriber.
 */
export interface RedlockClient extends ScriptClient {
  set(key: string, value: string, px: "PX", ttlMs: number, nx: "NX"): Promise<unknown>;
  duplicate(): SubscriberClient;
}

/** What `forceRelease` needs: scripts only. */
export type ForceReleaseClient = ScriptClient;
