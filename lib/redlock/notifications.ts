import type { RedlockClient, ScriptClient, SubscriberClient } from "./client.ts";
import { toError } from "./errors.ts";
import { quorumOf } from "./round.ts";
import { MAX_TIMER_MS } from "./sleep.ts";
import { parseRevokeMessage, parseWakeMessage, REVOKE_CHANNEL } from "./telemetry.ts";

/** A client that says when its connection closed for good (ioredis: "end"). */
interface Followable {
  on(event: "end", listener: () => void): unknown;
}

/** Per client, what to run when it ends: one listener on the client however many engine instances use it. */
const endWatchers = new WeakMap<object, Set<() => void>>();

/** Runs `onEnd` when `client` closes for good, until the returned function is called. */
function watchEnd(client: Followable, onEnd: () => void): () => void {
  let watchers = endWatchers.get(client);
  if (!watchers) {
    const made = new Set<() => void>();
    watchers = made;
    endWatchers.set(client, made);
    client.on("end", () => {
      for (const watcher of [...made]) watcher();
    });
  }
  watchers.add(onEnd);
  return () => watchers.delete(onEnd);
}

/** @internal A waiter between attempts, woken early by a release of one of its resources. */
export interface Waiter {
  id: string;
  wake(): void;
  /** Node `node` wrote the lock in this waiter's value, answering its attempt `attempt` (see HAND_OVER_LUA). */
  grant(node: number, attempt: number, fence: string): void;
  /**
   * Not woken when the subscriptions first take effect (see `#subscribe`): it polls on its retry delay for a
   * release heard before then, as node-redlock does, rather than spend one of its counted attempts at once.
   */
  readonly pollsUntilListening?: boolean;
}

/**
 * How long a message heard just before a waiter registered still reaches it (see `addWaiter`): a refusal
 * and the release right after it travel on different connections, and the refused round may wait for a
 * slow node before the waiter registers.
 */
const RECENT_MS = 1000;
const RECENT_MESSAGES = 64;

/**
 * The waiters of every engine instance in this process, by id, with their instance's clients. A release
 * that hands a lock over says so in its reply (see RELEASE_LUA); when the waiter lives in this process and
 * its engine uses the same client for that node, it is told at once, without waiting for the grant message
 * to come round on its subscriber connection. Ids are random (60 random bits after a 36-bit instance tag,
 * itself random): no two waiters share one.
 */
const localWaiters = new Map<string, { clients: readonly RedlockClient[]; waiter: Waiter }>();

/** @internal A release answered by `client` handed the lock to waiter `id` for its attempt `attempt`. */
export function deliverLocalGrant(client: ScriptClient, id: string, attempt: number, fence: string): void {
  const local = localWaiters.get(id);
  if (!local) return;
  const node = local.clients.indexOf(client as RedlockClient);
  if (node >= 0) local.waiter.grant(node, attempt, fence);
}

interface RecentMessage {
  resource: string;
  /** The waiter the release named ("" for anyone). */
  next: string;
  at: number;
  /** Grants only: the node, the attempt it answers and the fence it reported. */
  grant: { node: number; attempt: number; fence: string } | null;
}

/**
 * @internal The engine's subscriber connections, one per node, made with `duplicate()` only when a waiter
 * or a `using()` lock needs them and closed again after `idleMs` without users, so they never keep a
 * process alive for good.
 *
 * Every node's connection listens to revocations (`forceRelease`: the holder's `using()` signal should
 * abort at once even when some node is down) and to this instance's own wake channel, where a release
 * publishes only when it hands a lock to one of this instance's waiters or wakes one (see HAND_OVER_LUA).
 * Grants must be heard from every node: a waiter holds the lock once a quorum of nodes granted it. A
 * message missed (a connection down or not subscribed yet) costs time, never safety: the waiter retries on
 * its timer, capped at the holder's remaining TTL, and finds the lock already written in its own value.
 */
export class Notifications {
  #subscribers: Array<SubscriberClient | null> | null = null;
  /** The current connections have told the waiters to retry once they listen (see `#subscribe`). */
  #listening = false;
  /** How many of the current connections have their subscriptions in effect. */
  #subscribed = 0;
  /** Callers of `whenListening` waiting for a quorum of subscriptions. */
  #onQuorum: Array<() => void> = [];
  #users = 0;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  /** Stops following the clients' "end" (see `#followClients`). */
  #unfollowClients: (() => void) | null = null;
  /** A client ended while the connections were in use: they close as soon as nothing uses them. */
  #clientEnded = false;
  readonly #waiters = new Map<string, Set<Waiter>>();
  readonly #held = new Map<string, (resource: string) => void>();
  // A ring of the last messages heard on the wake channel.
  readonly #recent = new Array<RecentMessage | undefined>(RECENT_MESSAGES);
  #recentAt = 0;
  // The last revocations heard, for a holder that starts watching a moment after its lock was revoked.
  readonly #recentRevocations = new Array<{ value: string; resource: string; at: number } | undefined>(RECENT_MESSAGES);
  #recentRevocationAt = 0;

