import "server-only";
import Redis from "ioredis";
import { maskRedisUrl } from "@/lib/config";
import { connectUrl, urlOptions } from "./connection";
import type { DeploymentDriver } from "./types";

/** One Redis instance: single-instance locks, held where that instance holds them. */
export const standaloneDriver: DeploymentDriver<"standalone"> = {
  kind: "standalone",
  endpoints: (d) => [
    {
      label: maskRedisUrl(d.url),
      url: d.url,
      connect: (options) => new Redis(connectUrl(d.url), { ...urlOptions(d.url, d.tls, d.auth), ...options }),
    },
  ],
};
