/** What a sleeper can be woken through: `sleep` sets `resolve` while it sleeps and clears it after. */
export interface Wakeable {
  resolve: (() => void) | null;
}

/**
 * The longest delay `setTimeout` honours (2^31 - 1 ms, about 24.8 days): a longer one fires after 1 ms
 * (with a TimeoutOverflowWarning), so settings that are timer delays are refused above it.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Sleeps `ms`, or less when `signal` aborts or `wakeable.resolve()` is called. Resolves true when the full
 * time ran out, false when cut short. Never rejects: the caller looks at the signal itself.
 */
export function abortableSleep(ms: number, signal?: AbortSignal, wakeable?: Wakeable): Promise<boolean> {
  if (ms <= 0) return Promise.resolve(true);
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    // A longer sleep than one timer can hold is made of several.
    const arm = (left: number): ReturnType<typeof setTimeout> =>
      setTimeout(() => (left > MAX_TIMER_MS ? (timer = arm(left - MAX_TIMER_MS)) : finish(true)), Math.min(left, MAX_TIMER_MS));
    let timer = arm(ms);
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
