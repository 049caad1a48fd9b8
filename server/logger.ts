import "server-only";
import pino, { type DestinationStream, type Logger } from "pino";
import { maskRedisUrl, withoutArguments, type LockscopeConfig } from "@/lib/config";
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

/**
 * What the log keeps of an error, whoever logs it and however (an Error, its message, `String(error)`): its name,
 * code, message and stack, and its cause the same way. Nothing else: ioredis hangs the command and its arguments
 * on every reply error (`command.args`: a lock token, a reason, the password of a failed AUTH), a Redis Cluster
 * client its last node's error, a pipeline the errors before it.
 */
export function loggedError(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return withoutArguments(value);
  if (typeof value !== "object" || value === null) return value;
  const { name, message, code, stack, cause } = value as { name?: unknown; message?: unknown; code?: unknown; stack?: unknown; cause?: unknown };
  if (typeof message !== "string") return `[${Object.prototype.toString.call(value).slice(8, -1)}: not logged]`;
  return {
    type: typeof name === "string" ? name : "Error",
    message: withoutArguments(message),
    ...(typeof code === "string" || typeof code === "number" ? { code } : {}),
    ...(typeof stack === "string" ? { stack: withoutArguments(stack) } : {}),
    ...(cause !== undefined && depth < 3 ? { cause: loggedError(cause, depth + 1) } : {}),
  };
}

/** The console's logger; `destination` is for tests (default: stdout). */
export function createLogger(level: LockscopeConfig["logLevel"], destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: "lockscope", pid: process.pid },
      redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
      // `err` and `error` are where every caller puts an error or its text (pino's own `err` serializer keeps
      // every property of an error, the command's arguments with them).
      serializers: { url: maskUrl, redisUrl: maskUrl, err: loggedError, error: loggedError },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

/**
 * Structured JSON logs: one line per request, per node state change and per operator action (never one
 * per lock event), level from LOG_LEVEL. Secrets are masked by field name, whatever the caller passes, and an
 * error under `err` or `error` keeps no command arguments (`loggedError`).
 */
export function getLogger(): Logger {
  return singleton("logger", () => createLogger(getConfig().logLevel));
}
