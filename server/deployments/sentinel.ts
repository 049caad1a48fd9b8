import "server-only";
import Redis, { type RedisOptions } from "ioredis";
import type { Deployment } from "@/lib/deployment-config";
import { parseSwitchMaster, type SwitchMaster } from "@/lib/locks/failover";
import { singleton } from "../global";
import { addressOf, authOptions, followPasswordFile, tlsOptions } from "./connection";
import type { DeploymentDriver } from "./types";

/** How long an ended Sentinel connection waits before it connects again. */
const RECONNECT_AFTER_END_MS = 1_000;

/**
 * A sentinel's answer (as ioredis words it) when it monitors no master of the name asked: an error from
 * `SENTINEL SENTINELS <name>`, or no address from `SENTINEL GET-MASTER-ADDR-BY-NAME <name>`.
 */
const NO_SUCH_MASTER = /No such master with that name|successfully, but got an invalid reply: null$/;

type SentinelDeployment = Extract<Deployment, { kind: "sentinel" }>;

const SWITCH_MASTER = "+switch-master";
type Address = { host: string; port: number };

/**
 * A deployment's failovers, for its connections: one subscription to `+switch-master` on each sentinel, open while
 * a connection is, telling each connection of a switch of the deployment's master only. (ioredis' own failover
 * detector opens one subscription per sentinel for every connection, and drops the connection on a switch of any
 * master the sentinels monitor: one sentinel group watching several masters, a failover of one made the console
 * reconnect, mark a gap and read again every deployment on that group.)
 */
class SwitchWatch {
  private readonly connections = new Set<SentinelConnection>();
  private subscribers: Redis[] = [];

  constructor(readonly deployment: SentinelDeployment) {}

  add(connection: SentinelConnection): void {
    this.connections.add(connection);
    if (this.subscribers.length === 0) this.open();
  }

  remove(connection: SentinelConnection): void {
    this.connections.delete(connection);
    if (this.connections.size > 0) return;
    for (const sub of this.subscribers) sub.disconnect();
    this.subscribers = [];
  }

  /** How many of the deployment's sentinels the console is subscribed to now; null while no connection watches. */
  answering(): { answering: number; total: number } | null {
    if (this.subscribers.length === 0) return null;
    return { answering: this.subscribers.filter((s) => s.status === "ready").length, total: this.subscribers.length };
  }

  private open(): void {
    this.subscribers = subscribeToSwitches(this.deployment, "lockscope:switch", (event) => {
      // By address: sentinels that announce host names name the new primary by its name, which a connection's socket
      // knows by its address; told the name, a connection already on the new primary would leave it and come back
      // (one more reconnect and gap in the live view for one failover).
      void addressOf(event.to.host).then((host) => {
        for (const connection of this.connections) connection.primarySwitched({ host, port: event.to.port });
      });
    });
  }
}

/** Each Sentinel deployment's switch watch, by deployment name (kept per process: the health reads it from any bundle). */
const switchWatches = () => singleton("sentinel-switch-watches", () => new Map<string, SwitchWatch>());

/**
 * How many of a Sentinel deployment's sentinels answer the console now (it is subscribed to their `+switch-master`),
 * of how many; null for a deployment that is not Sentinel or not watched yet. None answering: the console would not
 * hear a failover, nor find the primary again once its connection drops.
 */
export function sentinelsAnswering(deployment: string): { answering: number; total: number } | null {
  return switchWatches().get(deployment)?.answering() ?? null;
}

/**
 * Subscribes to `+switch-master` on each of the deployment's sentinels (a connection of its own to each, named
 * `connectionName`) and calls `onSwitch` for every switch of the deployment's master announced there (each sentinel
 * announces the same switch; other masters the sentinels monitor are not told). Returns the subscribers, to close.
 */
export function subscribeToSwitches(d: SentinelDeployment, connectionName: string, onSwitch: (event: SwitchMaster) => void): Redis[] {
  const sentinelAuth = authOptions(d.sentinelAuth, null);
  return d.sentinels.map((sentinel) => {
    const sub = new Redis({
      host: sentinel.host,
      port: sentinel.port,
      ...sentinelAuth,
      ...(d.tls ? { tls: tlsOptions(d.tls) } : {}),
      connectionName,
      disableClientInfo: true,
      // No INFO on connect: the sentinels' ACL user for the console need not have it (see the README), and a
      // refused ready check would drop the connection before it subscribes.
      enableReadyCheck: false,
      enableOfflineQueue: true,
      maxRetriesPerRequest: null,
      retryStrategy: (times: number) => Math.min(100 * 2 ** Math.min(times, 5), 2000),
    });
    followPasswordFile(sub.options, "password", d.sentinelAuth, null);
    // A sentinel that is down is one of several: the others announce the switch too.
    sub.on("error", () => undefined);
    sub.on("message", (channel: string, message: string) => {
      if (channel !== SWITCH_MASTER) return;
      const event = parseSwitchMaster(message);
      if (event?.master === d.master) onSwitch(event);
    });
    void sub.subscribe(SWITCH_MASTER).catch(() => undefined);
    return sub;
  });
}

