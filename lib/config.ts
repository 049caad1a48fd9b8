import { z } from "zod";
import { DEFAULT_LOCK_PATTERNS_ENV, patternKeysProblem } from "./locks/formats/defaults";
import { globProblem } from "./locks/glob";
import { parseProxyEntry } from "./client-address";
import { maskUrl, parseDeployments, shownList, shownValue, urlProblem, type Deployment, type ReadFile } from "./deployment-config";
import { linearRegExp, NotLinearError } from "./linear-regexp";
import { MAKE_SECRET, MIN_SECRET_LENGTH, weakSecretProblem } from "./secret-strength";

/**
 * The console's configuration, parsed once from an environment-shaped record. This module never reads the
 * environment itself: `server/config.ts` (and the launcher, which owns the process) pass it in.
 */
export interface LockscopeConfig {
  /** Lock nodes; `null` means the embedded default (three local redis-server processes). */
  redisUrls: string[] | null;
  lockPatterns: string[];
  host: string;
  port: number;
  operatorToken: string | null;
  viewerToken: string | null;
  metricsToken: string | null;
  sessionSecret: string | null;
  auditFile: string;
  /** PostgreSQL URL of the audit log and lock history; `null`: the audit file and the nodes' stream, no history. */
  auditDatabaseUrl: string | null;
  /** Days of lock history kept in PostgreSQL. */
  historyRetentionDays: number;
  dataDir: string;
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  nodeTimeoutMs: number;
  metricsGroupPattern: RegExp;
  metricsMaxGroups: number;
  publicOrigin: string | null;
  /** Host names (beyond localhost, the bind address and the public origin's) the console answers to. */
  allowedHosts: string[];
  /** Proxies (IP addresses or CIDRs) whose X-Forwarded-For names the client; empty: none is trusted. */
  trustedProxies: string[];
  /** Live streams (`/api/locks/stream`) open at once per client address, and per token or session. */
  maxStreamsPerAddress: number;
  maxStreamsPerToken: number;
  /**
   * How long the console goes on serving after SIGTERM, with `/api/ready` already 503, before it stops accepting
   * connections and shuts down: load balancers and kube-proxy keep sending new connections for a few seconds after
   * a pod is marked terminating. SIGINT (Ctrl-C) shuts down at once.
   */
  shutdownDelayMs: number;
  /**
   * Where the locks live (see `lib/deployment-config.ts`); `null` means the embedded default. A `REDIS_URLS`
   * set is also in `redisUrls`, as before.
   */
  deployments: Deployment[] | null;
}

/** Variables whose value is a credential: an error names them but never shows what they held. */
export const SECRET_VARIABLES: ReadonlySet<string> = new Set([
  "LOCKSCOPE_OPERATOR_TOKEN",
  "LOCKSCOPE_VIEWER_TOKEN",
  "METRICS_TOKEN",
  "LOCKSCOPE_SESSION_SECRET",
]);

/**
 * Every variable the configuration reads (here and in `lib/deployment-config.ts`), in `.env.example`'s order: a
 * `LOCKSCOPE_…` one not among them is named at start (`lib/unknown-variables.ts`).
 */
export const CONFIG_VARIABLES: readonly string[] = Object.freeze([
  "REDIS_URLS",
  "REDIS_URL",
  "REDIS_SENTINELS",
  "REDIS_SENTINEL_MASTER",
  "REDIS_SENTINEL_USERNAME",
  "REDIS_SENTINEL_PASSWORD_FILE",
  "REDIS_CLUSTER_URLS",
  "REDIS_TLS_CA_FILE",
  "REDIS_TLS_CERT_FILE",
  "REDIS_TLS_KEY_FILE",
  "REDIS_TLS_SERVERNAME",
  "REDIS_USERNAME",
  "REDIS_PASSWORD_FILE",
  "LOCKSCOPE_DEPLOYMENTS_FILE",
  "LOCK_PATTERNS",
  "HOST",
  "PORT",
  "LOCKSCOPE_OPERATOR_TOKEN",
  "LOCKSCOPE_VIEWER_TOKEN",
  "METRICS_TOKEN",
  "LOCKSCOPE_SESSION_SECRET",
  "TRUSTED_PROXIES",
  "LOCKSCOPE_PUBLIC_ORIGIN",
  "ALLOWED_HOSTS",
  "LOCKSCOPE_DATA_DIR",
  "AUDIT_FILE",
  "AUDIT_DATABASE_URL",
  "HISTORY_RETENTION_DAYS",
  "LOCKSCOPE_NODE_TIMEOUT_MS",
  "LOCKSCOPE_MAX_STREAMS_PER_ADDRESS",
  "LOCKSCOPE_MAX_STREAMS_PER_TOKEN",
  "LOCKSCOPE_SHUTDOWN_DELAY_MS",
  "METRICS_GROUP_PATTERN",
  "METRICS_MAX_GROUPS",
  "LOG_LEVEL",
]);

