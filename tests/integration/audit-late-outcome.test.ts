import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import type * as ExportModule from "@/app/api/audit/export/route";
import type { AuditEntry } from "@/server/audit/types";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/** An intent record as a console writes it in the nodes' audit stream (the entry stays `pending`). */
function intent(id: string, at: number, resource: string): string {
  const entry: AuditEntry = { id, at, actor: "other-console", role: "operator", action: "force-release", resource, token: null, holder: null, reason: "late outcome", outcome: "pending", nodes: [], ip: "127.0.0.1", userAgent: null };
  return JSON.stringify({ v: 1, kind: "intent", id, entry });
}

function outcome(id: string, finishedAt: number): string {
  return JSON.stringify({ v: 1, kind: "outcome", id, outcome: "released", nodes: [{ id: "node-0", result: "deleted" }], finishedAt });
}

interface Page {
  entries: AuditEntry[];
  next: string | null;
}

/**
 * Another console released a lock 20 minutes ago, while the nodes' quorum was gone for a while: its intent went
 * into the stream then, its outcome (retried every 5 s until a quorum took it) only 10 minutes later. This console
 * has neither in its file: it reads the entry from the nodes' streams alone.
 */
describe("an audit outcome written long after its intent", () => {
  let cluster: TestCluster;
  let dir: string;
  let auditRoute: typeof AuditModule;
  let exportRoute: typeof ExportModule;
  const now = Date.now();
  const lateAt = now - 20 * 60_000;
  const lateId = `${String(lateAt).padStart(13, "0")}-00000000a1a1`;
  const laterAt = now - 15 * 60_000;
  const laterId = `${String(laterAt).padStart(13, "0")}-00000000b2b2`;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-audit-late-"));
    cluster = await setUpConsole({ nodes: 3, env: { AUDIT_FILE: path.join(dir, "audit.jsonl") } });
    for (const node of cluster.clients()) {
      await node.xadd("lockscope:audit", `${lateAt}-0`, "r", intent(lateId, lateAt, "lock:late/1"));
      await node.xadd("lockscope:audit", `${laterAt}-0`, "r", intent(laterId, laterAt, "lock:late/2"));
      await node.xadd("lockscope:audit", `${laterAt + 1}-0`, "r", outcome(laterId, laterAt + 1));
      await node.xadd("lockscope:audit", `${now - 10 * 60_000}-0`, "r", outcome(lateId, now - 10 * 60_000));
    }
    auditRoute = await import("@/app/api/audit/route");
    exportRoute = await import("@/app/api/audit/export/route");
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
    rmSync(dir, { recursive: true, force: true });
  });

  const outcomes = async (query: string) => {
    const res = await call(auditRoute.GET, "GET", `/api/audit${query}`, { token: VIEWER_TOKEN });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return (res.body as Page).entries.map((e) => [e.id, e.outcome]);
  };

  it("reads released on every page and under every filter, as on the first page", async () => {
    expect(await outcomes("?resource=lock:late/")).toEqual([
      [laterId, "released"],
      [lateId, "released"],
    ]);
    // The second page, from the first page's cursor.
    expect(await outcomes(`?resource=lock:late/&limit=1`)).toEqual([[laterId, "released"]]);
    expect(await outcomes(`?resource=lock:late/&limit=1&before=${laterId}`)).toEqual([[lateId, "released"]]);
    // A time range that ends before the outcome was written.
    expect(await outcomes(`?to=${lateAt + 1000}`)).toEqual([[lateId, "released"]]);
  });

  it("exports it as released from a cursor, as the page lists it", async () => {
    const res = await call(exportRoute.GET, "GET", `/api/audit/export?format=json&before=${laterId}`, { token: VIEWER_TOKEN });
    expect(res.status).toBe(200);
    expect((res.body as Page).entries.map((e) => [e.id, e.outcome])).toEqual([[lateId, "released"]]);
  });
});
