/** What a sleeper can be woken through: `sleep` sets `resolve` while it sleeps and clears it after. */
export interface Wakeable {
  resolve: (() => void) | null;
}

/**
 * Sleeps `ms`, or less when `signal` aborts or `wakeable.resolve()` is called. Resolves true when the full
 * time ran out, false when cut short. Never rejects: the caller looks at the signal itself.
 */
export function abortableSleep(ms: number, signal?: AbortSignal, wakeable?: Wakeable): Promise<boolean> {
  if (ms <= 0) return Promise.resolve(true);
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => finish(true), ms);
    const cut = () => finish(false);
    function finish(ranOut: boolean) {
      clearTimeout(timer);
      signal?.removeEventListener("abort", cut);
      if (wakeable) wakeable.resolve = null;
      resolve(ranOut);
    }
    signal?.addEventListener("abort", cut, { once: true });
    if (wakeable) wakeable.resolve = cut;
  });
}
