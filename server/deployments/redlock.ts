import "server-only";
import Redis from "ioredis";
import { maskRedisUrl } from "@/lib/config";
import { connectUrl, followPasswordFile, urlOptions } from "./connection";
import type { DeploymentDriver } from "./types";

/** Independent nodes, each holding its own copy of a lock: a lock is held where a quorum of them agree. */
export const redlockDriver: DeploymentDriver<"redlock"> = {
  kind: "redlock",
  endpoints: (d) =>
    d.urls.map((url) => ({
      label: maskRedisUrl(url),
      url,
      connect: (options) => {
        const client = new Redis(connectUrl(url), { ...urlOptions(url, d.tls, d.auth), ...options });
        followPasswordFile(client.options, "password", d.auth, url);
        return client;
      },
    })),
};
