import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "@/server/logger";

/** Collects the JSON lines a logger writes. */
function capture(level: Parameters<typeof createLogger>[0] = "info") {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n")) if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { log: createLogger(level, stream), lines };
}

describe("structured logs", () => {
  it("writes one JSON object per line with level, time, service and message", () => {
    const { log, lines } = capture();
    log.info({ requestId: "r1", route: "GET /api/health", status: 200 }, "request");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 30, service: "lockscope", msg: "request", route: "GET /api/health", status: 200 });
    expect(typeof lines[0]?.time).toBe("string");
  });

  it("masks tokens, cookies, passwords and secrets whatever the caller passes", () => {
    const { log, lines } = capture();
    log.info(
      {
        token: "lsop_secret_value_1",
        body: { token: "lsop_secret_value_2", reason: "stuck holder" },
        headers: { authorization: "Bearer lsop_secret_value_3", cookie: "lockscope_session=lsop_secret_value_4" },
        config: { metricsToken: "lsop_secret_value_5", operatorToken: "lsop_secret_value_6", sessionSecret: "lsop_secret_value_7" },
        password: "lsop_secret_value_8",
      },
      "operator action",
    );
    const text = JSON.stringify(lines);
    expect(text).not.toMatch(/lsop_secret_value/);
    expect(text).toContain("stuck holder");
    expect(lines[0]?.token).toBe("[redacted]");
  });

  it("hides the password of a redis URL logged as url", () => {
    const { log, lines } = capture();
    log.warn({ node: "node-2", url: "redis://:hunter2-password@10.0.0.3:6379" }, "lock node unreachable");
    expect(lines[0]?.url).toBe("redis://:****@10.0.0.3:6379");
    expect(JSON.stringify(lines)).not.toContain("hunter2");
  });

  it("writes nothing below LOG_LEVEL", () => {
    const { log, lines } = capture("warn");
    log.info("request");
    log.debug("detail");
    log.warn("lock node unreachable");
    expect(lines.map((l) => l.msg)).toEqual(["lock node unreachable"]);
  });
});
