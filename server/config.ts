import "server-only";
import { readFileSync } from "node:fs";
import { parseConfig, type LockscopeConfig } from "@/lib/config";
import { peekGlobal, singleton } from "./global";

/**
 * The one place that reads `process.env`. The launcher (`scripts/start.ts`) parses the configuration
 * before anything starts and leaves it on globalThis (with the embedded nodes' URLs filled in);
 * under `next dev` it is parsed here on first use.
 */
export function getConfig(): LockscopeConfig {
  return singleton("config", () => peekGlobal<LockscopeConfig>("launcher-config") ?? parseConfig(process.env, { readFile: (file) => readFileSync(file, "utf8") }));
}

/** Whether the lock nodes are the embedded ones this process started (and may kill and restart in the lab). */
export function embeddedNodesOwned(): boolean {
  return peekGlobal<unknown>("embedded-nodes") !== undefined;
}

export const isProduction = process.env.NODE_ENV === "production";