/**
 * What an error may show of a wrong value: nothing but its length for a secret (a token one character too
 * short is still almost the whole token), and URLs with their password masked (`REDIS_URLS` and
 * `AUDIT_DATABASE_URL` carry them, in the user part or in the query: `?password=`).
 */
export function displayedValue(variable: string, value: string): string {
  if (SECRET_VARIABLES.has(variable)) return `(hidden, ${value.length} characters)`;
  // A URL variable's value may be mistyped (a scheme without its `//`, none at all): its password is hidden all the same.
  if (URL_LIST_VARIABLES.has(variable)) return JSON.stringify(shownList(value).join(","));
  if (URL_VARIABLES.has(variable)) return JSON.stringify(shownValue(value));
  return JSON.stringify(maskUrl(value));
}

/** Variables that hold a list of URLs (or `host:port` entries), each of which may carry a password. */
const URL_LIST_VARIABLES: ReadonlySet<string> = new Set(["REDIS_URLS", "REDIS_CLUSTER_URLS", "REDIS_SENTINELS"]);
/** Variables that hold one URL, which may carry a password. */
const URL_VARIABLES: ReadonlySet<string> = new Set(["REDIS_URL", "AUDIT_DATABASE_URL", "LOCKSCOPE_PUBLIC_ORIGIN"]);

/** One environment variable that does not parse: the message says which, what it held and what is expected. */
export class ConfigError extends Error {
  /** The value as it may be shown (see `displayedValue`), never the raw secret. */
  readonly value: string;
  constructor(
    readonly variable: string,
    value: string,
    readonly expected: string,
  ) {
    const shown = displayedValue(variable, value);
    super(`${variable}=${shown} is invalid: expected ${expected}.`);
    this.name = "ConfigError";
    this.value = shown;
  }
}

export const CONFIG_DEFAULTS = Object.freeze({
  // The conventional key names of the lock libraries the console reads (lib/locks/formats/defaults.ts).
  lockPatterns: DEFAULT_LOCK_PATTERNS_ENV,
  host: "127.0.0.1",
  port: 3000,
  dataDir: ".lockscope",
  logLevel: "info",
  nodeTimeoutMs: 500,
  metricsGroupPattern: "^([^:]+:[^:/]+)",
  metricsMaxGroups: 50,
  historyRetentionDays: 30,
  maxStreamsPerAddress: 20,
  maxStreamsPerToken: 50,
  // Long enough for endpoint removal to reach kube-proxy and the load balancers (a few seconds), short enough that
  // it plus the shutdown's own 10 s stays within Kubernetes' default grace period of 30 s.
  shutdownDelayMs: 5_000,
} as const);

type Env = Readonly<Record<string, string | undefined>>;

function field<T>(env: Env, name: string, schema: z.ZodType<T>, expected: string, fallback: string | undefined): T {
  const raw = env[name];
  const value = raw === undefined || raw.trim() === "" ? fallback : raw.trim();
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    // A check that says what is wrong with this value (a custom issue marked `explains`) adds it to what was expected.
    const why = parsed.error.issues.find((issue) => issue.code === "custom" && (issue as { params?: { explains?: boolean } }).params?.explains)?.message;
    throw new ConfigError(name, raw ?? "", why ? `${expected} (${why.replace(/\.$/, "")})` : expected);
  }
  return parsed.data;
}

const postgresUrl = z.string().refine((s) => {
  try {
    const u = new URL(s);
    return (u.protocol === "postgres:" || u.protocol === "postgresql:") && u.hostname !== "" && u.pathname.length > 1;
  } catch {
    return false;
  }
});

