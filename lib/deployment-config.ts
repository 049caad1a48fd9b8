import { z } from "zod";

/**
 * Where the locks live: one or more deployments, each of a kind, described by environment variables
 * (one deployment, named `default`) or by a JSON file (`LOCKSCOPE_DEPLOYMENTS_FILE`: up to 32, any mix of kinds,
 * all watched by one console). Pure: files are read through
 * the `readFile` the caller passes, so the launcher and the server validate the same way and tests need no
 * disk. Every mistake found is reported, one line each, never a secret's value.
 */

/** TLS settings of a deployment's connections (`rediss://` URLs, or `tls` in the file). */
export interface DeploymentTls {
  /** PEM file of the CA that signed the servers' certificates; null: the system's CAs. */
  caFile: string | null;
  /** PEM client certificate and key, for servers that ask for one (both or neither). */
  certFile: string | null;
  keyFile: string | null;
  /** Name sent in SNI and checked against the server's certificate; null: the host name connected to. */
  servername: string | null;
}

/** Credentials that are not in the URLs: a user name, and a file holding the password (never the password). */
export interface DeploymentAuth {
  username: string | null;
  passwordFile: string | null;
}

interface DeploymentBase {
  /** Shown on every lock row and in the API; unique, `[a-z0-9-]`. */
  name: string;
  /** null: plain TCP (unless a URL says `rediss://`, which uses the system's CAs). */
  tls: DeploymentTls | null;
  auth: DeploymentAuth;
}

export interface SentinelAddress {
  host: string;
  port: number;
}

export type Deployment =
  | (DeploymentBase & { kind: "redlock"; urls: string[] })
  | (DeploymentBase & { kind: "standalone"; url: string })
  | (DeploymentBase & { kind: "sentinel"; sentinels: SentinelAddress[]; master: string; sentinelAuth: DeploymentAuth })
  | (DeploymentBase & { kind: "cluster"; seeds: string[] });

export type DeploymentKind = Deployment["kind"];
export const DEPLOYMENT_KINDS: readonly DeploymentKind[] = ["redlock", "standalone", "sentinel", "cluster"];

/** Every mistake in the deployment settings, one line each (`lines`); the message is those lines. */
export class DeploymentConfigError extends Error {
  constructor(readonly lines: readonly string[]) {
    super(lines.join("\n"));
    this.name = "DeploymentConfigError";
  }
}

export type ReadFile = (path: string) => string;

type Env = Readonly<Record<string, string | undefined>>;

const NAME = /^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$/;

/**
 * The password of a URL's user part: everything after `//user:` up to the last `@` before the next URL of a list
 * (`,scheme:` or `//`) or a space. A password is often random (`openssl rand -base64` writes `/` and `+`) and may hold
 * `/`, `@` or `#`, which a URL reserves: such a URL does not parse, and its error must hide the password all the same.
 */
const USER_PASSWORD = /(\/\/[^/@\s,:]*:)(?:(?!\/\/|,[a-z][a-z0-9+.-]*:)[^\s])*@/gi;

/**
 * The user part of a redis:// URL without a colon: Lettuce and Jedis take `redis://password@host` as the password
 * alone (ioredis as a user name, and sends no AUTH), so a URL copied from such a client carries it there.
 */
