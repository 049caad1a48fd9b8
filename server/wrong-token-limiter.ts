import "server-only";
import { clientLimitKey } from "@/lib/client-address";
import type { LockClient } from "./deployments";
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import { getConfig } from "./config";
import { singleton } from "./global";
import { getNodes } from "./nodes";

export interface WrongTokenVerdict {
  /** Seconds to wait before wrong tokens from this address are answered 401 again; 0 while under both limits. */
  retryAfterSeconds: number;
  /**
   * Which limit the wait is for: this address's, or everyone's (too many wrong tokens from all addresses together).
   * Null while under both.
   */
  limit: "address" | "everyone" | null;
  /** Which limit this wrong token took over (logged once per window), or null. */
  crossed: "address" | "everyone" | null;
}

/** @default 5 different wrong tokens per address in the window. */
export const WRONG_TOKENS_PER_ADDRESS = 5;
/**
 * @default 100 different wrong tokens from all addresses together in the window: a guesser with many addresses
 * (a botnet, an IPv6 host moving between /64 networks) stays under each address's limit, never under this one.
 */
export const WRONG_TOKENS_FROM_EVERYONE = 100;

/**
 * Wrong tokens per client address (an IPv6 one by its /64 network) in a one-minute window, counted once per distinct token (by fingerprint):
 * a script retrying with one stale token is not a guesser, an address trying many different tokens is.
 *
 * The counts live on lock node 0 (rate-limiter-flexible's Redis store), so every console over the same nodes
 * counts the same guesses: spreading them over the replicas behind a load balancer gains a guesser nothing.
 * When node 0 does not answer, each console counts in its own memory until it does (the library's
 * insurance limiter), so the limit never turns into "everything allowed" or "everything refused".
 *
 * A second count takes every address's wrong tokens together: past it, every wrong token is refused, whatever
 * address it comes from, until the window has passed. Only wrong tokens are counted and refused: a right token is
 * checked before the limiter is asked (server/auth.ts), so neither limit can lock out whoever holds one.
 */
export class WrongTokenLimiter {
  /** Address → distinct wrong tokens in the window. */
  readonly #perAddress: RateLimiterAbstract;
  /** Address + fingerprint → seen in the window (a second sighting is not a new guess). */
  readonly #seen: RateLimiterAbstract;
  /** Distinct wrong tokens from every address together in the window (one key). */
  readonly #everyone: RateLimiterAbstract;
  readonly #maxDistinct: number;
  readonly #maxFromEveryone: number;

  constructor(store: LockClient | null, maxDistinct = WRONG_TOKENS_PER_ADDRESS, windowSeconds = 60, maxFromEveryone = WRONG_TOKENS_FROM_EVERYONE) {
    this.#maxDistinct = maxDistinct;
    this.#maxFromEveryone = maxFromEveryone;
    const limiter = (keyPrefix: string, points: number): RateLimiterAbstract => {
      const memory = new RateLimiterMemory({ keyPrefix, points, duration: windowSeconds });
      if (!store) return memory;
      // Fails over at once while the connection is not ready: a sign-in never waits on a dead node.
      return new RateLimiterRedis({ storeClient: store, keyPrefix, points, duration: windowSeconds, rejectIfRedisNotReady: true, insuranceLimiter: memory });
    };
    this.#perAddress = limiter("lockscope:wrong-token:address", maxDistinct);
    this.#seen = limiter("lockscope:wrong-token:seen", 1);
    this.#everyone = limiter("lockscope:wrong-token:everyone", maxFromEveryone);
  }

  /**
   * Records a wrong token from `ip` and says whether the address must wait. The answer is about the
   * address as it was before this token: the limit's worth of wrong tokens get 401, the next ones 429.
   */
  async fail(address: string, fingerprint: string): Promise<WrongTokenVerdict> {
    // An IPv6 client counts by its /64 (see `clientLimitKey`).
    const ip = clientLimitKey(address);
    const before = await this.#perAddress.get(ip);
    const wait = waitSeconds(before, this.#maxDistinct);
    // Past a limit every wrong token gets 429 whatever it is, so there is nothing left to record: a guesser
    // (who needs no credential) must not put a key per guess on the lock node that holds the count.
    if (wait > 0) return { retryAfterSeconds: wait, limit: "address", crossed: null };
    const everyoneWait = waitSeconds(await this.#everyone.get(EVERYONE), this.#maxFromEveryone);
    if (everyoneWait > 0) return { retryAfterSeconds: everyoneWait, limit: "everyone", crossed: null };
    if (!(await consumed(this.#seen, `${ip}:${fingerprint}`))) return { retryAfterSeconds: 0, limit: null, crossed: null };
    const [after, everyoneAfter] = await Promise.all([taken(this.#perAddress, ip), taken(this.#everyone, EVERYONE)]);
    const crossed = after.consumedPoints === this.#maxDistinct ? "address" : everyoneAfter.consumedPoints === this.#maxFromEveryone ? "everyone" : null;
    return { retryAfterSeconds: 0, limit: null, crossed };
  }
}

/** The one key of the count of every address's wrong tokens. */
const EVERYONE = "all";

/** Seconds until the window of a count at `max` ends (at least 1), or 0 while it is below. */
function waitSeconds(count: RateLimiterRes | null, max: number): number {
  return count && count.consumedPoints >= max ? Math.max(1, Math.ceil(count.msBeforeNext / 1000)) : 0;
}

/** Takes a point, and the count after it whether or not the limiter refused it. */
async function taken(limiter: RateLimiterAbstract, key: string): Promise<RateLimiterRes> {
  return limiter.consume(key).catch((rejection: unknown) => {
    if (rejection instanceof RateLimiterRes) return rejection;
    throw rejection;
  });
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
