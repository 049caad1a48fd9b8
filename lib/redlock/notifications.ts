import type { RedlockClient, SubscriberClient } from "./client";
import { toError } from "./errors";
import { parseReleaseMessage, parseRevokeMessage, RELEASE_CHANNEL, REVOKE_CHANNEL } from "./telemetry";

/** @internal A waiter between attempts, woken early by a release of one of its resources. */
export interface Waiter {
  id: string;
  wake(): void;
}

/**
 * @internal The engine's subscriber connections: one per node (a release is published on every node, and
 * any one of them may be down), made with `duplicate()` only when a waiter or a `using()` lock needs them,
 * and closed again after `idleMs` without users, so they never keep a process alive for good.
 */
export class Notifications {
  #subscribers: Array<SubscriberClient | null> | null = null;
  #users = 0;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  #closed = false;
  readonly #waiters = new Map<string, Set<Waiter>>();
  readonly #held = new Map<string, (resource: string) => void>();

  constructor(
    private readonly clients: readonly RedlockClient[],
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

  addWaiter(resources: readonly string[], waiter: Waiter): void {
    for (const resource of resources) {
      let set = this.#waiters.get(resource);
      if (!set) this.#waiters.set(resource, (set = new Set()));
      set.add(waiter);
    }
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
    const subscribers = this.clients.map((client, index): SubscriberClient | null => {
      let subscriber: SubscriberClient;
      try {
        subscriber = client.duplicate();
      } catch (error) {
        this.onNodeError(index, toError(error));
        return null;
      }
      subscriber.on("error", (error) => this.onNodeError(index, error));
      subscriber.on("message", (channel, message) => this.#dispatch(channel, message));
      return subscriber;
    });
    this.#subscribers = subscribers;
    subscribers.forEach((subscriber, index) => {
      if (subscriber) this.#subscribe(subscribers, subscriber, index, 0);
    });
  }

  #subscribe(generation: Array<SubscriberClient | null>, subscriber: SubscriberClient, index: number, failures: number): void {
    subscriber.subscribe(RELEASE_CHANNEL, REVOKE_CHANNEL).catch((error: unknown) => {
      this.onNodeError(index, toError(error));
      // A client without offline queue refuses commands until connected, and a node may be down: try
      // again while these connections are still the current ones (waiters poll meanwhile).
      if (this.#subscribers !== generation) return;
      const timer = setTimeout(() => {
        if (this.#subscribers === generation) this.#subscribe(generation, subscriber, index, failures + 1);
      }, Math.min(1000, 50 * 2 ** failures));
      timer.unref?.();
    });
  }

  #disconnect(): void {
    const subscribers = this.#subscribers;
    this.#subscribers = null;
    for (const subscriber of subscribers ?? []) subscriber?.disconnect();
  }

  #dispatch(channel: string, message: string): void {
    if (channel === RELEASE_CHANNEL) {
      if (this.#waiters.size === 0) return;
      const event = parseReleaseMessage(message);
      const set = event && this.#waiters.get(event.resource);
      if (!event || !set) return;
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
