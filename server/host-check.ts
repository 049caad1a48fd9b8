import "server-only";
import os from "node:os";
import { hostRules, isAllowedHost, type HostRules } from "@/lib/host-rules";
import { getConfig } from "./config";
import { ApiError } from "./errors";
import { singleton } from "./global";

/** The host names and origins this console answers to, from its configuration (once per process). */
export function getHostRules(): HostRules {
  return singleton("host-rules", () => {
    const config = getConfig();
    const interfaceAddresses = Object.values(os.networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
    return hostRules({ bindHost: config.host, port: config.port, publicOrigin: config.publicOrigin, allowedHosts: config.allowedHosts, interfaceAddresses });
  });
}

/** Throws 421 unless the Host header names this console (DNS rebinding sends the attacker's name). */
export function assertServedHost(headers: Headers): void {
  if (isAllowedHost(getHostRules(), headers.get("host"))) return;
  const shown = (headers.get("host") ?? "").slice(0, 100);
  throw new ApiError(
    "misdirected_request",
    `This console does not answer to the host name ${JSON.stringify(shown)}. Use localhost or a configured name, or add it to ALLOWED_HOSTS (or set LOCKSCOPE_PUBLIC_ORIGIN).`,
  );
}
