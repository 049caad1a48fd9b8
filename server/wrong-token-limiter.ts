import "server-only";
import { clientLimitKey } from "@/lib/client-address";
import type { LockClient } from "./deployments";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import { getConfig } from "./config";
import { singleton } from "./global";
import { getNodes } from "./nodes";

export interface WrongTokenVerdict {
  /** Seconds to wait before wrong tokens from this address are answered 401 again; 0 while under the limit. */
  retryAfterSeconds: number;
  /** True for the wrong token that took the address over the limit (logged once). */
  crossed: boolean;
}

/**
 * Wrong tokens per client address (an IPv6 one by its /64 network) in a one-minute window, counted once per distinct token (by fingerprint):
 * a script retrying with one stale token is not a guesser, an address trying many different tokens is.
 *
 * The counts live on lock node 0 (rate-limiter-flexible's Redis store), so every console over the same nodes
 * counts the same guesses: spreading them over the replicas behind a load balancer gains a guesser nothing.
 * When node 0 does not answer, each console counts in its own memory until it does (the library's
 * insurance limiter), so the limit never turns into "everything allowed" or "everything refused".
 */
export class WrongTokenLimiter {
  /** Address → distinct wrong tokens in the window. */
  readonly #perAddress: RateLimiterAbstract;
  /** Address + fingerprint → seen in the window (a second sighting is not a new guess). */
  readonly #seen: RateLimiterAbstract;
  readonly #maxDistinct: number;

  constructor(store: LockClient | null, maxDistinct = 5, windowSeconds = 60) {
    this.#maxDistinct = maxDistinct;
    const limiter = (keyPrefix: string, points: number): RateLimiterAbstract => {
      const memory = new RateLimiterMemory({ keyPrefix, points, duration: windowSeconds });
      if (!store) return memory;
      // Fails over at once while the connection is not ready: a sign-in never waits on a dead node.
      return new RateLimiterRedis({ storeClient: store, keyPrefix, points, duration: windowSeconds, rejectIfRedisNotReady: true, insuranceLimiter: memory });
    };
    this.#perAddress = limiter("lockscope:wrong-token:address", maxDistinct);
    this.#seen = limiter("lockscope:wrong-token:seen", 1);
  }

  /**
   * Records a wrong token from `ip` and says whether the address must wait. The answer is about the
   * address as it was before this token: the limit's worth of wrong tokens get 401, the next ones 429.
   */
  async fail(address: string, fingerprint: string): Promise<WrongTokenVerdict> {
    // An IPv6 client counts by its /64 (see `clientLimitKey`).
    const ip = clientLimitKey(address);
    const before = await this.#perAddress.get(ip);
    const wait = before && before.consumedPoints >= this.#maxDistinct ? Math.max(1, Math.ceil(before.msBeforeNext / 1000)) : 0;
    // Past the limit every wrong token gets 429 whatever it is, so there is nothing left to record: a guesser
    // (who needs no credential) must not put a key per guess on the lock node that holds the count.
    if (wait > 0) return { retryAfterSeconds: wait, crossed: false };
    if (!(await consumed(this.#seen, `${ip}:${fingerprint}`))) return { retryAfterSeconds: wait, crossed: false };
    const after = await this.#perAddress.consume(ip).catch((rejection: unknown) => {
      if (rejection instanceof RateLimiterRes) return rejection;
      throw rejection;
    });
    return { retryAfterSeconds: wait, crossed: after.consumedPoints === this.#maxDistinct };
  }
}

/** True when the point was taken (a first sighting), false when the limiter refused it. */
async function consumed(limiter: RateLimiterAbstract, key: string): Promise<boolean> {
  try {
    await limiter.consume(key);
    return true;
  } catch (rejection) {
    if (rejection instanceof RateLimiterRes) return false;
    throw rejection;
  }
}

export function getWrongTokenLimiter(): WrongTokenLimiter {
  return singleton("wrong-token-limiter", () => new WrongTokenLimiter(getConfig().deployments ? (getNodes()[0]?.client ?? null) : null));
}