  constructor(
    private readonly clients: readonly RedlockClient[],
    /** This engine instance's wake channel (`wakeChannel(id)` of the waiter ids it makes). */
    private readonly wakeChannel: string,
    private readonly idleMs: number,
    private readonly onNodeError: (index: number, error: Error) => void,
  ) {}

  /** Nothing waits, listens for a revocation or holds the subscription open (it may still be closing after use). */
  get idle(): boolean {
    return this.#users <= 0;
  }

  /** Keeps the subscription open (opening it if needed) until the matching `unretain()`. */
  retain(): void {
    if (this.#closed) return;
    this.#users += 1;
    if (this.#idleTimer !== undefined) {
      clearTimeout(this.#idleTimer);
      this.#idleTimer = undefined;
    }
    if (!this.#subscribers) this.#open();
  }

  unretain(): void {
    this.#users -= 1;
    if (this.#users > 0 || this.#closed || !this.#subscribers) return;
    if (this.#clientEnded) {
      this.#disconnect();
      return;
    }
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      if (this.#users === 0) this.#disconnect();
    }, this.idleMs);
    this.#idleTimer.unref?.();
  }

  /**
   * Registers a waiter that was just refused. A release may have been heard between the refusal on a node
   * and this call (the refusal reply and the release message travel on different connections): one heard
   * in the last moments that names this waiter (or nobody) wakes it at once, and grants to it are
   * replayed, so neither is lost.
   */
  addWaiter(resources: readonly string[], waiter: Waiter): void {
    const since = performance.now() - RECENT_MS;
    let missed = false;
    localWaiters.set(waiter.id, { clients: this.clients, waiter });
    for (const resource of resources) {
      let set = this.#waiters.get(resource);
      if (!set) this.#waiters.set(resource, (set = new Set()));
      set.add(waiter);
      for (const message of this.#recent) {
        if (!message || message.at < since || message.resource !== resource) continue;
        if (message.grant) {
          if (message.next === waiter.id) waiter.grant(message.grant.node, message.grant.attempt, message.grant.fence);
        } else if (message.next === "" || message.next === waiter.id) missed = true;
      }
    }
    if (missed) waiter.wake();
  }

  removeWaiter(resources: readonly string[], waiter: Waiter): void {
    if (localWaiters.get(waiter.id)?.waiter === waiter) localWaiters.delete(waiter.id);
    for (const resource of resources) {
      const set = this.#waiters.get(resource);
      if (!set) continue;
      set.delete(waiter);
      if (set.size === 0) this.#waiters.delete(resource);
    }
  }

  /**
   * Resolves once a quorum of the connections have their subscriptions in effect (a force release deletes
   * the lock on a quorum at least, and publishes the revocation on each of them, so one of those nodes is
   * heard), or after `timeoutMs` (a node that does not answer must not stall anyone), or at once when
   * closed or when `signal` aborts (the caller gives up: it must not wait for nodes first). Call after
   * `retain()`.
   */
  whenListening(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (this.#closed || !this.#subscribers || this.#subscribed >= quorumOf(this.clients.length) || signal?.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        // (Called by the quorum, the list was swapped for an empty one first: nothing to take out.)
        const index = this.#onQuorum.indexOf(done);
        if (index !== -1) this.#onQuorum.splice(index, 1);
        resolve();
      };
      const timer = setTimeout(done, Math.min(timeoutMs, MAX_TIMER_MS));
      this.#onQuorum.push(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  /** Calls `onRevoked` when `forceRelease` deletes `value`; returns the function that stops watching. */
  watchRevocation(value: string, onRevoked: (resource: string) => void): () => void {
    this.#held.set(value, onRevoked);
    this.retain();
    // A revocation heard between the acquisition and this call (the lock was taken on the nodes a moment
    // before its holder got to watch it) still counts.
    const since = performance.now() - RECENT_MS;
    for (const revoked of this.#recentRevocations) {
      if (revoked && revoked.at >= since && revoked.value === value) queueMicrotask(() => this.#held.get(value)?.(revoked.resource));
    }
    return () => {
      if (this.#held.get(value) === onRevoked) this.#held.delete(value);
      this.unretain();
    };
  }

  /** Closes the connections this class opened (never the caller's clients) and stops opening new ones. */
  close(): void {
    this.#closed = true;
    if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
    this.#disconnect();
    for (const set of this.#waiters.values()) for (const waiter of set) waiter.wake();
  }

  #open(): void {
    const generation: Array<SubscriberClient | null> = this.clients.map((client, index): SubscriberClient | null => {
      let subscriber: SubscriberClient;
      try {
        subscriber = client.duplicate();
      } catch (error) {
        this.onNodeError(index, toError(error));
        return null;
      }
      subscriber.on("error", (error) => this.onNodeError(index, error));
      subscriber.on("message", (channel, message) => this.#dispatch(channel, message, index));
      return subscriber;
    });
    this.#subscribers = generation;
    this.#followClients();
    this.#listening = false;
    this.#subscribed = 0;
    generation.forEach((subscriber, index) => {
      if (subscriber) this.#subscribe(generation, subscriber, index, 0);
    });
  }

  #subscribe(generation: Array<SubscriberClient | null>, subscriber: SubscriberClient, index: number, failures: number): void {
    // A promise whatever the client returns or throws: a failure here is that node's error, never a throw.
    let subscribed: Promise<unknown>;
    try {
      subscribed = Promise.resolve(subscriber.subscribe(REVOKE_CHANNEL, this.wakeChannel));
    } catch (error) {
      subscribed = Promise.reject(toError(error));
    }
    subscribed.then(
      () => {
        if (this.#subscribers !== generation) return;
        this.#subscribed += 1;
        if (this.#subscribed >= quorumOf(this.clients.length)) this.#releaseQuorumWaiters();
        if (this.#listening) return;
        // Releases published before the first subscription took effect were not heard: every current
        // waiter retries once, so none sleeps through a release it missed.
        this.#listening = true;
        for (const set of this.#waiters.values()) for (const waiter of set) if (!waiter.pollsUntilListening) waiter.wake();
      },
      (error: unknown) => {
        this.onNodeError(index, toError(error));
        // A client without offline queue refuses commands until connected, and a node may be down: try
        // again while these connections are still the current ones (waiters poll meanwhile).
        if (this.#subscribers !== generation) return;
        const timer = setTimeout(() => {
          if (this.#subscribers === generation) this.#subscribe(generation, subscriber, index, failures + 1);
        }, Math.min(1000, 50 * 2 ** failures));
        timer.unref?.();
      },
    );
  }

  /**
   * While the connections are open: when the application closes one of its clients for good (ioredis emits
   * "end"), connections nobody uses any more close at once instead of after `idleMs` (ones in use, as soon as
   * their last user is done), so they do not keep the process alive after the application let go of its own.
   */
  #followClients(): void {
    const onEnd = () => {
      if (!this.#subscribers) return;
      if (this.#users > 0) {
        this.#clientEnded = true;
        return;
      }
      if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
      this.#idleTimer = undefined;
      this.#disconnect();
    };
    const unwatch = this.clients.filter((client) => typeof (client as Partial<Followable>).on === "function").map((client) => watchEnd(client as unknown as Followable, onEnd));
    this.#unfollowClients = () => {
      for (const stop of unwatch) stop();
    };
  }

  #releaseQuorumWaiters(): void {
    const waiting = this.#onQuorum;
    this.#onQuorum = [];
    for (const done of waiting) done();
  }

  #disconnect(): void {
    const subscribers = this.#subscribers;
    this.#subscribers = null;
    this.#unfollowClients?.();
    this.#unfollowClients = null;
    this.#clientEnded = false;
    this.#listening = false;
    this.#subscribed = 0;
    this.#releaseQuorumWaiters();
    for (const subscriber of subscribers ?? []) subscriber?.disconnect();
  }

  #dispatch(channel: string, message: string, node: number): void {
    if (channel === this.wakeChannel) {
      // Parsed and remembered even with nobody waiting yet: a waiter being refused right now may need it.
      const event = parseWakeMessage(message);
      if (!event) return;
      if (event.kind === "revoke") {
        this.#revoked(event.value, event.resource);
        return;
      }
      const next = event.nextWaiterId ?? "";
      const grant = event.kind === "grant" ? { node, attempt: event.attempt, fence: event.fence } : null;
      this.#recent[this.#recentAt] = { resource: event.resource, next, at: performance.now(), grant };
      this.#recentAt = (this.#recentAt + 1) % RECENT_MESSAGES;
      const set = this.#waiters.get(event.resource);
      if (!set) return;
      for (const waiter of set) {
        // The release names the head of the resource's waiter queue: waking the others too would only
        // add attempts that fail (fair mode) or a stampede for one free lock (otherwise).
        if (next !== "" && next !== waiter.id) continue;
        if (grant) waiter.grant(grant.node, grant.attempt, grant.fence);
        else waiter.wake();
      }
    } else if (channel === REVOKE_CHANNEL) {
      const event = parseRevokeMessage(message);
      if (event) this.#revoked(event.value, event.resource);
    }
  }

  /** A lock with `value` was taken away (heard on the shared channel and, for this instance's own, on its channel). */
  #revoked(value: string, resource: string): void {
    this.#recentRevocations[this.#recentRevocationAt] = { value, resource, at: performance.now() };
    this.#recentRevocationAt = (this.#recentRevocationAt + 1) % RECENT_MESSAGES;
    this.#held.get(value)?.(resource);
  }
}