/** The `sslmode` values node-postgres takes; each but `disable` is TLS with the certificate and host name checked (see below). */
const DATABASE_SSL_MODES = ["disable", "prefer", "require", "verify-ca", "verify-full"];

/**
 * What in an AUDIT_DATABASE_URL's TLS parameters the console could not use, or would use without checking the
 * server's certificate; null when nothing. node-postgres checks the certificate and its host name in every mode
 * but `no-verify`, and, with `uselibpqcompat=true`, `prefer`, `require` and `verify-ca` (libpq's meanings); it
 * reads `sslrootcert`, `sslcert` and `sslkey` at each new connection, so a wrong path would only show as a
 * database that never answers. With `readFile`, those files are opened now.
 */
export function databaseTlsProblem(url: string, readFile?: ReadFile): string | null {
  const params = new URL(url).searchParams;
  const mode = params.get("sslmode");
  const unchecked = "does not check the server's certificate: use sslmode=verify-full (with sslrootcert=<the CA's PEM file> where your own CA signed it), or sslmode=disable for plain TCP";
  if (mode === "no-verify") return `sslmode=no-verify ${unchecked}`;
  if (mode !== null && !DATABASE_SSL_MODES.includes(mode)) return `sslmode=${mode} is not a mode: expected verify-full (or require, the same here), or disable for plain TCP`;
  if (params.get("uselibpqcompat") === "true" && mode !== null && ["prefer", "require", "verify-ca"].includes(mode)) {
    return `uselibpqcompat=true with sslmode=${mode} ${unchecked}`;
  }
  if ((params.get("sslcert") === null) !== (params.get("sslkey") === null)) return "a client certificate needs both sslcert and sslkey";
  if (!readFile) return null;
  for (const name of ["sslrootcert", "sslcert", "sslkey"]) {
    const file = params.get(name);
    if (file === null) continue;
    let text: string;
    try {
      text = readFile(file);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return `${name}=${JSON.stringify(file)} cannot be read${code ? ` (${code})` : ""}`;
    }
    if (!/-----BEGIN [A-Z0-9 ]+-----/.test(text)) return `${name}=${JSON.stringify(file)} holds no PEM block: expected a PEM file (-----BEGIN …-----)`;
  }
  return null;
}

const redisUrl = z.string().refine((s) => {
  try {
    const u = new URL(s);
    return (u.protocol === "redis:" || u.protocol === "rediss:") && u.hostname !== "";
  } catch {
    return false;
  }
});

/**
 * An origin browsers send in `Origin`: http or https, a host, maybe a port, nothing else (the console is served at
 * the root; another scheme's origin is never sent, or is "null", and every browser request would be refused).
 */
const httpOrigin = z
  .string()
  .refine((s) => {
    try {
      const u = new URL(s);
      return (u.protocol === "http:" || u.protocol === "https:") && u.hostname !== "" && u.username === "" && u.password === "" && u.pathname === "/" && u.search === "" && u.hash === "" && !/[?#]/.test(s);
    } catch {
      return false;
    }
  })
  .transform((s) => new URL(s).origin);

/** A DNS name, an IPv4 address or a bracketed IPv6 address, as it appears in a Host header (without the port). */
const HOST_NAME = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])$/;

const token = z.string().min(16).max(512).regex(/^[\x21-\x7e]+$/);

/** A whole number written in decimal digits: `Number()` alone would also read `0x1F90` or `8e3` as a number. */
const wholeNumber = (min: number, max: number) =>
  z.string().regex(/^[0-9]{1,15}$/).transform(Number).pipe(z.number().int().min(min).max(max));

/**
 * Parses and validates the configuration; throws `ConfigError` on the first wrong variable, and
 * `DeploymentConfigError` with every mistake in the deployment settings. `readFile` opens the files the
 * settings name (deployments file, TLS, password files) so they are checked at start.
 */
