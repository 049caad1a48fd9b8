import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { AuditFileCursor } from "@/server/audit/file-cursor";
import { newAuditId, type AuditRecord } from "@/server/audit/records";

const dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-audit-cursor-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const T = 1_700_000_000_000;
function intent(i: number): AuditRecord {
  const id = newAuditId(T + i);
  return {
    v: 1,
    kind: "intent",
    id,
    entry: {
      id, at: T + i, actor: "alice", role: "operator", action: "force-release", resource: `lock:r/${i}`, token: "t".repeat(i % 300), holder: null,
      reason: `reason ${i} ${"é".repeat(i % 50)}`, outcome: "pending", nodes: [], ip: "127.0.0.1", userAgent: "test",
    },
  };
}

async function readAll(cursor: AuditFileCursor, maxMs = Infinity): Promise<AuditRecord[]> {
  const out: AuditRecord[] = [];
  while (!cursor.done) out.push(...(await cursor.next(maxMs)));
  await cursor.close();
  return out;
}

describe("reading the audit file backwards", () => {
  it("returns every whole record newest first, across chunk boundaries, and leaves a record being appended", async () => {
    const file = path.join(dir, "audit.jsonl");
    const records = Array.from({ length: 3_000 }, (_, i) => intent(i));
    writeFileSync(file, records.map((r) => `${JSON.stringify(r)}\n`).join(""));
    appendFileSync(file, '{"v":1,"kind":"intent","id":"17000'); // torn: no newline yet
    const cursor = (await AuditFileCursor.open(file))!;
    const first = await cursor.next();
    // One chunk at a time: a page near the end reads a little of the file, not all of it.
    expect(first.length).toBeGreaterThan(0);
    expect(first.length).toBeLessThan(records.length);
    const rest = await readAll(cursor);
    expect([...first, ...rest].map((r) => r.id)).toEqual(records.map((r) => r.id).reverse());
    expect(cursor.lowMs).toBe(T);
  });

  it("skips records newer than the page's bound, has nothing for an empty file, and null for none", async () => {
    const file = path.join(dir, "bounded.jsonl");
    writeFileSync(file, [0, 1, 2, 3].map((i) => `${JSON.stringify(intent(i))}\n`).join(""));
    const older = await readAll((await AuditFileCursor.open(file))!, T + 1);
    expect(older.map((r) => (r.kind === "intent" ? r.entry.at : 0))).toEqual([T + 1, T]);
    const empty = path.join(dir, "empty.jsonl");
    writeFileSync(empty, "");
    expect(await readAll((await AuditFileCursor.open(empty))!)).toEqual([]);
    expect(await AuditFileCursor.open(path.join(dir, "missing.jsonl"))).toBeNull();
  });
});
