import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { beforeEach, describe, expect, it } from "vitest";

const store = globalThis as unknown as Record<symbol, unknown>;

/** A data folder holding `secret` (when given) in its session-secret file, as the console's next start finds it. */
function dataDir(secret?: string): string {
  for (const name of ["config", "secrets", "launcher-config"]) delete store[Symbol.for(`lockscope.${name}`)];
  const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-session-secret-"));
  if (secret !== undefined) writeFileSync(path.join(dir, "session-secret"), `${secret}\n`, { mode: 0o600 });
  process.env.LOCKSCOPE_DATA_DIR = dir;
  return dir;
}

/**
 * The key that signs session cookies, kept in the data folder's session-secret file where
 * LOCKSCOPE_SESSION_SECRET is unset: one written there by hand is held to the same bar as the variable.
 */
describe("the session secret kept in the data folder", () => {
  beforeEach(() => {
    process.env.LOCKSCOPE_OPERATOR_TOKEN = "unit-operator-token-0123456789abcdef";
    delete process.env.LOCKSCOPE_VIEWER_TOKEN;
    delete process.env.LOCKSCOPE_SESSION_SECRET;
  });

  it("refuses a weak one written by hand, naming the file and how to make a good one, never the value", { timeout: 30_000 }, async () => {
    const auth = await import("@/server/auth");
    for (const weak of ["sessions-secret-2024", "my-console-session-secret-for-prod", "0123456789abcdef0123456789abcdef"]) {
      const dir = dataDir(weak);
      let message = "";
      try {
        auth.getSecrets();
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message, weak).toContain(path.join(dir, "session-secret"));
      expect(message).toContain("openssl rand -base64 32");
      expect(message).not.toContain(weak);
    }
  });

  it("takes a random one written by hand, and one it generated itself on the next start", { timeout: 30_000 }, async () => {
    const auth = await import("@/server/auth");
    const chosen = "ZE1GAa7aIySZbmlr1d1gQaJBZdpHXkdk6GGlCW9l48g=";
    dataDir(chosen);
    expect(auth.getSecrets().sessionSecret.toString("utf8")).toBe(chosen);

    const dir = dataDir();
    const generated = auth.getSecrets().sessionSecret.toString("utf8");
    expect(readFileSync(path.join(dir, "session-secret"), "utf8").trim()).toBe(generated);
    delete store[Symbol.for("lockscope.secrets")];
    delete store[Symbol.for("lockscope.config")];
    expect(auth.getSecrets().sessionSecret.toString("utf8")).toBe(generated);
  });
});
