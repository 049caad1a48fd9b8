import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import type * as ExportModule from "@/app/api/audit/export/route";
import type { AuditEntry } from "@/server/audit/types";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/** An intent record as the console writes it in the nodes' audit stream (the entry stays `pending`). */
function intent(id: string, at: number): string {
  const entry: AuditEntry = { id, at, actor: "batch", role: "operator", action: "force-release", resource: `lock:long/${id}`, token: null, holder: null, reason: "long log", outcome: "pending", nodes: [], ip: "127.0.0.1", userAgent: null };
  return JSON.stringify({ v: 1, kind: "intent", id, entry });
}

/** A log longer than one export (10 000 entries): the export says it was cut, and where to go on from. */
describe("exporting an audit log longer than one export", () => {
  let cluster: TestCluster;
  let dir: string;
  let exportRoute: typeof ExportModule;
  let auditRoute: typeof AuditModule;
  const ids: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-audit-export-"));
    cluster = await setUpConsole({ nodes: 1, env: { AUDIT_FILE: path.join(dir, "audit.jsonl") } });
    const [node] = cluster.clients();
    const start = Date.now() - 3_600_000;
    const pipeline = node!.pipeline();
    for (let i = 0; i < 10_003; i++) {
      const at = start + i * 10;
      const id = `${String(at).padStart(13, "0")}-${i.toString(16).padStart(12, "0")}`;
      ids.push(id);
      pipeline.xadd("lockscope:audit", `${at}-0`, "r", intent(id, at));
    }
    await pipeline.exec();
    exportRoute = await import("@/app/api/audit/export/route");
    auditRoute = await import("@/app/api/audit/route");
  }, 60_000);
  afterAll(async () => {
    await tearDownConsole(cluster);
    rmSync(dir, { recursive: true, force: true });
  });

  it("gives the cursor of the next entry in the body and a header, and the rest from it with `before`, none twice, none missed", async () => {
    const first = await call(exportRoute.GET, "GET", "/api/audit/export?format=json", { token: VIEWER_TOKEN });
    expect(first.status, JSON.stringify(first.body).slice(0, 300)).toBe(200);
    const firstBody = first.body as { entries: AuditEntry[]; truncated: boolean; next: string | null };
    expect(firstBody.entries).toHaveLength(10_000);
    expect(firstBody.truncated).toBe(true);
    expect(firstBody.next).toBe(firstBody.entries.at(-1)?.id);
    expect(first.headers.get("x-audit-next")).toBe(firstBody.next);
    // The list pages from the same cursor, so a script follows either the same way.
    const page = await call(auditRoute.GET, "GET", "/api/audit?limit=500", { token: VIEWER_TOKEN });
    expect((page.body as { entries: AuditEntry[] }).entries[0]?.id).toBe(ids.at(-1));

    const rest = await call(exportRoute.GET, "GET", `/api/audit/export?format=csv&before=${firstBody.next}`, { token: VIEWER_TOKEN });
    expect(rest.status).toBe(200);
    expect(rest.headers.get("x-audit-truncated")).toBe("false");
    expect(rest.headers.get("x-audit-next")).toBeNull();
    const restIds = (rest.body as string).trim().split("\r\n").slice(1).map((line) => line.split(",")[0]);
    expect([...firstBody.entries.map((e) => e.id), ...restIds]).toEqual([...ids].reverse());
  }, 60_000);
});
