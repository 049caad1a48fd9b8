import "server-only";
import pino, { type DestinationStream, type Logger } from "pino";
import { maskRedisUrl, type LockscopeConfig } from "@/lib/config";
import { getConfig } from "./config";
import { singleton } from "./global";

/** Field paths whose values are secrets, wherever a caller puts them (one level deep, and in headers). */
export const REDACTED_PATHS = [
  "token",
  "*.token",
  "operatorToken",
  "viewerToken",
  "metricsToken",
  "sessionSecret",
  "*.operatorToken",
  "*.viewerToken",
  "*.metricsToken",
  "*.sessionSecret",
  "authorization",
  "*.authorization",
  "cookie",
  "*.cookie",
  'headers["set-cookie"]',
  "req.headers.authorization",
  "req.headers.cookie",
  "password",
  "*.password",
  "secret",
  "*.secret",
];

/** A redis:// URL logged under any of these names loses its password. */
function maskUrl(value: unknown): unknown {
  return typeof value === "string" && /^rediss?:\/\//i.test(value) ? maskRedisUrl(value) : value;
}

/** The console's logger; `destination` is for tests (default: stdout). */
export function createLogger(level: LockscopeConfig["logLevel"], destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: "lockscope", pid: process.pid },
      redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
      serializers: { url: maskUrl, redisUrl: maskUrl },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

/**
 * Structured JSON logs: one line per request, per node state change and per operator action (never one
 * per lock event), level from LOG_LEVEL. Secrets are masked by field name, whatever the caller passes.
 */
export function getLogger(): Logger {
  return singleton("logger", () => createLogger(getConfig().logLevel));
}
