import type { RedlockClient, SubscriberClient } from "./client";
import { toError } from "./errors";
import { parseReleaseMessage, parseRevokeMessage, REVOKE_CHANNEL } from "./telemetry";

/** @internal A waiter between attempts, woken early by a release of one of its resources. */
export interface Waiter {
  id: string;
  wake(): void;
}

/** How long a release heard just before a waiter registered still wakes it (see `addWaiter`). */
const RECENT_RELEASE_MS = 50;
const RECENT_RELEASES = 16;

/**
 * @internal The engine's subscriber connections, one per node, made with `duplicate()` only when a waiter
 * or a `using()` lock needs them and closed again after `idleMs` without users, so they never keep a
 * process alive for good.
 *
 * Revocations (`forceRelease`) are heard on every node: they are rare, and the holder's `using()` signal
 * should abort at once even when some node is down. Wake-ups are heard on this instance's own wake channel
 * (a release publishes there only when it names one of this instance's waiters as the next one), and on
 * ONE node only, the first that subscribes, moving to the next when its connection fails: every release is
 * published on each node that deleted the lock, so listening on all N would deliver it N times, for a
 * message that is only a hint (a waiter that misses it retries on its timer, capped at the holder's
 * remaining TTL).
 */
export class Notifications {
  #subscribers: Array<SubscriberClient | null> | null = null;
  /** The node whose connection carries the wake channel for the current connections; -1 while none does. */
  #wakeNode = -1;
  #users = 0;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  readonly #waiters = new Map<string, Set<Waiter>>();
  readonly #held = new Map<string, (resource: string) => void>();
  // A ring of the last releases heard: resource, next waiter id or "", performance.now().
  readonly #recent = new Array<{ resource: string; next: string; at: number } | undefined>(RECENT_RELEASES);
  #recentAt = 0;

  constructor(
    private readonly clients: readonly RedlockClient[],
    /** This engine instance's wake channel (`wakeChannel(id)` of the waiter ids it makes). */
    private readonly wakeChannel: string,
    private readonly idleMs: number,
    private readonly onNodeError: (index: number, error: Error) => void,
  ) {}

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
    this.#idleTimer = setTimeout(() => {
      this.#idleTimer = undefined;
      if (this.#users === 0) this.#disconnect();
    }, this.idleMs);
    this.#idleTimer.unref?.();
  }

  /**
   * Registers a waiter that was just refused. A release may have been heard between the refusal on a node
   * and this call (the refusal reply and the release message travel on different connections): one heard
   * in the last moments that names this waiter (or nobody) wakes it at once, so it is not lost.
   */
  addWaiter(resources: readonly string[], waiter: Waiter): void {
    const since = performance.now() - RECENT_RELEASE_MS;
    let missed = false;
    for (const resource of resources) {
      let set = this.#waiters.get(resource);
      if (!set) this.#waiters.set(resource, (set = new Set()));
      set.add(waiter);
      for (const release of this.#recent) {
        if (release && release.at >= since && release.resource === resource && (release.next === "" || release.next === waiter.id)) missed = true;
      }
    }
    if (missed) waiter.wake();
  }

  removeWaiter(resources: readonly string[], waiter: Waiter): void {
    for (const resource of resources) {
      const set = this.#waiters.get(resource);
      if (!set) continue;
      set.delete(waiter);
      if (set.size === 0) this.#waiters.delete(resource);
    }
  }

  /** Calls `onRevoked` when `forceRelease` deletes `value`; returns the function that stops watching. */
  watchRevocation(value: string, onRevoked: (resource: string) => void): () => void {
    this.#held.set(value, onRevoked);
    this.retain();
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
      subscriber.on("error", (error) => {
        this.onNodeError(index, error);
        // The wake-up connection failed: hear wake-ups on another node meanwhile.
        if (this.#subscribers === generation && this.#wakeNode === index) this.#moveWakeNode(generation, index);
      });
      subscriber.on("message", (channel, message) => this.#dispatch(channel, message));
      return subscriber;
    });
    this.#subscribers = generation;
    this.#wakeNode = -1;
    generation.forEach((subscriber, index) => {
      if (subscriber) this.#subscribe(generation, subscriber, index, 0);
    });
  }

  #subscribe(generation: Array<SubscriberClient | null>, subscriber: SubscriberClient, index: number, failures: number): void {
    subscriber.subscribe(REVOKE_CHANNEL).then(
      () => {
        // The first node to answer carries the wake-ups.
        if (this.#subscribers === generation && this.#wakeNode === -1) this.#listenForWakes(generation, index, 0);
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

  #listenForWakes(generation: Array<SubscriberClient | null>, index: number, failures: number): void {
    const subscriber = generation[index];
    this.#wakeNode = index;
    if (!subscriber) {
      this.#moveWakeNode(generation, index, failures + 1);
      return;
    }
    subscriber.subscribe(this.wakeChannel).then(
      () => {
        if (this.#subscribers !== generation || this.#wakeNode !== index) return;
        // Releases published before this subscription took effect were not heard: every current waiter
        // retries once, so none sleeps through a release it missed.
        for (const set of this.#waiters.values()) for (const waiter of set) waiter.wake();
      },
      (error: unknown) => {
        this.onNodeError(index, toError(error));
        if (this.#subscribers === generation && this.#wakeNode === index) this.#moveWakeNode(generation, index, failures + 1);
      },
    );
  }

  #moveWakeNode(generation: Array<SubscriberClient | null>, from: number, failures = 0): void {
    // Best effort: a reconnecting client would otherwise subscribe again and deliver every release twice.
    generation[from]?.unsubscribe(this.wakeChannel).catch(() => {});
    this.#wakeNode = -1;
    const next = (from + 1) % generation.length;
    // Round the nodes with a growing pause once every node has failed in turn.
    const delayMs = failures < generation.length ? 0 : Math.min(1000, 50 * 2 ** (failures - generation.length));
    const timer = setTimeout(() => {
      if (this.#subscribers === generation && this.#wakeNode === -1) this.#listenForWakes(generation, next, failures);
    }, delayMs);
    timer.unref?.();
  }

  #disconnect(): void {
    const subscribers = this.#subscribers;
    this.#subscribers = null;
    this.#wakeNode = -1;
    for (const subscriber of subscribers ?? []) subscriber?.disconnect();
  }

  #dispatch(channel: string, message: string): void {
    if (channel === this.wakeChannel) {
      // Parsed and remembered even with nobody waiting yet: a waiter being refused right now may need it.
      const event = parseReleaseMessage(message);
      if (!event) return;
      this.#recent[this.#recentAt] = { resource: event.resource, next: event.nextWaiterId ?? "", at: performance.now() };
      this.#recentAt = (this.#recentAt + 1) % RECENT_RELEASES;
      const set = this.#waiters.get(event.resource);
      if (!set) return;
      for (const waiter of set) {
        // The release names the head of the resource's waiter queue: waking the others too would only
        // add attempts that fail (fair mode) or a stampede for one free lock (otherwise).
        if (event.nextWaiterId && event.nextWaiterId !== waiter.id) continue;
        waiter.wake();
      }
    } else if (channel === REVOKE_CHANNEL) {
      if (this.#held.size === 0) return;
      const event = parseRevokeMessage(message);
      if (event) this.#held.get(event.value)?.(event.resource);
    }
  }
}
