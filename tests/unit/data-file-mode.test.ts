import { chmodSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import pino from "pino";
import { beforeAll, describe, expect, it } from "vitest";

const OPERATOR_TOKEN = "lsop_an-operator-token-from-an-older-version";
const SESSION_SECRET = "a-session-secret-from-an-older-version-0123";
const logged: Array<{ level: number; msg: string; file?: string }> = [];

/** Drops what a previous test file may have left on globalThis, and logs into `logged`. */
function resetGlobals(): void {
  const store = globalThis as unknown as Record<symbol, unknown>;
  for (const name of ["config", "secrets", "wrong-token-limiter", "host-rules", "launcher-config", "data-file-mode-told"]) delete store[Symbol.for(`lockscope.${name}`)];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) logged.push(JSON.parse(line) as (typeof logged)[number]);
      done();
    },
  });
  store[Symbol.for("lockscope.logger")] = pino({ level: "info" }, sink);
}

const mode = (file: string) => statSync(file).mode & 0o777;

describe("the console's own files, left readable by others", () => {
  let dir: string;
  const file = (name: string) => path.join(dir, name);
  const loose = (name: string, text: string) => {
    writeFileSync(file(name), text, { mode: 0o644 });
    chmodSync(file(name), 0o644);
  };

  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-modes-"));
    loose("operator-token", `${OPERATOR_TOKEN}\n`);
    loose("session-secret", `${SESSION_SECRET}\n`);
    loose("audit.jsonl", "");
    loose("revoked-sessions.jsonl", `${JSON.stringify({ id: "old-session", expiresAtMs: Date.now() + 60_000 })}\n`);
    loose("losses.jsonl", "");
    loose("patterns.json", "{}\n");
    resetGlobals();
    delete process.env.LOCKSCOPE_OPERATOR_TOKEN;
    delete process.env.LOCKSCOPE_SESSION_SECRET;
    delete process.env.LOCKSCOPE_VIEWER_TOKEN;
    delete process.env.AUDIT_FILE;
    process.env.LOCKSCOPE_DATA_DIR = dir;
  });

  it("tightens each to 0600 when the console opens it, and says once which file, never what it holds", async () => {
    const { getSecrets } = await import("@/server/auth");
    const { AuditLog } = await import("@/server/audit/log");
    const { SessionRevocations } = await import("@/server/session-revocation");
    const { LossJournal } = await import("@/server/live/losses-journal");
    const { PatternStore } = await import("@/server/patterns");

    // The console keeps using what the files hold.
    expect(getSecrets().operatorToken).toBe(OPERATOR_TOKEN);
    new AuditLog([], file("audit.jsonl"), 100);
    await expect(new SessionRevocations(() => [], 100, file("revoked-sessions.jsonl")).isRevoked("old-session")).resolves.toBe(true);
    new LossJournal(file("losses.jsonl")).restore("default");
    new PatternStore(file("patterns.json"), ["lock:*"]);

    const names = ["operator-token", "session-secret", "audit.jsonl", "revoked-sessions.jsonl", "losses.jsonl", "patterns.json"];
    for (const name of names) expect(mode(file(name)).toString(8), name).toBe("600");
    const warnings = logged.filter((l) => l.level === 40 && l.msg.includes("tightened"));
    expect(warnings.map((w) => w.file).sort()).toEqual(names.map(file).sort());
    const text = JSON.stringify(logged);
    expect(text).not.toContain(OPERATOR_TOKEN);
    expect(text).not.toContain(SESSION_SECRET);

    // Opened again, a tight file is not reported again.
    new LossJournal(file("losses.jsonl")).restore("default");
    new AuditLog([], file("audit.jsonl"), 100);
    expect(logged.filter((l) => l.level === 40 && l.msg.includes("tightened"))).toHaveLength(names.length);
  });

  it("leaves alone a folder where one of its files belongs (a secret volume mounted there), and says nothing of it", async () => {
    const { tightenDataFile } = await import("@/server/data-file-mode");
    const folder = file("mounted-secret");
    mkdirSync(folder);
    chmodSync(folder, 0o755);
    const before = logged.length;
    tightenDataFile(folder);
    tightenDataFile(folder, statSync(folder).mode);
    // (0600 would have taken the folder's search bit: its owner could no longer open what is in it.)
    expect(mode(folder).toString(8)).toBe("755");
    expect(logged.slice(before)).toEqual([]);
  });
});
