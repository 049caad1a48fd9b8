import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import type * as ExportModule from "@/app/api/audit/export/route";
import { newAuditId } from "@/server/audit/records";
import type { AuditEntry, AuditPage } from "@/server/audit/types";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/**
 * Another console released a lock while node-0 was down (node-1 and node-2 took its records: a quorum). Now node-1
 * and node-2 are down and node-0 is back: this console can read one stream, which never had that entry.
 */
describe("the audit log read from fewer than a quorum of nodes", () => {
  let cluster: TestCluster;
  let dir: string;
  let auditRoute: typeof AuditModule;
  let exportRoute: typeof ExportModule;
  let otherId: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-audit-nodes-"));
    cluster = await setUpConsole({ nodes: 3, env: { AUDIT_FILE: path.join(dir, "audit.jsonl") } });
    auditRoute = await import("@/app/api/audit/route");
    exportRoute = await import("@/app/api/audit/export/route");
    const { AuditLog } = await import("@/server/audit/log");
    const { getNodes } = await import("@/server/nodes");
    const other = new AuditLog(getNodes(), path.join(dir, "other-console.jsonl"), 200);
    const entry: AuditEntry = { id: newAuditId(), at: Date.now(), actor: "other", role: "operator", action: "force-release", resource: "lock:elsewhere", token: null, holder: null, reason: "written by another console", outcome: "pending", nodes: [], ip: "127.0.0.1", userAgent: null };
    otherId = entry.id;
    cluster.pause(0);
    try {
      await other.recordIntent(entry);
      await other.recordOutcome(entry.id, "released", [], Date.now());
    } finally {
      cluster.resume(0);
    }
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
    rmSync(dir, { recursive: true, force: true });
  });

  it("lists the entry while a quorum answers, and names the nodes that did not when fewer answer", async () => {
    const all = await call(auditRoute.GET, "GET", "/api/audit", { token: VIEWER_TOKEN });
    expect((all.body as AuditPage).entries.map((e) => e.id)).toEqual([otherId]);
    expect((all.body as AuditPage).missingNodes).toBeUndefined();

    cluster.pause(1);
    cluster.pause(2);
    try {
      const res = await call(auditRoute.GET, "GET", "/api/audit", { token: VIEWER_TOKEN });
      expect(res.status).toBe(200);
      const body = res.body as AuditPage;
      expect(body.source).toBe("stream");
      // The one stream read lacks it: the answer says it may be incomplete, and which nodes it lacks.
      expect(body.entries).toEqual([]);
      expect(body.missingNodes).toEqual(["node-1", "node-2"]);
      const exported = await call(exportRoute.GET, "GET", "/api/audit/export?format=csv", { token: VIEWER_TOKEN });
      expect(exported.headers.get("x-audit-missing-nodes")).toBe("node-1,node-2");
    } finally {
      cluster.resume(1);
      cluster.resume(2);
    }
  });
});
