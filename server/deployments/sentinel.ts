import "server-only";
import Redis, { type RedisOptions } from "ioredis";
import { authOptions, tlsOptions } from "./connection";
import type { DeploymentDriver } from "./types";

/** How long an ended Sentinel connection waits before it connects again. */
const RECONNECT_AFTER_END_MS = 1_000;

/**
 * A sentinel's answer (as ioredis words it) when it monitors no master of the name asked: an error from
 * `SENTINEL SENTINELS <name>`, or no address from `SENTINEL GET-MASTER-ADDR-BY-NAME <name>`.
 */
const NO_SUCH_MASTER = /No such master with that name|successfully, but got an invalid reply: null$/;

/**
 * A connection through the sentinels that does not give up after a failover. ioredis ends a Sentinel
 * connection for good (status `end`, no reconnect ever) when `+switch-master` arrives while it is asking a
 * sentinel for the primary: its failover detector closes the connector meanwhile, and the connector then
 * throws "Connection is closed." (a slow or stuck sentinel makes that window long). This one connects again
 * after RECONNECT_AFTER_END_MS, unless it was closed on purpose (`disconnect()`, `quit()`).
 */
class SentinelConnection extends Redis {
  #closedOnPurpose = false;
  /**
   * Why each sentinel asked in the current round named no primary. (Not a private `#` field: ioredis may report
   * before this class's fields exist.)
   */
  private sentinelAnswers?: string[];

  constructor(options: RedisOptions) {
    super(options);
    const quit = this.quit.bind(this);
    this.quit = (...args: Parameters<Redis["quit"]>) => {
      this.#closedOnPurpose = true;
      return quit(...args);
    };
    this.on("end", () => {
      if (this.#closedOnPurpose) return;
      const timer = setTimeout(() => {
        if (!this.#closedOnPurpose && this.status === "end") this.connect().catch(() => undefined);
      }, RECONNECT_AFTER_END_MS);
      timer.unref();
    });
  }

  /**
   * ioredis says "All sentinels are unreachable" after a round in which every sentinel answered that it monitors no
   * master of the name given: a wrong master name then reads as a network fault. Such a round is said for what it is.
   */
  override silentEmit(eventName: string, arg?: unknown): boolean {
    if (eventName === "sentinelError" && arg instanceof Error) {
      (this.sentinelAnswers ??= []).push(arg.message);
    } else if (eventName === "error" && arg instanceof Error && arg.message.startsWith("All sentinels are unreachable")) {
      const answers = this.sentinelAnswers ?? [];
      this.sentinelAnswers = [];
      if (answers.length > 0 && answers.every((m) => NO_SUCH_MASTER.test(m))) return super.silentEmit(eventName, noSuchMaster(this.options));
    }
    return super.silentEmit(eventName, arg);
  }

  override disconnect(reconnect = false): void {
    if (!reconnect) this.#closedOnPurpose = true;
    super.disconnect(reconnect);
  }

  /** A copy (the engine's notification subscriber is one) that does not give up either. */
  override duplicate(override?: Partial<RedisOptions>): SentinelConnection {
    return new SentinelConnection({ ...this.options, ...override });
  }
}

/** The error of a round in which every sentinel answered that it monitors no master named as the options name it. */
function noSuchMaster(options: RedisOptions): Error {
  const sentinels = (options.sentinels ?? []).map((s) => `${s.host?.includes(":") ? `[${s.host}]` : (s.host ?? "?")}:${s.port ?? 26379}`).join(", ");
  return new Error(
    `The sentinels (${sentinels}) answer, but none monitors a master named ${JSON.stringify(options.name ?? "")}: check the master name ` +
      `(REDIS_SENTINEL_MASTER, or "master" in the deployments file); SENTINEL MASTERS on a sentinel lists the names it monitors.`,
  );
}

/** How long the console waits for one sentinel's answer before it asks the next: its connect timeout (at least 1 s). */
function sentinelCommandTimeoutMs(options: RedisOptions): number {
  return Math.max(1_000, Number(options.connectTimeout ?? 0));
}

/**
 * A primary that Sentinel fails over: every connection asks the sentinels for the current primary, and
 * `failoverDetector` makes ioredis listen for `+switch-master` on a sentinel and reconnect to the new one
 * at once (rather than when the old primary's connection finally fails).
 */
export const sentinelDriver: DeploymentDriver<"sentinel"> = {
  kind: "sentinel",
  endpoints: (d) => {
    const sentinelAuth = authOptions(d.sentinelAuth, null);
    return [
      {
        label: `sentinel://${d.sentinels.map((s) => (s.host.includes(":") ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`)).join(",")}/${d.master}`,
        url: null,
        connect: (options) =>
          new SentinelConnection({
            sentinels: d.sentinels.map((s) => ({ host: s.host, port: s.port })),
            name: d.master,
            role: "master",
            failoverDetector: true,
            // A sentinel that accepts the connection but does not answer (a frozen process, a stuck host) is
            // passed over for the next one after this long: without a bound the connection would wait on it
            // for ever and never reach the primary the other sentinels name.
            sentinelCommandTimeout: sentinelCommandTimeoutMs(options),
            ...authOptions(d.auth, null),
            ...(sentinelAuth.username ? { sentinelUsername: sentinelAuth.username } : {}),
            ...(sentinelAuth.password ? { sentinelPassword: sentinelAuth.password } : {}),
            ...(d.tls ? { tls: tlsOptions(d.tls), enableTLSForSentinelMode: true, sentinelTLS: tlsOptions(d.tls) } : {}),
            ...options,
          }),
      },
    ];
  },
};
