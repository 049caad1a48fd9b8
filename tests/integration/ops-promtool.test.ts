import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PROMETHEUS_DIR, promtool } from "../support/prometheus";

describe("ops/prometheus with the real promtool", () => {
  const tmp = mkdtempSync(path.join(os.tmpdir(), "lockscope-promtool-"));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it("checks the alert rules", () => {
    const { status, output } = promtool(["check", "rules", "alerts.yml"]);
    expect(output).toContain("SUCCESS");
    expect(status).toBe(0);
  });

  it("passes the unit tests of every alert", () => {
    const { status, output } = promtool(["test", "rules", "alerts.test.yml"]);
    expect(output).toContain("SUCCESS");
    expect(status).toBe(0);
  });

  it("accepts the example scrape configuration with its rule file", () => {
    // The example reads the token from /etc/prometheus; point it at a file that exists here.
    const tokenFile = path.join(tmp, "metrics-token");
    writeFileSync(tokenFile, "a-metrics-token-0123456789\n");
    const config = readFileSync(path.join(PROMETHEUS_DIR, "prometheus.yml"), "utf8").replace("/etc/prometheus/lockscope-metrics-token", tokenFile);
    expect(config).toContain(tokenFile);
    writeFileSync(path.join(tmp, "prometheus.yml"), config);
    copyFileSync(path.join(PROMETHEUS_DIR, "alerts.yml"), path.join(tmp, "alerts.yml"));
    const { status, output } = promtool(["check", "config", path.join(tmp, "prometheus.yml")]);
    expect(output).toMatch(/SUCCESS: .*prometheus\.yml is valid/);
    expect(output).toMatch(/SUCCESS: \d+ rules found/);
    expect(status).toBe(0);
  });

  it("really fails on a broken rule (the check is not a no-op)", () => {
    writeFileSync(path.join(tmp, "broken.yml"), "groups:\n  - name: x\n    rules:\n      - alert: Broken\n        expr: sum(lockscope_node_up\n");
    const { status } = promtool(["check", "rules", path.join(tmp, "broken.yml")]);
    expect(status).not.toBe(0);
  });
});