export function parseConfig(env: Env, options: { readFile?: ReadFile } = {}): LockscopeConfig {
  const redisUrls = field(
    env,
    "REDIS_URLS",
    z
      .string()
      .transform((s) => s.split(",").map((p) => p.trim()))
      .superRefine((urls, ctx) => {
        // Which URL is wrong, and why (never with its password); the first mistake is enough to fix.
        const explain = (message: string) => ctx.addIssue({ code: "custom", message, params: { explains: true } });
        if (urls.length > 15) return explain(`${urls.length} URLs: at most 15`);
        const wrong = urls.findIndex((u) => u === "" || urlProblem(u) !== null);
        if (wrong >= 0) {
          const u = urls[wrong] ?? "";
          explain(u === "" ? `URL ${wrong + 1} is empty` : `URL ${wrong + 1} (${JSON.stringify(shownList(urls.join(","))[wrong] ?? shownValue(u))}) ${urlProblem(u)}`);
        }
      })
      .pipe(z.array(redisUrl).min(1).max(15))
      .optional(),
    "comma-separated redis:// or rediss:// URLs of independent lock nodes, e.g. redis://127.0.0.1:6380,redis://127.0.0.1:6381, or unset for the embedded nodes",
    undefined,
  );
  const lockPatterns = field(
    env,
    "LOCK_PATTERNS",
    z
      .string()
      .transform((s) => s.split(",").map((p) => p.trim()))
      .superRefine((globs, ctx) => {
        // An empty one (`lock:*,`) would otherwise be refused without a reason, or, twice, as a glob listed twice.
        const empty = globs.indexOf("");
        if (empty >= 0) ctx.addIssue({ code: "custom", message: `pattern ${empty + 1} is empty: a comma too many?`, params: { explains: true } });
      })
      .pipe(
        z
          .array(
            z
              .string()
              .min(1)
              .max(200)
              .regex(/^[^\s]+$/)
              .superRefine((glob, ctx) => {
                const problem = globProblem(glob) ?? patternKeysProblem(glob);
                if (problem) ctx.addIssue({ code: "custom", message: problem, params: { explains: true } });
              }),
          )
          .min(1)
          .max(32)
          .superRefine((globs, ctx) => {
            const twice = globs.find((glob, i) => globs.indexOf(glob) !== i);
            if (twice !== undefined) ctx.addIssue({ code: "custom", message: `\`${twice}\` is listed twice.`, params: { explains: true } });
          }),
      ),
    'comma-separated Redis glob patterns of lock keys, e.g. "lock:*,mutex:*"',
    CONFIG_DEFAULTS.lockPatterns,
  );
  const host = field(
    env,
    "HOST",
    z
      .string()
      .min(1)
      .max(255)
      .regex(/^[A-Za-z0-9.:[\]-]+$/)
      .superRefine((h, ctx) => {
        // As in a URL; the address to listen on is the bare one (Node.js looks `[::1]` up as a host name, and fails).
        const bare = /^\[([0-9A-Fa-f:.]+)\]$/.exec(h)?.[1];
        if (bare !== undefined || /[[\]]/.test(h)) {
          ctx.addIssue({ code: "custom", message: `an IPv6 address goes without brackets here${bare === undefined ? "" : `: ${bare}`}`, params: { explains: true } });
        }
      }),
    "a hostname or IP address to bind, e.g. 127.0.0.1",
    CONFIG_DEFAULTS.host,
  );
  const port = field(env, "PORT", wholeNumber(1, 65535), "a TCP port number from 1 to 65535", String(CONFIG_DEFAULTS.port));
  const optionalToken = (name: string) =>
    field(env, name, z.union([z.undefined(), token]), "a token of 16 to 512 printable characters without spaces", undefined) ?? null;
  const operatorToken = optionalToken("LOCKSCOPE_OPERATOR_TOKEN");
  const viewerToken = optionalToken("LOCKSCOPE_VIEWER_TOKEN");
  const metricsToken = optionalToken("METRICS_TOKEN");
  // Whoever guesses the key that signs session cookies makes a cookie for any role, offline from one cookie seen:
  // it must be random, and long, not a token-sized phrase.
  const sessionSecret =
    field(
      env,
      "LOCKSCOPE_SESSION_SECRET",
      z.union([
        z.undefined(),
        token.superRefine((secret, ctx) => {
          const problem = weakSecretProblem(secret);
          if (problem) ctx.addIssue({ code: "custom", message: problem, params: { explains: true } });
        }),
      ]),
      `a random secret of at least ${MIN_SECRET_LENGTH} printable characters without spaces, as random as ${MIN_SECRET_LENGTH} bytes (it signs session cookies); make one with \`${MAKE_SECRET}\``,
      undefined,
    ) ?? null;
  if (operatorToken && viewerToken && operatorToken === viewerToken) {
    throw new ConfigError("LOCKSCOPE_VIEWER_TOKEN", viewerToken, "a token different from LOCKSCOPE_OPERATOR_TOKEN");
  }
  // The scrape token sits in Prometheus's configuration: were it a role's token too, it would release or read locks.
  if (metricsToken && (metricsToken === operatorToken || metricsToken === viewerToken)) {
    throw new ConfigError("METRICS_TOKEN", metricsToken, "a token different from LOCKSCOPE_OPERATOR_TOKEN and LOCKSCOPE_VIEWER_TOKEN");
  }
  // Whoever knows the key that signs session cookies can make one for any role, given a glimpse of one cookie.
  if (sessionSecret && [operatorToken, viewerToken, metricsToken].includes(sessionSecret)) {
    throw new ConfigError("LOCKSCOPE_SESSION_SECRET", sessionSecret, "a secret different from every token (LOCKSCOPE_OPERATOR_TOKEN, LOCKSCOPE_VIEWER_TOKEN, METRICS_TOKEN)");
  }
  const dataDir = field(env, "LOCKSCOPE_DATA_DIR", z.string().min(1), "a folder path", CONFIG_DEFAULTS.dataDir);
  const auditFile = field(env, "AUDIT_FILE", z.string().min(1), "a file path", `${dataDir}/audit.jsonl`);
  const auditDatabaseUrl =
    field(
      env,
      "AUDIT_DATABASE_URL",
      z.union([z.undefined(), postgresUrl]),
      "a postgres:// URL with a database name, e.g. postgres://lockscope:secret@db:5432/lockscope (unset for the audit file and the nodes' stream)",
      undefined,
    ) ?? null;
  const tlsProblem = auditDatabaseUrl === null ? null : databaseTlsProblem(auditDatabaseUrl, options.readFile);
  if (tlsProblem !== null) {
    throw new ConfigError("AUDIT_DATABASE_URL", env.AUDIT_DATABASE_URL ?? "", `a postgres:// URL with TLS settings the console can use, the server's certificate checked (${tlsProblem})`);
  }
  const historyRetentionDays = field(
    env,
    "HISTORY_RETENTION_DAYS",
    wholeNumber(1, 3650),
    "a whole number of days from 1 to 3650",
    String(CONFIG_DEFAULTS.historyRetentionDays),
  );
  const logLevel = field(
    env,
    "LOG_LEVEL",
    z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]),
    "one of fatal, error, warn, info, debug, trace, silent",
    CONFIG_DEFAULTS.logLevel,
  );
  const nodeTimeoutMs = field(
    env,
    "LOCKSCOPE_NODE_TIMEOUT_MS",
    wholeNumber(10, 60_000),
    "a per-node command timeout in milliseconds from 10 to 60000",
    String(CONFIG_DEFAULTS.nodeTimeoutMs),
  );
  const metricsGroupPattern = field(
    env,
    "METRICS_GROUP_PATTERN",
    z.string().transform((s, ctx) => {
      let pattern: RegExp;
      try {
        // Matched against every lock key's name, which whoever writes keys chooses: it must not be able to
        // backtrack without end (lib/linear-regexp.ts).
        // The default cannot backtrack (each class excludes the delimiter that ends it): V8's usual engine runs it in
        // compiled code, about fifteen times faster than the linear one, whose flags slow every other expression of
        // the process as well when they move an expression to it on excessive backtracking.
        pattern = s === CONFIG_DEFAULTS.metricsGroupPattern ? new RegExp(s) : linearRegExp(s);
      } catch (error) {
        if (error instanceof NotLinearError) {
          ctx.addIssue({
            code: "custom",
            message: "backreferences and lookarounds are not supported: a lock key's name must not be able to stall the console, so the pattern is matched in time proportional to the key",
            params: { explains: true },
          });
        } else {
          ctx.addIssue({ code: "custom", message: "bad regexp" });
        }
        return z.NEVER;
      }
      // Its capture groups, counted on a pattern that matches the empty string: without one, every lock is `other`.
      if ((new RegExp(`${s}|`).exec("")?.length ?? 1) < 2) {
        ctx.addIssue({ code: "custom", message: "it has no capture group: wrap the part that names the group in parentheses", params: { explains: true } });
        return z.NEVER;
      }
      return pattern;
    }),
    "a regular expression whose first group names a lock's group for metrics labels, e.g. ^([^:]+:[^:/]+)",
    CONFIG_DEFAULTS.metricsGroupPattern,
  );
  const metricsMaxGroups = field(env, "METRICS_MAX_GROUPS", wholeNumber(0, 1000), "a whole number from 0 to 1000", String(CONFIG_DEFAULTS.metricsMaxGroups));
  const publicOrigin = field(
    env,
    "LOCKSCOPE_PUBLIC_ORIGIN",
    z.union([z.undefined(), httpOrigin]),
    "the console's public origin, http(s)://host[:port] without a path, e.g. https://lockscope.example.com (only behind a proxy)",
    undefined,
  ) ?? null;
  const allowedHosts = field(
    env,
    "ALLOWED_HOSTS",
    z.string().transform((s) => s.split(",").map((p) => p.trim().toLowerCase()).filter((p) => p !== "")).pipe(z.array(z.string().max(253).regex(HOST_NAME)).max(64)),
    "comma-separated host names or IP addresses without a port, e.g. lockscope.internal,10.0.0.5",
    "",
  );
  const trustedProxies = field(
    env,
    "TRUSTED_PROXIES",
    z.string().transform((s) => s.split(",").map((p) => p.trim()).filter((p) => p !== "")).pipe(z.array(z.string().refine((p) => parseProxyEntry(p) !== null)).max(64)),
    "comma-separated IP addresses or CIDRs of the proxies in front of the console, e.g. 10.0.0.0/8,192.168.1.5",
    "",
  );
  const streamLimit = (name: string, fallback: number) =>
    field(env, name, wholeNumber(1, 100_000), "a whole number of streams from 1 to 100000", String(fallback));
  const maxStreamsPerAddress = streamLimit("LOCKSCOPE_MAX_STREAMS_PER_ADDRESS", CONFIG_DEFAULTS.maxStreamsPerAddress);
  const maxStreamsPerToken = streamLimit("LOCKSCOPE_MAX_STREAMS_PER_TOKEN", CONFIG_DEFAULTS.maxStreamsPerToken);
  const shutdownDelayMs = field(
    env,
    "LOCKSCOPE_SHUTDOWN_DELAY_MS",
    wholeNumber(0, 60_000),
    "a whole number of milliseconds from 0 to 60000 that the console keeps serving, not ready, after SIGTERM (0: stop at once)",
    String(CONFIG_DEFAULTS.shutdownDelayMs),
  );
  return {
    redisUrls: redisUrls ?? null,
    lockPatterns,
    host,
    port,
    operatorToken,
    viewerToken,
    metricsToken,
    sessionSecret,
    auditFile,
    auditDatabaseUrl,
    historyRetentionDays,
    dataDir,
    logLevel,
    nodeTimeoutMs,
    metricsGroupPattern,
    metricsMaxGroups,
    publicOrigin,
    allowedHosts,
    trustedProxies,
    maxStreamsPerAddress,
    maxStreamsPerToken,
    shutdownDelayMs,
    deployments: parseDeployments(env, options.readFile),
  };
}

