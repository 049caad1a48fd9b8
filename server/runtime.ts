import "server-only";
import { getSecrets } from "./auth";
import { getConfig } from "./config";
import { setGlobal, singleton } from "./global";
import { getNodes } from "./nodes";

/**
 * Starts what lives as long as the process: the node connections and, as the features land, the keyspace
 * watchers, the telemetry subscriber and the lab. Idempotent: instrumentation may run it per bundle.
 */
export function startServerRuntime(): Promise<void> {
  return singleton("runtime-started", async () => {
    getConfig();
    const secrets = getSecrets();
    // The launcher prints this once, after the URL, so an operator can sign in.
    setGlobal("print-operator-token", () => {
      if (secrets.generated) {
        process.stdout.write(
          `lockscope: generated an operator token (kept in ${secrets.operatorTokenFile}, mode 0600):\n  ${secrets.operatorToken}\n`,
        );
      } else if (getConfig().operatorToken === null) {
        process.stdout.write(`lockscope: operator token: see ${secrets.operatorTokenFile}\n`);
      }
    });
    // The launcher answers some requests itself, before Next.js sees them (scripts/start.ts): counted and logged here.
    setGlobal("note-refused-request", (await import("./refused-requests")).noteRefusedRequest);
    getNodes();
    // Each feature's long-lived part starts here, one line each.
    (await import("./console-metrics")).startConsoleMetrics();
    // Before the live view, so that it starts with the patterns the consoles share (waits at most the node timeout).
    await (await import("./patterns-shared")).startPatternSharing();
    (await import("./live")).startLive();
    (await import("./patterns-audit")).registerPatternsAuditor();
    (await import("./discovery")).getDiscovery();
    (await import("./history/service")).startAuditDatabase();
    (await import("./cluster/registry")).startConsoleRegistry();
    (await import("./cluster/reporter")).startMetricsReporter();
    await Promise.resolve();
  });
}
