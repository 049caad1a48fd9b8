import { mkdtempSync, readFileSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";

describe("generated operator token", () => {
  // The first import of the server's auth module transforms its whole import tree, which took over 5 s (the unit
  // tests' default timeout) on a loaded machine; what this test checks is the token, not how long that takes.
  it("is generated once when none is configured, kept with mode 0600, and reused on the next start", { timeout: 30_000 }, async () => {
    const store = globalThis as unknown as Record<symbol, unknown>;
    for (const name of ["config", "secrets", "launcher-config"]) delete store[Symbol.for(`lockscope.${name}`)];
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-token-"));
    process.env.LOCKSCOPE_DATA_DIR = dataDir;
    delete process.env.LOCKSCOPE_OPERATOR_TOKEN;
    delete process.env.LOCKSCOPE_VIEWER_TOKEN;
    delete process.env.LOCKSCOPE_SESSION_SECRET;
    const auth = await import("@/server/auth");

    const first = auth.getSecrets();
    expect(first.generated).toBe(true);
    const file = path.join(dataDir, "operator-token");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8").trim()).toBe(first.operatorToken);
    expect(first.operatorToken.length).toBeGreaterThanOrEqual(32);
    expect(auth.roleForToken(first.operatorToken)).toBe("operator");
    expect(statSync(path.join(dataDir, "session-secret")).mode & 0o777).toBe(0o600);

    // A restart (a fresh process: the cached secrets gone) reads the same token back.
    delete store[Symbol.for("lockscope.secrets")];
    const second = auth.getSecrets();
    expect(second.generated).toBe(false);
    expect(second.operatorToken).toBe(first.operatorToken);

    // With no viewer token, reading is open to whoever reaches the port, as a viewer, and nothing more.
    const open = await auth.authenticate(new Headers());
    expect(open).toEqual({ role: "viewer", actor: "anonymous", via: "open" });
    expect(() => auth.requireRole(open, "operator")).toThrow(/operator role/);
  });
});
