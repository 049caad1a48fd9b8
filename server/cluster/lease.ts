import "server-only";
import { Redlock, type NodesFailedError, type ResourceHeldError } from "@lockscope/redlock";
import { singleton } from "../global";
import { getNodes, type LockNode } from "../nodes";
import { onShutdown } from "../shutdown";

/**
 * A lease held across every console over the same lock nodes, taken with the console's own engine: the
 * lab's "one run at a time" and the metrics reporter. Held with `using()`, so it is extended while held and
 * `signal` aborts the moment it is lost (no quorum answered its extensions for the last `EXTEND_AHEAD_MS` of its validity, or force-released).
 */
export interface Lease {
  readonly signal: AbortSignal;
  /** Lets go of it (idempotent); resolves once the release round is done. */
  release(): Promise<void>;
}

/** Keys of the console's own leases: outside LOCK_PATTERNS' defaults, so they are not listed as locks. */
export const LEASE_KEYS = Object.freeze({ lab: "lockscope:lease:lab-run", metricsReporter: "lockscope:lease:metrics-reporter", patterns: "lockscope:lease:patterns" });

/**
 * A lease is extended once this much of its validity is left (every lease's TTL is longer: 10 s at least), and
 * tried again until it runs out: it is lost only when a quorum does not answer for about this long. With the
 * engine's default (500 ms), a node down and another stalled for a moment when the extension fell due (a fork
 * for a snapshot, a busy machine) lost the lease, and the lab run holding it stopped.
 */
const EXTEND_AHEAD_MS = 5_000;

/**
 * Where a lease is held when not on the first deployment's nodes: on those of deployment `deployment` (the lab's
 * lease is held on the nodes the lab runs on, which every console running the lab over them shares, whatever
 * other deployments each watches).
 */
export interface LeaseNodes {
  deployment: string;
  nodes: readonly LockNode[];
}

function leaseEngine(on?: LeaseNodes): Redlock {
  return singleton(on ? `lease-redlock:${on.deployment}` : "lease-redlock", () => {
    // No contention telemetry (a refused lease is not contention anyone should be paged for) and no retries:
    // a caller that finds the lease held is told so at once.
    const redlock = new Redlock((on?.nodes ?? getNodes()).map((n) => n.client), { telemetry: false, retryCount: 0, automaticExtensionThresholdMs: EXTEND_AHEAD_MS });
    onShutdown(on ? `lease-engine:${on.deployment}` : "lease-engine", 45, () => redlock.quit());
    return redlock;
  });
}

/**
 * Takes `resource` for as long as the caller holds the lease. Rejects with the engine's `ResourceHeldError`
 * (whose `heldBy[].holder.label` names the holder) or `NodesFailedError` when it cannot be had. `retryCount`:
 * tries again that many times (the engine's pause between tries, 200 ms or so) while another holds it.
 */
export function takeLease(resource: string, ttlMs: number, label: string, retryCount = 0, on?: LeaseNodes): Promise<Lease> {
  return new Promise<Lease>((resolve, reject) => {
    let letGo: () => void = () => undefined;
    const released = new Promise<void>((r) => (letGo = r));
    const held = leaseEngine(on).using([resource], ttlMs, { retryCount, label }, async (signal) => {
      resolve({
        signal,
        release: async () => {
          letGo();
          await held.catch(() => undefined);
        },
      });
      await new Promise<void>((done) => {
        if (signal.aborted) return done();
        signal.addEventListener("abort", () => done(), { once: true });
        void released.then(done);
      });
    });
    // Before the routine ran: the acquisition failed. After: nothing waits on it (release() swallows it).
    held.catch(reject);
  });
}

/*
 * By name, not `instanceof`: Next.js bundles the engine into more than one server chunk, so the error a
 * lease rejects with may come from another copy of the class than the one a route imports.
 */
export const isResourceHeld = (error: unknown): error is ResourceHeldError => error instanceof Error && error.name === "ResourceHeldError";
export const isNodesFailed = (error: unknown): error is NodesFailedError => error instanceof Error && error.name === "NodesFailedError";
