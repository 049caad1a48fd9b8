import { mkdtempSync, readFileSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { SessionRevocations } from "@/server/session-revocation";

describe("signed-out sessions", () => {
  it("stay signed out after a restart over nodes that kept nothing, until they would have expired", async () => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), "lockscope-revoked-")), "revoked-sessions.jsonl");
    const now = 1_800_000_000_000;
    const before = new SessionRevocations(() => [], 1_000, file);
    await before.revoke("session-a", now + 12 * 3_600_000, now);
    await before.revoke("session-b", now + 60_000, now);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // The console restarts; its (embedded) nodes come back empty: no node has the sign-outs.
    const after = new SessionRevocations(() => [], 1_000, file);
    expect(await after.isRevoked("session-a", now + 1_000)).toBe(true);
    expect(await after.isRevoked("session-b", now + 1_000)).toBe(true);
    expect(await after.isRevoked("session-c", now + 1_000)).toBe(false);
    // Once a session would have expired anyway, its line is left out at the next start.
    const later = new SessionRevocations(() => [], 1_000, file);
    expect(await later.isRevoked("session-a", now + 120_000)).toBe(true);
    expect(readFileSync(file, "utf8").split("\n").filter(Boolean)).toHaveLength(1);
  });
});
