import "server-only";
import { singleton } from "./global";

type Hook = { name: string; order: number; run: () => Promise<void> | void };

/**
 * Shutdown hooks, run by the launcher on SIGTERM/SIGINT (it finds them on globalThis) in ascending
 * `order`: streams first (10), then the lab (20), audit (30), watchers (40), Redis connections (50).
 */
export function getShutdownHooks(): Hook[] {
  return singleton<Hook[]>("shutdown-hooks", () => []);
}

export function onShutdown(name: string, order: number, run: Hook["run"]): void {
  const hooks = getShutdownHooks();
  const existing = hooks.findIndex((h) => h.name === name);
  if (existing >= 0) hooks.splice(existing, 1);
  hooks.push({ name, order, run });
  hooks.sort((a, b) => a.order - b.order);
}

export function isShuttingDown(): boolean {
  return (globalThis as unknown as Record<symbol, boolean | undefined>)[Symbol.for("lockscope.shutting-down")] === true;
}
