import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { startLauncher } from "../support/launcher";

describe("npm start with wrong deployment settings", () => {
  it("stops at once with one line per mistake, never showing a password", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-deploy-launcher-"));
    const notPem = path.join(dir, "ca.txt");
    writeFileSync(notPem, "not a certificate");
    const launcher = await startLauncher(
      { REDIS_URLS: "", REDIS_URL: "rediss://lockscope:hunter2-secret@127.0.0.1:1/x", REDIS_TLS_CA_FILE: notPem, REDIS_PASSWORD_FILE: path.join(dir, "missing") },
      { waitReady: false },
    );
    expect(await launcher.exited).toBe(1);
    expect(launcher.output().trim().split("\n")).toEqual([
      `lockscope: REDIS_TLS_CA_FILE=${JSON.stringify(notPem)} holds no PEM block: expected a PEM file (-----BEGIN …-----).`,
      `lockscope: REDIS_PASSWORD_FILE=${JSON.stringify(path.join(dir, "missing"))} cannot be read (ENOENT): expected a readable file.`,
      'lockscope: REDIS_URL: URL 1 ("rediss://lockscope:****@127.0.0.1:1/x") has a path other than a database number (/0, /1, …): expected e.g. redis://10.0.0.5:6379 or rediss://user:password@host:6380.',
    ]);
  });
});