/**
 * Hides the password of a postgres:// URL for display and logs: in its user part and in its query
 * (node-postgres takes `?password=`, `?sslpassword=` and any other option from it).
 */
export function maskDatabaseUrl(url: string): string {
  return withSecretsMasked(url)?.toString() ?? "(invalid url)";
}

/** Query parameters that carry a secret: ioredis takes any option from a URL's query (`?password=…`). */
export const SECRET_PARAM = /pass|secret|token|auth|key/i;

/** `url` parsed, with `****` for its password and for every query parameter that names a secret; null when it is no URL. */
function withSecretsMasked(url: string): URL | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if (u.password) u.password = "****";
  for (const name of [...u.searchParams.keys()]) if (SECRET_PARAM.test(name)) u.searchParams.set(name, "****");
  return u;
}

export { withoutArguments } from "./echoed-arguments";

/**
 * Hides the password of a redis URL for display and logs: in its user part and in its query. A user part without
 * a colon is hidden too: Lettuce and Jedis take `redis://password@host` as the password alone.
 */
export function maskRedisUrl(url: string): string {
  const u = withSecretsMasked(url);
  if (u === null) return "(invalid url)";
  if (u.username !== "" && u.password === "") u.username = "****";
  return u.toString().replace(/\/$/, "");
}
