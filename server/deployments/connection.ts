import "server-only";
import { lookup } from "node:dns/promises";
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import type { ConnectionOptions } from "node:tls";
import type { RedisOptions } from "ioredis";
import type { DeploymentAuth, DeploymentTls } from "@/lib/deployment-config";

/** The last contents read of each TLS file: what a connection uses while a renewal leaves the file unreadable. */
const lastRead = new Map<string, Buffer>();

/** A TLS file as it is now; while it cannot be read (mid-renewal), the last contents read. The files were checked at start. */
function freshFile(file: string): Buffer {
  try {
    const contents = readFileSync(file);
    lastRead.set(file, contents);
    return contents;
  } catch (error) {
    const last = lastRead.get(file);
    if (last) return last;
    throw error;
  }
}

/**
 * TLS options from a deployment's files, read whenever a socket is opened with them: ioredis copies a connection's
 * `tls` options at each connect (`Object.assign`), reconnects included, so the file-backed ones are getters and a
 * renewed CA, certificate or key is used from the next (re)connection on. A connection that kept the contents read
 * when it was made would, after a rotation, reconnect with the old ones and be refused for ever.
 */
export function tlsOptions(tls: DeploymentTls | null): ConnectionOptions {
  if (!tls) return {};
  const options: ConnectionOptions = tls.servername ? { servername: tls.servername } : {};
  const lazily = (field: "ca" | "cert" | "key", file: string | null) => {
    if (file) Object.defineProperty(options, field, { enumerable: true, get: () => freshFile(file) });
  };
  lazily("ca", tls.caFile);
  lazily("cert", tls.certFile);
  lazily("key", tls.keyFile);
  return options;
}

/**
 * User name and password for a connection to `url` (null: an address without a URL, a sentinel's or a failover's).
 * Each comes from the URL where it carries one (it is more specific), else from the settings: a URL that names only
 * the ACL user (`redis://lockscope@host`) takes its password from REDIS_PASSWORD_FILE, and REDIS_USERNAME applies
 * only to a URL without a user.
 */
export function authOptions(auth: DeploymentAuth, url: string | null): Pick<RedisOptions, "username" | "password"> {
  const u = url === null ? null : new URL(url);
  const username = u && u.username !== "" ? decodeURIComponent(u.username) : auth.username;
  const password = u && u.password !== "" ? decodeURIComponent(u.password) : auth.passwordFile ? readFileSync(auth.passwordFile, "utf8").trim() : null;
  return {
    ...(username ? { username } : {}),
    ...(password !== null ? { password } : {}),
  };
}

/**
 * Makes a connection read its password file at each connect, reconnects included, rather than keep the password read
 * when it was made: rotated the usual way (a second password added to the ACL user, the file rewritten, the old
 * password removed), a connection that drops afterwards would otherwise sign in with the old one, and be refused
 * until the console restarts. `options` is a connection's own options (`client.options`; a cluster client's
 * `options.redisOptions`, from which it makes each node's connection), read by ioredis at each connect; `field` the
 * password they carry. Nothing changes where the password is not the file's (the URL carries one, or none is set).
 */
export function followPasswordFile(options: object, field: "password" | "sentinelPassword", auth: DeploymentAuth, url: string | null): void {
  const file = auth.passwordFile;
  if (file === null || (url !== null && new URL(url).password !== "")) return;
  let last: string | undefined;
  Object.defineProperty(options, field, {
    enumerable: true,
    configurable: true,
    get: () => {
      // (While the file is being replaced and cannot be read, the last password read.)
      try {
        last = readFileSync(file, "utf8").trim();
      } catch (error) {
        if (last === undefined) throw error;
      }
      return last;
    },
    set: () => undefined,
  });
}

/**
 * The URL ioredis connects to, without its credentials (they go in `authOptions`): from a URL, ioredis takes a user
 * name without a password as the password "" and lets it win over the options' one, so it would send no password.
 */
export function connectUrl(url: string): string {
  const u = new URL(url);
  u.username = "";
  u.password = "";
  return u.toString();
}

/** Options for a connection to one URL of a deployment: TLS where the URL is `rediss://`, and the credentials. */
export function urlOptions(url: string, tls: DeploymentTls | null, auth: DeploymentAuth): RedisOptions {
  return {
    ...authOptions(auth, url),
    ...(url.startsWith("rediss://") ? { tls: tlsOptions(tls) } : {}),
  };
}

/** `host` as an IP address when it is one (an IPv4-mapped IPv6 address as its IPv4 form); null for a name. */
export function ipAddressOf(host: string): string | null {
  const bare = host.replace(/^::ffff:/, "");
  return isIP(bare) !== 0 ? bare : null;
}

/** The IP address `host` names (the first IPv4 one, as the console's connections dial), itself for an address; the name where it does not resolve. */
export async function addressOf(host: string): Promise<string> {
  const ip = ipAddressOf(host);
  if (ip !== null) return ip;
  try {
    return (await lookup(host, { family: 4 }).catch(() => lookup(host))).address.replace(/^::ffff:/, "");
  } catch {
    return host;
  }
}
