import "server-only";
import { randomBytes } from "node:crypto";
import { forgottenEntries, peerWarnings, parseBeat, PEER_STALE_MS, type ConsoleBeat } from "@/lib/console-peers";
import { singleton } from "../global";
import { getLogger } from "../logger";
import { getNodes } from "../nodes";
import { onShutdown } from "../shutdown";
import { consoleName, ownSessionSecretFingerprint, ownTokenFingerprints, sessionSecretGenerated } from "./identity";

/** One hash on every lock node: console id → its latest beat (JSON). */
export const CONSOLES_KEY = "lockscope:consoles";
const BEAT_EVERY_MS = 10_000;

export interface ConsoleRegistry {
  self: ConsoleBeat;
  /** The other consoles seen at the last beat. */
  peers(): ConsoleBeat[];
}

/**
 * Every console says it is there, on every lock node, every 10 s, with fingerprints of its session key and its
 * tokens, and warns (once per condition) when another console's key or (with the same key) tokens differ, or
 * when its own key was generated while others run: then a session made on one replica would be refused by the
 * other. Entries of consoles that stopped without removing theirs are removed after `PEER_FORGET_MS`. Costs
 * one HSET, one PEXPIRE and one HGETALL per node per beat (and an HDEL when there is such an entry).
 */
export function startConsoleRegistry(): ConsoleRegistry {
  return singleton("console-registry", () => {
    const name = consoleName();
    const self: ConsoleBeat = {
      id: `${name}/${randomBytes(4).toString("hex")}`,
      name,
      secret: ownSessionSecretFingerprint(),
      generated: sessionSecretGenerated(),
      ...ownTokenFingerprints(),
      at: Date.now(),
    };
    let peers: ConsoleBeat[] = [];
    const reported = new Set<string>();
    const beat = async () => {
      const now = Date.now();
      const entry = JSON.stringify({ ...self, at: now });
      const read = await Promise.allSettled(
        getNodes().map(async (node) => {
          const [, , all] = (await node.client
            .multi()
            .hset(CONSOLES_KEY, self.id, entry)
            .pexpire(CONSOLES_KEY, PEER_STALE_MS * 2)
            .hgetall(CONSOLES_KEY)
            .exec()) as [unknown, unknown, [Error | null, Record<string, string>]];
          const entries = all[1] ?? {};
          // Consoles that were killed without removing their entry, long ago: the list stays as long as the live ones.
          const forgotten = forgottenEntries(entries, now);
          if (forgotten.length > 0) await node.client.hdel(CONSOLES_KEY, ...forgotten).catch(() => 0);
          return entries;
        }),
      );
      // The newest beat of each console over every node that answered.
      const latest = new Map<string, ConsoleBeat>();
      for (const result of read) {
        if (result.status !== "fulfilled") continue;
        for (const raw of Object.values(result.value ?? {})) {
          const b = parseBeat(raw);
          if (b && (latest.get(b.id)?.at ?? 0) < b.at) latest.set(b.id, b);
        }
      }
      if (latest.size === 0) return;
      const outcome = peerWarnings(self, [...latest.values()], now);
      peers = outcome.peers;
      const current = new Set(outcome.warnings.map((w) => w.key));
      for (const warning of outcome.warnings) {
        if (reported.has(warning.key)) continue;
        reported.add(warning.key);
        getLogger().warn({ part: "replicas" }, warning.message);
      }
      for (const key of reported) if (!current.has(key)) reported.delete(key);
    };
    const run = () => void beat().catch((error: unknown) => getLogger().debug({ err: (error as Error).message }, "console registry beat failed"));
    run();
    const timer = setInterval(run, BEAT_EVERY_MS);
    timer.unref();
    onShutdown("console-registry", 44, async () => {
      clearInterval(timer);
      await Promise.allSettled(getNodes().map((n) => n.client.hdel(CONSOLES_KEY, self.id)));
    });
    return { self, peers: () => peers };
  });
}
