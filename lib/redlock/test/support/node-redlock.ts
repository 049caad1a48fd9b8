import { createRequire } from "node:module";

/**
 * node-redlock 5.0.0-beta.2 ships type declarations that its package.json "exports" map does not point
 * to, so TypeScript cannot see them; these are the parts the tests use, loaded through require.
 */
export interface NodeRedlockLock {
  readonly value: string;
  release(): Promise<unknown>;
}

export interface NodeRedlock {
  acquire(resources: string[], durationMs: number): Promise<NodeRedlockLock>;
}

interface NodeRedlockModule {
  default: new (
    clients: Iterable<unknown>,
    settings?: { driftFactor?: number; retryCount?: number; retryDelay?: number; retryJitter?: number },
  ) => NodeRedlock;
  ExecutionError: abstract new (...args: never[]) => Error;
}

const loaded = createRequire(import.meta.url)("redlock") as NodeRedlockModule;
export const NodeRedlock = loaded.default;
export const NodeRedlockExecutionError = loaded.ExecutionError;
