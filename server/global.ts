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

const BRAND = Symbol.for("lockscope.class");

/** A class that `instanceOf` recognises across bundles names itself in a static field of its own (`brand`). */
interface Branded {
  readonly [BRAND]?: string;
}

/**
 * `value instanceof cls` for a class that more than one bundle has a copy of. Each bundle (`instrumentation.ts`,
 * each route's) compiles the modules it imports again, so an error thrown by a long-lived object made in one
 * bundle is an instance of that bundle's class, and a plain `instanceof` in another bundle says no: the error
 * then became a 500. Here an object is an instance when a class with the same brand (`static [brand]`) is on
 * its prototype chain. A subclass without a brand of its own is checked as usual.
 */
export function instanceOf(cls: abstract new (...args: never[]) => unknown, value: unknown): boolean {
  const brand = Object.hasOwn(cls, BRAND) ? (cls as Branded)[BRAND] : undefined;
  if (brand === undefined) return Function.prototype[Symbol.hasInstance].call(cls, value);
  if (typeof value !== "object" || value === null) return false;
  for (let p: unknown = Object.getPrototypeOf(value); p !== null && typeof p === "object"; p = Object.getPrototypeOf(p)) {
    const ctor: unknown = (p as { constructor?: unknown }).constructor;
    if (typeof ctor === "function" && Object.hasOwn(ctor, BRAND) && (ctor as Branded)[BRAND] === brand) return true;
  }
  return false;
}

/**
 * The key of the name a class declares for `instanceOf`, used with `Symbol.hasInstance` so that every
 * `instanceof` of it holds across bundles:
 *   static readonly [brand] = "ApiError";
 *   static [Symbol.hasInstance](value: unknown): value is ApiError { return instanceOf(this, value); }
 */
export const brand = BRAND;
