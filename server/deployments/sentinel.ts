import "server-only";
import Redis from "ioredis";
import { authOptions, tlsOptions } from "./connection";
import type { DeploymentDriver } from "./types";

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
          new Redis({
            sentinels: d.sentinels.map((s) => ({ host: s.host, port: s.port })),
            name: d.master,
            role: "master",
            failoverDetector: true,
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
