import "server-only";
import Redis from "ioredis";
import { maskRedisUrl } from "@/lib/config";
import { connectUrl, followPasswordFile, urlOptions } from "./connection";
import type { DeploymentDriver } from "./types";

/** One Redis instance: single-instance locks, held where that instance holds them. */
export const standaloneDriver: DeploymentDriver<"standalone"> = {
  kind: "standalone",
  endpoints: (d) => [
    {
      label: maskRedisUrl(d.url),
      url: d.url,
      connect: (options) => {
        const client = new Redis(connectUrl(d.url), { ...urlOptions(d.url, d.tls, d.auth), ...options });
        followPasswordFile(client.options, "password", d.auth, d.url);
        return client;
      },
    },
  ],
};
