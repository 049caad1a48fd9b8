import "server-only";

/**
 * Long-lived things (Redis connections, the watcher, the metrics registry, the lab runner) are created once
 * per process and kept on `globalThis`: Next.js bundles `instrumentation.ts` and each route separately, so
 * module state is not shared between them (vercel/next.js#69544).
 */
export function singleton<T>(name: string, create: () => T): T {
  const key = Symbol.for(`lockscope.${name}`);
  const store = globalThis as unknown as Record<symbol, T | undefined>;
  let value = store[key];
  if (value === undefined) {
    value = create();
    store[key] = value;
  }
  return value;
}

/** Reads a value another bundle (or the launcher) put on `globalThis`, without creating it. */
export function peekGlobal<T>(name: string): T | undefined {
  return (globalThis as unknown as Record<symbol, T | undefined>)[Symbol.for(`lockscope.${name}`)];
}

export function setGlobal<T>(name: string, value: T): void {
  (globalThis as unknown as Record<symbol, T | undefined>)[Symbol.for(`lockscope.${name}`)] = value;
}
