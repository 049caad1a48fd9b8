import "server-only";
import { readFileSync } from "node:fs";
import type { ConnectionOptions } from "node:tls";
import type { RedisOptions } from "ioredis";
import type { DeploymentAuth, DeploymentTls } from "@/lib/deployment-config";

/**
 * TLS options from a deployment's files, read when a connection is made (so a rotated certificate is
 * picked up by the next connection). The files were checked at start.
 */
export function tlsOptions(tls: DeploymentTls | null): ConnectionOptions {
  if (!tls) return {};
  return {
    ...(tls.caFile ? { ca: readFileSync(tls.caFile) } : {}),
    ...(tls.certFile ? { cert: readFileSync(tls.certFile) } : {}),
    ...(tls.keyFile ? { key: readFileSync(tls.keyFile) } : {}),
    ...(tls.servername ? { servername: tls.servername } : {}),
  };
}

/** User name and password from the settings (a URL's own credentials, where present, win: they are more specific). */
export function authOptions(auth: DeploymentAuth, url: string | null): Pick<RedisOptions, "username" | "password"> {
  if (url !== null) {
    const u = new URL(url);
    if (u.username !== "" || u.password !== "") return {};
  }
  return {
    ...(auth.username ? { username: auth.username } : {}),
    ...(auth.passwordFile ? { password: readFileSync(auth.passwordFile, "utf8").trim() } : {}),
  };
}

/** Options for a connection to one URL of a deployment: TLS where the URL is `rediss://`, and the credentials. */
export function urlOptions(url: string, tls: DeploymentTls | null, auth: DeploymentAuth): RedisOptions {
  return {
    ...authOptions(auth, url),
    ...(url.startsWith("rediss://") ? { tls: tlsOptions(tls) } : {}),
  };
}