/**
 * A connection through the sentinels that does not give up after a failover. ioredis ends a Sentinel
 * connection for good (status `end`, no reconnect ever) when `+switch-master` arrives while it is asking a
 * sentinel for the primary: its failover detector closes the connector meanwhile, and the connector then
 * throws "Connection is closed." (a slow or stuck sentinel makes that window long). This one connects again
 * after RECONNECT_AFTER_END_MS, unless it was closed on purpose (`disconnect()`, `quit()`). It moves to a new
 * primary when its deployment's `SwitchWatch` says a sentinel announced one.
 */
class SentinelConnection extends Redis {
  #closedOnPurpose = false;
  /** A switch announced while the connection was asking the sentinels for the primary (which may have named the old one), or was not ready yet. */
  #switchedTo: Address | null = null;
  /**
   * Why each sentinel asked in the current round named no primary. (Not a private `#` field: ioredis may report
   * before this class's fields exist.)
   */
  private sentinelAnswers?: string[];

  constructor(
    options: RedisOptions,
    private readonly switches: SwitchWatch,
  ) {
    super(options);
    // (The instances' password and the sentinels' are read from their files at each connect.)
    followPasswordFile(this.options, "password", switches.deployment.auth, null);
    followPasswordFile(this.options, "sentinelPassword", switches.deployment.sentinelAuth, null);
    switches.add(this);
    const quit = this.quit.bind(this);
    this.quit = (...args: Parameters<Redis["quit"]>) => {
      this.closedOnPurpose();
      return quit(...args);
    };
    this.on("ready", () => {
      const to = this.#switchedTo;
      this.#switchedTo = null;
      // (Once only: a sentinel announcing a host name the socket knows by its address would otherwise never settle.)
      if (to !== null && !this.isOn(to)) this.disconnect(true);
    });
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

  /**
   * A sentinel announced that `to` is the deployment's primary now: the connection asks the sentinels again, unless
   * it is on `to` already (every sentinel announces the same switch). One asking them now may be told the old
   * primary: it checks where it landed once connected.
   */
  primarySwitched(to: Address): void {
    if (this.#closedOnPurpose) return;
    if (this.status === "ready") {
      if (!this.isOn(to)) this.disconnect(true);
    } else if (this.status === "connecting" || this.status === "connect") {
      // Connected but not ready yet ("connect": its first commands' answers are on their way): it checks where it
      // landed once ready. Ended now, the answers still come, ioredis then resubscribes a subscriber on the ended
      // socket, and that refusal ("Stream isn't writeable") is a rejection nobody handles.
      this.#switchedTo = to;
    }
  }

  private isOn(to: Address): boolean {
    return this.stream?.remotePort === to.port && this.stream.remoteAddress?.replace(/^::ffff:/, "") === to.host;
  }

  private closedOnPurpose(): void {
    this.#closedOnPurpose = true;
    this.switches.remove(this);
  }

  override disconnect(reconnect = false): void {
    if (!reconnect) this.closedOnPurpose();
    super.disconnect(reconnect);
  }

  /** A copy (the engine's notification subscriber is one) that does not give up either. */
  override duplicate(override?: Partial<RedisOptions>): SentinelConnection {
    return new SentinelConnection({ ...this.options, ...override }, this.switches);
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
 * A primary that Sentinel fails over: every connection asks the sentinels for the current primary, and moves to the
 * new one as soon as a sentinel announces `+switch-master` for the deployment's master (rather than when the old
 * primary's connection finally fails); see `SwitchWatch`.
 */
export const sentinelDriver: DeploymentDriver<"sentinel"> = {
  kind: "sentinel",
  endpoints: (d) => {
    const sentinelAuth = authOptions(d.sentinelAuth, null);
    const switches = new SwitchWatch(d);
    switchWatches().set(d.name, switches);
    return [
      {
        label: `sentinel://${d.sentinels.map((s) => (s.host.includes(":") ? `[${s.host}]:${s.port}` : `${s.host}:${s.port}`)).join(",")}/${d.master}`,
        url: null,
        connect: (options) =>
          new SentinelConnection({
            sentinels: d.sentinels.map((s) => ({ host: s.host, port: s.port })),
            name: d.master,
            role: "master",
            // (Failovers come from `switches`, which tells this deployment's switches from other masters'.)
            failoverDetector: false,
            // A sentinel that accepts the connection but does not answer (a frozen process, a stuck host) is
            // passed over for the next one after this long: without a bound the connection would wait on it
            // for ever and never reach the primary the other sentinels name.
            sentinelCommandTimeout: sentinelCommandTimeoutMs(options),
            ...authOptions(d.auth, null),
            ...(sentinelAuth.username ? { sentinelUsername: sentinelAuth.username } : {}),
            ...(sentinelAuth.password ? { sentinelPassword: sentinelAuth.password } : {}),
            ...(d.tls ? { tls: tlsOptions(d.tls), enableTLSForSentinelMode: true, sentinelTLS: tlsOptions(d.tls) } : {}),
            ...options,
          }, switches),
      },
    ];
  },
};
