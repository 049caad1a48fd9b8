import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import { newAuditId } from "@/server/audit/records";
import type { AuditEntry, AuditPage } from "@/server/audit/types";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import { until } from "../support/wait";

/**
 * Another console tried a release while node-1 and node-2 were stalled: only node-0 answered its audit intent in
 * time, so the release was refused (503, nothing deleted). The stalled nodes took the intent all the same once they
 * went on. Later node-0 is down: this console reads node-1 and node-2, a quorum, and has nothing of that entry in
 * its own file.
 */
describe("a release refused because its audit intent reached too few nodes in time", () => {
  let cluster: TestCluster;
  let dir: string;
  let auditRoute: typeof AuditModule;
  let refusedId: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-audit-refused-"));
    cluster = await setUpConsole({ nodes: 3, env: { AUDIT_FILE: path.join(dir, "audit.jsonl"), LOCKSCOPE_NODE_TIMEOUT_MS: "300" } });
    auditRoute = await import("@/app/api/audit/route");
    const { AuditLog, AuditUnavailableError } = await import("@/server/audit/log");
    const { OutcomeRetryingStore } = await import("@/server/audit/outcome-retry");
    const { getNodes } = await import("@/server/nodes");
    const { whenReady } = await import("@/server/health");
    for (const node of getNodes()) expect(await whenReady(node.client, 10_000)).toBe(true);
    // The other console's store, as its process makes it (outcomes retried until they are durable).
    const other = new OutcomeRetryingStore(new AuditLog(getNodes(), path.join(dir, "other-console.jsonl"), 300), { everyMs: 200 });
    const entry: AuditEntry = { id: newAuditId(), at: Date.now(), actor: "other", role: "operator", action: "force-release", resource: "lock:stalled", token: null, holder: null, reason: "tried while two nodes stalled", outcome: "pending", nodes: [], ip: "127.0.0.1", userAgent: null };
    refusedId = entry.id;
    cluster.pause(1);
    cluster.pause(2);
    try {
      await expect(other.recordIntent(entry)).rejects.toBeInstanceOf(AuditUnavailableError);
    } finally {
      cluster.resume(1);
      cluster.resume(2);
    }
    // The stalled nodes run what was sent to them meanwhile: they hold the intent.
    await until("the intent on node-1 and node-2", async () => (await cluster.client(1).xlen("lockscope:audit")) > 0 && (await cluster.client(2).xlen("lockscope:audit")) > 0);
    await until("the other console's refused outcome durable", async () => (await other.retry()) === 0);
    await other.drain();
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads refused from any quorum of nodes, not pending", async () => {
    const outcomeOf = async () => {
      const res = await call(auditRoute.GET, "GET", "/api/audit?resource=lock:stalled", { token: VIEWER_TOKEN });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return (res.body as AuditPage).entries.map((e) => [e.id, e.outcome]);
    };
    expect(await outcomeOf()).toEqual([[refusedId, "refused"]]);
    cluster.pause(0);
    try {
      expect(await outcomeOf()).toEqual([[refusedId, "refused"]]);
    } finally {
      cluster.resume(0);
    }
  });
});
