import "server-only";
import { singleton } from "../global";
import { getLogger } from "../logger";
import { isShuttingDown, onShutdown } from "../shutdown";
import { consoleName } from "./identity";
import { isResourceHeld, LEASE_KEYS, takeLease, type Lease } from "./lease";

/** The lease's TTL; extended while held, so a dead reporter is replaced within about this long. */
const REPORTER_TTL_MS = 15_000;
/** How often a console without the lease tries to take it. */
const RETRY_EVERY_MS = 5_000;

export interface MetricsReporter {
  /** True while this console holds the reporter lease. */
  holds(): boolean;
  /**
   * Whether this console exports the shared metrics: while it is the reporter, and also whenever nobody can
   * be (no quorum to hold a lease, or before the first try): the nodes' metrics must never vanish in the
   * very incident they describe. The rules and the dashboard take the `max` over consoles, so the moments
   * when several export count each fact once too.
   */
  exports(): boolean;
}

/**
 * Elects, among every console over the same lock nodes, the one that exports the metrics describing the
 * nodes and the locks (`shared` in server/metrics.ts), with a lease taken with the console's own Redlock
 * engine. One console: it is always the reporter. Several: exactly one is, so a dashboard's sums and an
 * alert see each fact once; when it stops or loses its nodes, another takes over within the lease's TTL
 * (the alert rules aggregate the instance away, so an alert keeps its identity across the hand-over).
 * Costs one SET NX per node every 5 s on the consoles that are not the reporter, and one extension per
 * node about every 14 s on the reporter.
 */
export function startMetricsReporter(): MetricsReporter {
  return singleton("metrics-reporter", () => {
    let lease: Lease | null = null;
    /** Whether the last try found the lease held by another console (only then does this one stay quiet). */
    let heldElsewhere = false;
    let timer: NodeJS.Timeout | undefined;
    /** Set by the shutdown step: from then on no lease is kept. */
    let stopped = false;
    const attempt = async () => {
      if (lease || isShuttingDown()) return;
      try {
        const taken = await takeLease(LEASE_KEYS.metricsReporter, REPORTER_TTL_MS, `metrics reporter ${consoleName()}`);
        if (stopped) {
          // Taken by a try that began before the console started stopping: kept, it would be extended until the
          // connections close and then hold every other console off for its whole TTL.
          await taken.release();
          return;
        }
        lease = taken;
        heldElsewhere = false;
        getLogger().info({ part: "replicas" }, "this console reports the lock nodes' metrics");
        taken.signal.addEventListener("abort", () => {
          if (lease === taken) lease = null;
          getLogger().info({ part: "replicas" }, "this console no longer reports the lock nodes' metrics");
        }, { once: true });
      } catch (error) {
        // Held by another console, or no quorum right now: try again later.
        heldElsewhere = isResourceHeld(error);
      }
    };
    const run = () => void attempt();
    run();
    timer = setInterval(run, RETRY_EVERY_MS);
    timer.unref();
    // First of all at shutdown: another console takes over at its next try instead of after the TTL.
    onShutdown("metrics-reporter", 5, async () => {
      stopped = true;
      clearInterval(timer);
      timer = undefined;
      const held = lease;
      lease = null;
      // A try under way lets go of what it takes by itself (see above): waited for here, it would hold up the
      // drain of the requests in flight for as long as unreachable nodes take to fail it.
      await held?.release();
    });
    const holds = () => lease !== null && !lease.signal.aborted;
    return { holds, exports: () => holds() || !heldElsewhere };
  });
}
