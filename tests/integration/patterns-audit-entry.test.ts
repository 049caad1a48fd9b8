import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as AuditRoute from "@/app/api/audit/route";
import type * as PatternsRoute from "@/app/api/patterns/route";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import { until } from "../support/wait";

/**
 * A lock-pattern change's audit entry names the whole new list (`resource`) and the whole list it replaced
 * (`reason`, after the operator's words), however long the lists are: it is how an operator finds out later
 * which pattern a change took away.
 */
describe("the audit entry of a lock-pattern change", () => {
  let cluster: TestCluster;
  let patterns: typeof PatternsRoute;
  let audit: typeof AuditRoute;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1, env: { LOCK_PATTERNS: "lock:*" } });
    patterns = await import("@/app/api/patterns/route");
    audit = await import("@/app/api/audit/route");
    (await import("@/server/patterns-audit")).registerPatternsAuditor();
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("names every pattern of a long list before and after the change", async () => {
    // 32 patterns of an organisation's services (the most a list holds), then the same less the last one.
    const long = Array.from({ length: 32 }, (_, i) => ({ glob: `service-${String(i).padStart(2, "0")}:payments-and-billing-reconciliation:lock:*` }));
    const first = await call(patterns.PUT, "PUT", "/api/patterns", { body: { patterns: long, reason: "every service's locks" } });
    expect(first.status).toBe(200);
    const shorter = long.slice(0, 31);
    const reason = "service-31 retired: its locks are gone";
    const second = await call(patterns.PUT, "PUT", "/api/patterns", { body: { patterns: shorter, reason } });
    expect(second.status).toBe(200);
    const auditId = (second.body as { auditId: string }).auditId;

    const entry = await until("the change in the audit log", async () => {
      const res = await call(audit.GET, "GET", "/api/audit", { token: VIEWER_TOKEN });
      return (res.body as { entries: Array<{ id: string; resource: string; reason: string }> }).entries.find((e) => e.id === auditId) ?? null;
    });
    expect(entry.resource).toBe(`patterns: ${shorter.map((p) => p.glob).join(", ")}`);
    expect(entry.reason).toBe(`${reason} (was: ${long.map((p) => p.glob).join(", ")})`);
  });
});
