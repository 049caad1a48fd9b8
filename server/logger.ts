import "server-only";
import pino, { type Logger } from "pino";
import { getConfig } from "./config";
import { singleton } from "./global";

/**
 * Structured JSON logs: one line per request, per node state change and per operator action (never one
 * per lock event). Secrets are masked by path, whatever the caller passes.
 */
export function getLogger(): Logger {
  return singleton("logger", () =>
    pino({
      level: getConfig().logLevel,
      base: { service: "lockscope" },
      redact: {
        paths: [
          "token",
          "*.token",
          "authorization",
          "*.authorization",
          "headers.authorization",
          "headers.cookie",
          "req.headers.authorization",
          "req.headers.cookie",
          "password",
          "*.password",
          "secret",
          "*.secret",
        ],
        censor: "[redacted]",
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    }),
  );
}
