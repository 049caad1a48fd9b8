import "server-only";
import os from "node:os";
import { consoleHostRules, isAllowedHost, misdirectedMessage, type HostRules } from "@/lib/host-rules";
import { getConfig } from "./config";
import { ApiError } from "./errors";
import { singleton } from "./global";

/** The host names and origins this console answers to, from its configuration (once per process). */
export function getHostRules(): HostRules {
  return singleton("host-rules", () => {
    const interfaceAddresses = Object.values(os.networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
    return consoleHostRules(getConfig(), interfaceAddresses);
  });
}

/** Throws 421 unless the Host header names this console (DNS rebinding sends the attacker's name). */
export function assertServedHost(headers: Headers): void {
  if (isAllowedHost(getHostRules(), headers.get("host"))) return;
  throw new ApiError("misdirected_request", misdirectedMessage(headers.get("host")));
}
