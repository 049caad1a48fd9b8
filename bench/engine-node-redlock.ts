import { createRequire } from "node:module";

/**
 * node-redlock 5.0.0-beta.2 ships type declarations its package.json "exports" map does not point to,
 * so TypeScript cannot see them; these are the parts the benchmark uses, loaded through require.
 */
export interface NodeRedlockLock {
  readonly value: string;
  release(): Promise<unknown>;
}

export interface NodeRedlock {
  acquire(resources: string[], durationMs: number): Promise<NodeRedlockLock>;
  release(lock: NodeRedlockLock): Promise<unknown>;
}

interface NodeRedlockModule {
  default: new (
    clients: Iterable<unknown>,
    settings?: { driftFactor?: number; retryCount?: number; retryDelay?: number; retryJitter?: number },
  ) => NodeRedlock;
}

export const NodeRedlock = (createRequire(import.meta.url)("redlock") as NodeRedlockModule).default;
