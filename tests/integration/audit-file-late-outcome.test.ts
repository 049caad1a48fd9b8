import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import type * as ExportModule from "@/app/api/audit/export/route";
import type { AuditEntry, AuditPage } from "@/server/audit/types";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

const id = (at: number, n: number) => `${String(at).padStart(13, "0")}-${n.toString(16).padStart(12, "0")}`;

function intent(entryId: string, at: number, resource: string): string {
  const entry: AuditEntry = {
    id: entryId, at, actor: "alice", role: "operator", action: "force-release", resource, token: null, holder: null,
    // Long enough that the entries below fill several of the reader's chunks.
    reason: `night cleanup ${"x".repeat(400)}`, outcome: "pending", nodes: [], ip: "127.0.0.1", userAgent: "curl/8",
  };
  return JSON.stringify({ v: 1, kind: "intent", id: entryId, entry });
}

const outcome = (entryId: string, finishedAt: number) =>
  JSON.stringify({ v: 1, kind: "outcome", id: entryId, outcome: "released", nodes: [{ id: "node-0", result: "deleted" }], finishedAt });

/**
 * This console's file alone (its one node does not answer). A release two hours ago waited for its outcome a long
 * time (the outcome is retried until the store takes it): its outcome line came after 300 later releases, far
 * more than one read of the file's end holds.
 */
describe("the audit file read alone, with an outcome written long after its intent", () => {
  let cluster: TestCluster;
  let dir: string;
  let auditRoute: typeof AuditModule;
  let exportRoute: typeof ExportModule;
  const now = Date.now();
  const oldAt = now - 2 * 60 * 60_000;
  const oldId = id(oldAt, 1);
  const laterIds: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-audit-file-late-"));
    const file = path.join(dir, "audit.jsonl");
    const lines = [intent(oldId, oldAt, "lock:slow/0")];
    for (let i = 0; i < 300; i++) {
      const at = now - 60 * 60_000 + i * 1_000;
      const entryId = id(at, 2 + i);
      laterIds.unshift(entryId);
      lines.push(intent(entryId, at, `lock:busy/${i}`), outcome(entryId, at + 5));
    }
    lines.push(outcome(oldId, now - 30 * 60_000));
    writeFileSync(file, `${lines.join("\n")}\n`);
    cluster = await setUpConsole({ nodes: 1, env: { AUDIT_FILE: file, LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
    auditRoute = await import("@/app/api/audit/route");
    exportRoute = await import("@/app/api/audit/export/route");
    cluster.pause(0);
  });
  afterAll(async () => {
    cluster?.resume(0);
    await tearDownConsole(cluster);
    rmSync(dir, { recursive: true, force: true });
  });

  const listed = async (query: string) => {
    const res = await call(auditRoute.GET, "GET", `/api/audit${query}`, { token: VIEWER_TOKEN });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const body = res.body as AuditPage;
    expect(body.source).toBe("file");
    return body;
  };

  it("lists every release since `from`, not only those after the late outcome's line", async () => {
    const since = await listed(`?limit=500&from=${now - 90 * 60_000}`);
    expect(since.entries.map((e) => e.id)).toEqual(laterIds);
    expect(since.next).toBeNull();
    const exported = await call(exportRoute.GET, "GET", `/api/audit/export?format=json&from=${now - 90 * 60_000}`, { token: VIEWER_TOKEN });
    expect((exported.body as AuditPage).entries.map((e) => e.id)).toEqual(laterIds);
  });

  it("lists the slow release as released, on every page", async () => {
    const all = await listed("?limit=500");
    expect(all.entries.map((e) => [e.id, e.outcome])).toEqual([...laterIds.map((e) => [e, "released"]), [oldId, "released"]]);
    const paged: Array<[string, string]> = [];
    let query = "?limit=50";
    for (;;) {
      const page = await listed(query);
      paged.push(...page.entries.map((e): [string, string] => [e.id, e.outcome]));
      if (!page.next) break;
      query = `?limit=50&before=${page.next}`;
    }
    expect(paged).toEqual(all.entries.map((e) => [e.id, e.outcome]));
  });
});
