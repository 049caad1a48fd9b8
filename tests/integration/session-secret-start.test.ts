import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OPERATOR_TOKEN } from "../support/console";
import { startLauncher } from "../support/launcher";
import { startCluster, type TestCluster } from "../support/redis";

/**
 * The key that signs session cookies: whoever guesses it makes a cookie for any role, offline, from one cookie seen.
 * A chosen one that is short or not random stops the start with one line that says what to set instead; the key
 * itself never reaches the output, whether it is refused or taken.
 */
describe("the console's start, given LOCKSCOPE_SESSION_SECRET", () => {
  let cluster: TestCluster;
  beforeAll(async () => {
    cluster = await startCluster(1);
  });
  afterAll(async () => {
    await cluster.close();
  });

  it("stops with one line naming the variable, the minimum and how to make one when the secret is weak, without the secret", async () => {
    for (const weak of ["sessions-secret-2024", "my-console-session-secret-for-prod", "0123456789abcdef0123456789abcdef"]) {
      const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_SESSION_SECRET: weak, LOG_LEVEL: "debug" }, { waitReady: false });
      const code = await Promise.race([launcher.exited, new Promise((resolve) => setTimeout(() => resolve("still running after 30 s"), 30_000))]);
      if (code !== 1) await launcher.stop("SIGKILL");
      expect([weak.length, code]).toEqual([weak.length, 1]);
      const lines = launcher.output().trim().split("\n");
      expect(lines.at(-1)).toMatch(
        new RegExp(`^lockscope: LOCKSCOPE_SESSION_SECRET=\\(hidden, ${weak.length} characters\\) is invalid: expected a random secret of at least 32 printable characters .*make one with \`openssl rand -base64 32\``),
      );
      expect(launcher.output()).not.toContain(weak);
    }
  }, 120_000);

  it("starts with a random one, and logs nothing of it at the most detailed level, through a sign-in", async () => {
    const secret = "ZE1GAa7aIySZbmlr1d1gQaJBZdpHXkdk6GGlCW9l48g=";
    const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN, LOCKSCOPE_SESSION_SECRET: secret, LOG_LEVEL: "debug" });
    try {
      const signIn = await fetch(`${launcher.baseUrl}/api/session`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: launcher.baseUrl },
        body: JSON.stringify({ token: OPERATOR_TOKEN, name: "alice" }),
      });
      expect(signIn.status).toBe(200);
      const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0]!;
      expect((await fetch(`${launcher.baseUrl}/api/session`, { headers: { cookie } }).then((r) => r.json())) as unknown).toMatchObject({ role: "operator", actor: "alice" });
      // The output carries the start's lines and the sign-in's at debug level.
      expect(launcher.output()).toContain("sign-in");
      expect(launcher.output()).not.toContain(secret);
      expect(launcher.output()).not.toContain(secret.slice(0, 16));
    } finally {
      await launcher.stop("SIGTERM");
    }
  }, 120_000);

  it("stops with one line naming the data folder's session-secret file and how to make a good one when a weak key was written there by hand", async () => {
    delete process.env.LOCKSCOPE_SESSION_SECRET;
    const weak = "sessions-secret-2024";
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-weak-secret-"));
    const file = path.join(dataDir, "session-secret");
    writeFileSync(file, `${weak}\n`, { mode: 0o600 });
    const launcher = await startLauncher({ REDIS_URLS: cluster.urls.join(","), LOCKSCOPE_OPERATOR_TOKEN: OPERATOR_TOKEN, LOCKSCOPE_DATA_DIR: dataDir, LOG_LEVEL: "debug" }, { waitReady: false });
    const code = await Promise.race([launcher.exited, new Promise((resolve) => setTimeout(() => resolve("still running after 60 s"), 60_000))]);
    if (code !== 1) await launcher.stop("SIGKILL");
    expect(code).toBe(1);
    const lines = launcher.output().trim().split("\n");
    expect(lines.at(-1)).toContain(`lockscope: could not start: the session secret in ${file} is too weak to sign session cookies`);
    expect(lines.at(-1)).toContain(`openssl rand -base64 32 > ${file}`);
    expect(launcher.output()).not.toContain(weak);
  }, 120_000);
});
