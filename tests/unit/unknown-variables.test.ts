import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CONFIG_VARIABLES, parseConfig } from "@/lib/config";
import { unknownVariables } from "@/lib/unknown-variables";

describe("LOCKSCOPE_ variables the console does not know", () => {
  it("are named with the closest variable it knows", () => {
    expect(unknownVariables({ LOCKSCOPE_VIEWR_TOKEN: "x", LOCKSCOPE_VIEWER_TOKEN: "y", PATH: "/bin" })).toEqual([{ name: "LOCKSCOPE_VIEWR_TOKEN", closest: "LOCKSCOPE_VIEWER_TOKEN" }]);
    expect(unknownVariables({ LOCKSCOPE_OPERATOR_TOKN: "x" })).toEqual([{ name: "LOCKSCOPE_OPERATOR_TOKN", closest: "LOCKSCOPE_OPERATOR_TOKEN" }]);
    expect(unknownVariables({ LOCKSCOPE_REDIS_URLS: "x", LOCKSCOPE_LOG_LEVEL: "debug" })).toEqual([
      { name: "LOCKSCOPE_REDIS_URLS", closest: "REDIS_URLS" },
      { name: "LOCKSCOPE_LOG_LEVEL", closest: "LOG_LEVEL" },
    ]);
    expect(unknownVariables({ lockscope_viewer_token: "x" })).toEqual([{ name: "lockscope_viewer_token", closest: "LOCKSCOPE_VIEWER_TOKEN" }]);
    // Other programs' variables are theirs.
    expect(unknownVariables({ REDIS_HOST: "x", NODE_OPTIONS: "y" })).toEqual([]);
  });

  it("and one spelled within a few letters of a variable the console reads, other programs' variables left alone", () => {
    // A misspelled METRICS_TOKEN leaves /metrics open, a misspelled TRUSTED_PROXIES counts every client as the proxy.
    const env = {
      METRICS_TOKN: "x",
      TRUSTED_PROXY: "10.0.0.1",
      lock_patterns: "lock:*",
      LOG_LEVL: "debug",
      REDIS_URL: "redis://h:1",
      // Other programs', the image's and Kubernetes's (a Service named `redis`).
      REDIS_HOST: "h",
      REDIS_PASSWORD: "x",
      NODE_OPTIONS: "--max-old-space-size=512",
      NODE_VERSION: "20.19.0",
      HOSTNAME: "lockscope-0",
      HOME: "/data",
      PWD: "/app",
      POSTGRES_PASSWORD: "x",
      REDIS_SERVICE_HOST: "10.96.0.13",
      REDIS_SERVICE_PORT: "6379",
      REDIS_PORT: "tcp://10.96.0.13:6379",
      REDIS_PORT_6379_TCP_ADDR: "10.96.0.13",
      KUBERNETES_SERVICE_HOST: "10.96.0.1",
      KUBERNETES_PORT_443_TCP: "tcp://10.96.0.1:443",
    };
    expect(unknownVariables(env)).toEqual([
      { name: "METRICS_TOKN", closest: "METRICS_TOKEN" },
      { name: "TRUSTED_PROXY", closest: "TRUSTED_PROXIES" },
      { name: "lock_patterns", closest: "LOCK_PATTERNS" },
      { name: "LOG_LEVL", closest: "LOG_LEVEL" },
    ]);
  });

  it("leave out what Kubernetes sets for Services named lockscope or lockscope-…", () => {
    const service = {
      LOCKSCOPE_SERVICE_HOST: "10.96.0.12",
      LOCKSCOPE_SERVICE_PORT: "3000",
      LOCKSCOPE_SERVICE_PORT_HTTP: "3000",
      LOCKSCOPE_PORT: "tcp://10.96.0.12:3000",
      LOCKSCOPE_PORT_3000_TCP: "tcp://10.96.0.12:3000",
      LOCKSCOPE_PORT_3000_TCP_PROTO: "tcp",
      LOCKSCOPE_PORT_3000_TCP_PORT: "3000",
      LOCKSCOPE_PORT_3000_TCP_ADDR: "10.96.0.12",
      LOCKSCOPE_METRICS_SERVICE_HOST: "10.96.0.14",
      LOCKSCOPE_METRICS_SERVICE_PORT: "9100",
      LOCKSCOPE_METRICS_PORT: "tcp://10.96.0.14:9100",
      LOCKSCOPE_METRICS_PORT_9100_UDP_ADDR: "10.96.0.14",
    };
    expect(unknownVariables(service)).toEqual([]);
    // Without its Service's host variable, a name ending in _PORT is no Service's.
    expect(unknownVariables({ LOCKSCOPE_METRIC_PORT: "9100" }).map((u) => u.name)).toEqual(["LOCKSCOPE_METRIC_PORT"]);
  });

  it("know every variable the configuration reads, and .env.example lists them all", () => {
    const read = new Set<string>();
    const env = new Proxy<Record<string, string | undefined>>({}, {
      get: (_, name) => {
        if (typeof name === "string") read.add(name);
        return undefined;
      },
    });
    parseConfig(env);
    expect([...read].filter((name) => !CONFIG_VARIABLES.includes(name))).toEqual([]);
    const example = readFileSync(path.resolve(import.meta.dirname, "../../.env.example"), "utf8");
    const listed = [...example.matchAll(/^# ?([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]);
    expect([...listed].sort()).toEqual([...CONFIG_VARIABLES].sort());
  });
});