export const REDIS_LONE_USER = /(\brediss?:\/\/)[^/@\s,:?#]+@/gi;

/**
 * A URL as it may be shown: the password masked (in the user part, in a `?password=`-like query parameter, and a
 * redis:// URL's user part without a colon, see `REDIS_LONE_USER`), nothing else changed.
 */
export function maskUrl(url: string): string {
  return url.replace(USER_PASSWORD, "$1****@").replace(REDIS_LONE_USER, "$1****@").replace(/([?&][^=&#\s]*(?:pass|secret|token|auth|key)[^=&#\s]*=)[^&#\s]*/gi, "$1****");
}

/**
 * One URL (or `host:port` entry) of a configuration value as it may be shown, the value perhaps mistyped: besides what
 * `maskUrl` hides, the password of an entry whose scheme lost a slash or is missing (`postgres:/user:pw@db`,
 * `user:pw@db`, `pw@db:6379`) or that holds a space (which a URL takes): everything between the scheme and user name
 * and the last `@`.
 */
export function shownValue(value: string): string {
  const masked = maskUrl(value);
  const credentials = /^(\s*(?:[a-z][a-z0-9+.-]*:\/*)?)(?:([^/@\s,:]*):)?([^]*)@/i.exec(masked);
  // (Already masked: `redis//:****@db`.)
  if (credentials === null || credentials[3]?.endsWith("****")) return masked;
  try {
    // A URL with a host and no password: its `@` ends a user name (a redis:// one is masked above), or is in its path
    // or query. (`postgres:/u:pw@db` parses too, as a path without a host.)
    const u = new URL(value);
    if (u.host !== "" && u.password === "") return masked;
  } catch {
    // not a URL: what comes before its `@` is taken for credentials
  }
  const [whole, scheme = "", user] = credentials;
  return `${scheme}${user === undefined ? "" : `${user}:`}****@${masked.slice(whole.length)}`;
}

/**
 * `list(s)`'s pieces as they may be shown. A password that holds a comma is cut by the list into pieces that each
 * look like no URL (`redis://:pa` and `ss@host:6379`): it is masked in the whole list first, then cut the same way.
 */
export function shownList(s: string): string[] {
  const hidden = s.replace(USER_PASSWORD, (match: string, user: string) => `${user}${match.slice(user.length, -1).replace(/[^,]/g, "\u0000")}@`);
  return list(hidden).map((piece) => shownValue(piece.replace(/\u0000+/g, "****")));
}

/** What is wrong with a node's URL (`is not a URL`, `has no host`…), or null. */
export function urlProblem(s: string): string | null {
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return "is not a URL";
  }
  if (u.protocol !== "redis:" && u.protocol !== "rediss:") return "is not a redis:// or rediss:// URL";
  if (u.hostname === "") return "has no host";
  if (u.port !== "" && !(Number(u.port) >= 1 && Number(u.port) <= 65535)) return "has a port outside 1 to 65535";
  if (u.pathname !== "" && u.pathname !== "/" && !/^\/\d{1,2}$/.test(u.pathname)) return "has a path other than a database number (/0, /1, …)";
  return null;
}

function addressProblem(s: string): SentinelAddress | string {
  // (A host name may have `_`, as Docker Compose service names often do: a node URL's host may, and so does this.)
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})$/.exec(s);
  if (!m) return "is not host:port";
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return "has a port outside 1 to 65535";
  return { host: (m[1] as string).replace(/^\[|\]$/g, ""), port };
}

const list = (s: string) => s.split(",").map((p) => p.trim());

class Collector {
  readonly lines: string[] = [];
  constructor(private readonly readFile: ReadFile | undefined) {}

  add(line: string): void {
    this.lines.push(line);
  }

  /** A list of URLs: each wrong one named by position, never with its password. */
  urls(where: string, raw: string[], max: number, shown: readonly string[] = raw.map(shownValue)): string[] {
    if (raw.length === 0 || raw.every((u) => u === "")) this.add(`${where} is empty: expected comma-separated redis:// or rediss:// URLs.`);
    else if (raw.length > max) this.add(`${where} has ${raw.length} URLs: at most ${max}.`);
    raw.forEach((u, i) => {
      const problem = u === "" ? "is empty" : urlProblem(u);
      if (problem) this.add(`${where}: URL ${i + 1} (${JSON.stringify(shown[i] ?? shownValue(u))}) ${problem}: expected e.g. redis://10.0.0.5:6379 or rediss://user:password@host:6380.`);
    });
    return raw;
  }

  /** A file the console must read at start: checked now, so a wrong path is one line here, not a retry loop later. */
  file(where: string, path: string | null, kind: "pem" | "secret"): string | null {
    if (path === null) return null;
    if (!this.readFile) return path;
    let text: string;
    try {
      text = this.readFile(path);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      this.add(`${where}=${JSON.stringify(path)} cannot be read${code ? ` (${code})` : ""}: expected a readable file.`);
      return path;
    }
    if (kind === "pem" && !/-----BEGIN [A-Z0-9 ]+-----/.test(text)) this.add(`${where}=${JSON.stringify(path)} holds no PEM block: expected a PEM file (-----BEGIN …-----).`);
    if (kind === "secret" && text.trim() === "") this.add(`${where}=${JSON.stringify(path)} is empty: expected a file holding the password.`);
    return path;
  }

  tls(where: (field: string) => string, raw: { caFile?: string; certFile?: string; keyFile?: string; servername?: string }): DeploymentTls | null {
    const caFile = this.file(where("caFile"), raw.caFile ?? null, "pem");
    const certFile = this.file(where("certFile"), raw.certFile ?? null, "pem");
    const keyFile = this.file(where("keyFile"), raw.keyFile ?? null, "pem");
    const servername = raw.servername ?? null;
    if ((certFile === null) !== (keyFile === null)) this.add(`${where(certFile === null ? "certFile" : "keyFile")} is missing: a client certificate needs both its certificate and its key file.`);
    if (servername !== null && !/^[A-Za-z0-9.-]{1,253}$/.test(servername)) this.add(`${where("servername")}=${JSON.stringify(servername)} is invalid: expected a host name for SNI.`);
    if (caFile === null && certFile === null && keyFile === null && servername === null) return null;
    return { caFile, certFile, keyFile, servername };
  }

  auth(where: (field: string) => string, raw: { username?: string; passwordFile?: string }): DeploymentAuth {
    const username = raw.username ?? null;
    if (username !== null && !/^[\x21-\x7e]{1,128}$/.test(username)) this.add(`${where("username")} is invalid: expected an ACL user name of printable characters without spaces.`);
    return { username, passwordFile: this.file(where("passwordFile"), raw.passwordFile ?? null, "secret") };
  }
}

const ENV_TLS = { caFile: "REDIS_TLS_CA_FILE", certFile: "REDIS_TLS_CERT_FILE", keyFile: "REDIS_TLS_KEY_FILE", servername: "REDIS_TLS_SERVERNAME" } as const;
const ENV_AUTH = { username: "REDIS_USERNAME", passwordFile: "REDIS_PASSWORD_FILE" } as const;
const ENV_SENTINEL_AUTH = { username: "REDIS_SENTINEL_USERNAME", passwordFile: "REDIS_SENTINEL_PASSWORD_FILE" } as const;

function envValue(env: Env, name: string): string | undefined {
  const raw = env[name];
  return raw === undefined || raw.trim() === "" ? undefined : raw.trim();
}

function pick<K extends string>(env: Env, names: Readonly<Record<K, string>>): Partial<Record<K, string>> {
  const out: Partial<Record<K, string>> = {};
  for (const [field, name] of Object.entries(names) as Array<[K, string]>) {
    const value = envValue(env, name);
    if (value !== undefined) out[field] = value;
  }
  return out;
}

/** The deployment the environment variables describe, if any (at most one: several need the file). */
function fromEnv(env: Env, c: Collector): Deployment[] {
  const named = (names: Readonly<Record<string, string>>) => (field: string) => names[field] ?? field;
  const tls = c.tls(named(ENV_TLS), pick(env, ENV_TLS));
  const auth = c.auth(named(ENV_AUTH), pick(env, ENV_AUTH));
  const out: Deployment[] = [];
  const urls = envValue(env, "REDIS_URLS");
  const url = envValue(env, "REDIS_URL");
  const sentinels = envValue(env, "REDIS_SENTINELS");
  const master = envValue(env, "REDIS_SENTINEL_MASTER");
  const cluster = envValue(env, "REDIS_CLUSTER_URLS");
  if (urls !== undefined) out.push({ name: "default", kind: "redlock", urls: c.urls("REDIS_URLS", list(urls), 15, shownList(urls)), tls, auth });
  if (url !== undefined) {
    // Several URLs where one is taken: the nodes of a Redlock set given to the wrong variable (a comma inside one
    // URL's password is still one URL).
    const given = list(url).filter((u) => /^[a-z][a-z0-9+.-]*:\/\//i.test(u)).length;
    if (given > 1) c.add(`REDIS_URL holds ${given} URLs: it takes one standalone instance; put the independent nodes of a Redlock set in REDIS_URLS, or several deployments in LOCKSCOPE_DEPLOYMENTS_FILE.`);
    else c.urls("REDIS_URL", [url], 1);
    out.push({ name: "default", kind: "standalone", url, tls, auth });
  }
  if (sentinels !== undefined || master !== undefined) {
    const addresses: SentinelAddress[] = [];
    if (sentinels === undefined) c.add("REDIS_SENTINELS is missing: REDIS_SENTINEL_MASTER needs the sentinels' host:port list, e.g. 10.0.0.1:26379,10.0.0.2:26379.");
    else {
      const shown = shownList(sentinels);
      list(sentinels).forEach((s, i) => {
        const a = addressProblem(s);
        if (typeof a === "string") c.add(`REDIS_SENTINELS: entry ${i + 1} (${JSON.stringify(shown[i] ?? shownValue(s))}) ${a}: expected host:port, e.g. 10.0.0.1:26379.`);
        else addresses.push(a);
      });
    }
    if (master === undefined) c.add("REDIS_SENTINEL_MASTER is missing: REDIS_SENTINELS needs the name of the master the sentinels monitor, e.g. mymaster.");
    else if (!/^[A-Za-z0-9._-]{1,128}$/.test(master)) c.add(`REDIS_SENTINEL_MASTER=${JSON.stringify(master)} is invalid: expected a master name of letters, digits, '.', '_' or '-'.`);
    const sentinelAuth = c.auth(named(ENV_SENTINEL_AUTH), pick(env, ENV_SENTINEL_AUTH));
    out.push({ name: "default", kind: "sentinel", sentinels: addresses, master: master ?? "", tls, auth, sentinelAuth });
  }
  if (cluster !== undefined) out.push({ name: "default", kind: "cluster", seeds: c.urls("REDIS_CLUSTER_URLS", list(cluster), 50, shownList(cluster)), tls, auth });
  const sentinelOnly = Object.values(ENV_SENTINEL_AUTH).filter((n) => envValue(env, n) !== undefined);
  if (out.length > 0 && sentinelOnly.length > 0 && !out.some((d) => d.kind === "sentinel")) {
    // Credentials for sentinels the deployment does not have would be ignored: say so instead.
    c.add(`${sentinelOnly.join(", ")} ${sentinelOnly.length === 1 ? "is" : "are"} set, but the deployment has no sentinels: unset ${sentinelOnly.length === 1 ? "it" : "them"}, or describe a Sentinel deployment with REDIS_SENTINELS and REDIS_SENTINEL_MASTER.`);
  }
  if (out.length === 0) {
    // Settings for a deployment that is not there would be ignored by the embedded nodes: say so instead.
    const orphans = [...Object.values(ENV_TLS), ...Object.values(ENV_AUTH), ...Object.values(ENV_SENTINEL_AUTH)].filter((n) => envValue(env, n) !== undefined);
    if (orphans.length > 0) c.add(`${orphans.join(", ")} ${orphans.length === 1 ? "is" : "are"} set without a deployment: set REDIS_URLS, REDIS_URL, REDIS_SENTINELS or REDIS_CLUSTER_URLS too.`);
  }
  if (out.length > 1) {
    const set = ["REDIS_URLS", "REDIS_URL", "REDIS_SENTINELS", "REDIS_CLUSTER_URLS"].filter((n) => envValue(env, n) !== undefined || (n === "REDIS_SENTINELS" && master !== undefined));
    c.add(`${set.join(", ")} are all set: the variables describe one deployment; describe several in LOCKSCOPE_DEPLOYMENTS_FILE.`);
  }
  return out;
}

const tlsSchema = z.strictObject({ caFile: z.string().min(1).optional(), certFile: z.string().min(1).optional(), keyFile: z.string().min(1).optional(), servername: z.string().optional() });
const authFields = { username: z.string().optional(), passwordFile: z.string().min(1).optional() };
const fileEntry = z.strictObject({
  name: z.string(),
  kind: z.enum(["redlock", "standalone", "sentinel", "cluster"]),
  urls: z.array(z.string()).optional(),
  url: z.string().optional(),
  sentinels: z.array(z.string()).optional(),
  master: z.string().optional(),
  seeds: z.array(z.string()).optional(),
  tls: tlsSchema.optional(),
  ...authFields,
  sentinelAuth: z.strictObject(authFields).optional(),
});
/** One console watches at most this many deployments (each has its own connections, watchers and timers). */
export const MAX_DEPLOYMENTS = 32;
const fileSchema = z.strictObject({
  deployments: z.array(fileEntry).min(1, "lists no deployment: expected at least one").max(MAX_DEPLOYMENTS, `lists too many deployments: one console watches at most ${MAX_DEPLOYMENTS}`),
});

/** The file's fields each kind needs and allows. */
const KIND_FIELDS: Record<DeploymentKind, { needs: string[]; allows: string[] }> = {
  redlock: { needs: ["urls"], allows: [] },
  standalone: { needs: ["url"], allows: [] },
  sentinel: { needs: ["sentinels", "master"], allows: ["sentinelAuth"] },
  cluster: { needs: ["seeds"], allows: [] },
};
const KIND_SPECIFIC = ["urls", "url", "sentinels", "master", "seeds", "sentinelAuth"];

/**
 * What is wrong with a file `JSON.parse` refused, and where (line and column), in one line and without any of
 * the file's text: V8's message quotes the characters around the mistake, line breaks and a URL's password
 * included (a comma left after `"redis://:secret@db"`).
 */
function jsonSyntaxProblem(text: string, message: string): string {
  let position: number | null = null;
  const at = / at position (\d+)/.exec(message);
  if (at) position = Number(at[1]);
  // `Unexpected token 'x', ..."<up to 10 characters either side>"... is not valid JSON`, or the whole text when short.
  const quoted = /^Unexpected token '([\s\S]+?)', (\.\.\.)?"([\s\S]*)"(?:\.\.\.)? is not valid JSON$/.exec(message);
  if (position === null && quoted) {
    const [, token = "", cutBefore, around = ""] = quoted;
    const start = text.indexOf(around);
    if (start >= 0) position = start + (cutBefore ? 10 : Math.max(0, around.indexOf(token)));
  }
  if (position === null && /Unexpected end of JSON input/.test(message)) position = text.length;
  const what = quoted ? `unexpected ${JSON.stringify(quoted[1])}` : message.replace(/ in JSON at position[\s\S]*$| at position[\s\S]*$/, "").replace(/\s+/g, " ").trim();
  if (position === null || position > text.length) return what;
  const before = text.slice(0, position);
  const line = before.split("\n").length;
  const column = position - before.lastIndexOf("\n");
  return `${what} at line ${line}, column ${column}`;
}

function fromFile(path: string, c: Collector, readFile: ReadFile): Deployment[] {
  const where = `LOCKSCOPE_DEPLOYMENTS_FILE=${JSON.stringify(path)}`;
  let text: string;
  try {
    text = readFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    c.add(`${where} cannot be read${code ? ` (${code})` : ""}: expected a readable JSON file.`);
    return [];
  }
  // A byte-order mark, which editors on Windows write at the head of UTF-8 files: no JSON, but no mistake either (the
  // error said `unexpected "" at line 1, column 1`, the character invisible).
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    c.add(`${where} is not JSON (${jsonSyntaxProblem(text, (error as Error).message)}): expected {"deployments": [{"name": …, "kind": …}, …]}.`);
    return [];
  }
  const parsed = fileSchema.safeParse(json);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const at = issue.path.length > 0 ? issue.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("").replace(/^\./, "") : "(top level)";
      c.add(`${where}: ${at}: ${issue.message}.`);
    }
    return [];
  }
  const seen = new Set<string>();
  const out: Deployment[] = [];
  parsed.data.deployments.forEach((d, i) => {
    const at = (field: string) => `${where}: deployments[${i}].${field}`;
    if (!NAME.test(d.name)) c.add(`${at("name")}=${JSON.stringify(d.name)} is invalid: expected 1 to 40 lower-case letters, digits or '-'.`);
    else if (seen.has(d.name)) c.add(`${at("name")}=${JSON.stringify(d.name)} is used twice: each deployment needs its own name.`);
    seen.add(d.name);
    const fields = KIND_FIELDS[d.kind];
    const record = d as Record<string, unknown>;
    for (const f of fields.needs) if (record[f] === undefined) c.add(`${at(f)} is missing: a ${d.kind} deployment needs it.`);
    for (const f of KIND_SPECIFIC) if (record[f] !== undefined && !fields.needs.includes(f) && !fields.allows.includes(f)) c.add(`${at(f)} does not apply to a ${d.kind} deployment.`);
    // A `tls` given, even empty, asks for TLS (with the system's CAs where it names no CA file): a Sentinel deployment
    // has no rediss:// URL to ask for it otherwise, and for the other kinds it must match their URLs' scheme.
    const tls = d.tls ? (c.tls((f) => at(`tls.${f}`), d.tls) ?? { caFile: null, certFile: null, keyFile: null, servername: null }) : null;
    const auth = c.auth(at, d);
    const base = { name: d.name, tls, auth };
    if (d.kind === "redlock" && d.urls) out.push({ ...base, kind: "redlock", urls: c.urls(at("urls"), d.urls, 15) });
    else if (d.kind === "standalone" && d.url !== undefined) out.push({ ...base, kind: "standalone", url: c.urls(at("url"), [d.url], 1)[0] ?? d.url });
    else if (d.kind === "cluster" && d.seeds) out.push({ ...base, kind: "cluster", seeds: c.urls(at("seeds"), d.seeds, 50) });
    else if (d.kind === "sentinel" && d.sentinels && d.master !== undefined) {
      const sentinels: SentinelAddress[] = [];
      d.sentinels.forEach((s, j) => {
        const a = addressProblem(s);
        if (typeof a === "string") c.add(`${at(`sentinels[${j}]`)} (${JSON.stringify(shownValue(s))}) ${a}: expected host:port.`);
        else sentinels.push(a);
      });
      if (sentinels.length === 0 && d.sentinels.length === 0) c.add(`${at("sentinels")} is empty: expected the sentinels' host:port list.`);
      if (!/^[A-Za-z0-9._-]{1,128}$/.test(d.master)) c.add(`${at("master")}=${JSON.stringify(d.master)} is invalid: expected a master name.`);
      out.push({ ...base, kind: "sentinel", sentinels, master: d.master, sentinelAuth: c.auth((f) => at(`sentinelAuth.${f}`), d.sentinelAuth ?? {}) });
    }
  });
  return out;
}

/** The variable that holds a field of the deployments file, for the lines about the deployment the variables describe. */
const FIELD_VARIABLES: Record<string, string> = { urls: "REDIS_URLS", seeds: "REDIS_CLUSTER_URLS" };

/** The server a URL that parses leads to (`host:port`, the host in lower case); null for a URL that does not parse. */
function serverOf(url: string): string | null {
  if (urlProblem(url) !== null) return null;
  const u = new URL(url);
  return `${u.hostname.toLowerCase()}:${u.port === "" ? 6379 : Number(u.port)}`;
}

/**
 * A Redlock set's server listed twice (with the same database or another: one server's databases fail together):
 * each copy counts towards the quorum, so one server would hold a lock "on a quorum" alone, and the set would read
 * as having its quorum with half its servers down.
 */
function sameNodeTwice(c: Collector, where: string, urls: readonly string[]): void {
  const first = new Map<string, number>();
  urls.forEach((url, i) => {
    const server = serverOf(url);
    if (server === null) return;
    const at = first.get(server);
    if (at === undefined) first.set(server, i);
    else c.add(`${where}: URLs ${at + 1} and ${i + 1} name the same server (${server}): a Redlock set's nodes must be independent servers, or one counts twice towards the quorum.`);
  });
}

/**
 * A cluster's seeds that differ in scheme or credentials: the console reaches every node of the cluster (those it
 * discovers too) with the first seed's TLS and credentials, so another seed's would be ignored.
 */
function seedsDisagree(c: Collector, where: string, seeds: readonly string[]): void {
  const parsed = seeds.map((s) => (urlProblem(s) === null ? new URL(s) : null));
  const head = parsed[0];
  if (!head) return;
  parsed.forEach((u, i) => {
    if (!u || i === 0) return;
    const differs = [u.protocol !== head.protocol ? "scheme" : null, u.username !== head.username ? "user name" : null, u.password !== head.password ? "password" : null].filter((x) => x !== null);
    if (differs.length > 0) {
      c.add(`${where}: URL ${i + 1} differs from URL 1 in its ${differs.join(" and ")}: every node of a cluster is reached with the first URL's TLS and credentials; give every URL the same.`);
    }
  });
}

/**
 * Parts of a cluster's seed URLs that no connection would use: a cluster client dials each node by address with
 * the first seed's TLS and credentials, so a query (`?password=…`, which a standalone instance's URL may carry)
 * and a database number (a cluster has database 0 only) would be dropped in silence.
 */
function seedPartsUnused(c: Collector, where: string, seeds: readonly string[]): void {
  seeds.forEach((seed, i) => {
    if (urlProblem(seed) !== null) return;
    const u = new URL(seed);
    if (u.search !== "") c.add(`${where}: URL ${i + 1} has query options (?…), which a cluster's connections do not read: give the password in the URL's user part (redis://:password@host) or in a password file.`);
    if (u.pathname.length > 1 && u.pathname !== "/0") c.add(`${where}: URL ${i + 1} names database ${u.pathname.slice(1)}: a Redis Cluster has database 0 only; leave the path out.`);
  });
}

/**
 * The deployments the configuration describes; `null` when none is (the launcher then starts embedded
 * nodes). Throws `DeploymentConfigError` listing every mistake. Without `readFile` the files named are
 * not opened (their contents are checked where they are read).
 */
export function parseDeployments(env: Env, readFile?: ReadFile): Deployment[] | null {
  const c = new Collector(readFile);
  const file = envValue(env, "LOCKSCOPE_DEPLOYMENTS_FILE");
  let deployments: Deployment[];
  if (file !== undefined) {
    const clashing = ["REDIS_URLS", "REDIS_URL", "REDIS_SENTINELS", "REDIS_SENTINEL_MASTER", "REDIS_CLUSTER_URLS"].filter((n) => envValue(env, n) !== undefined);
    if (clashing.length > 0) c.add(`LOCKSCOPE_DEPLOYMENTS_FILE and ${clashing.join(", ")} are both set: describe the deployments in one place.`);
    deployments = readFile ? fromFile(file, c, readFile) : [];
  } else {
    deployments = fromEnv(env, c);
  }
  for (const d of deployments) {
    const where = (field: string) => (file === undefined ? (FIELD_VARIABLES[field] ?? field) : `deployment ${JSON.stringify(d.name)}: ${field}`);
    if (d.kind === "redlock") sameNodeTwice(c, where("urls"), d.urls);
    if (d.kind === "cluster") {
      seedsDisagree(c, where("seeds"), d.seeds);
      seedPartsUnused(c, where("seeds"), d.seeds);
    }
    const urls = d.kind === "redlock" ? d.urls : d.kind === "standalone" ? [d.url] : d.kind === "cluster" ? d.seeds : null;
    // TLS is chosen per URL by its scheme: settings no URL would use are a mistake, not a silent no-op.
    if (d.tls && urls && !urls.some((u) => u.startsWith("rediss://"))) {
      c.add(`${file === undefined ? "REDIS_TLS_*" : `deployment ${JSON.stringify(d.name)}: tls`} is set but no URL of ${file === undefined ? "the deployment" : "it"} is rediss://: use rediss:// URLs for TLS.`);
    }
  }
  if (c.lines.length > 0) throw new DeploymentConfigError(c.lines);
  return deployments.length > 0 ? deployments : null;
}
