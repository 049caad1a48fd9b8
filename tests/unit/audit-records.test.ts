import { describe, expect, it } from "vitest";
import { AuditMerger, auditCsv, auditIdTime, matchesFilters, newAuditId, parseAuditRecord, type AuditRecord } from "@/server/audit/records";
import type { AuditEntry } from "@/server/audit/types";

const entry = (over: Partial<AuditEntry> = {}): AuditEntry => ({
  id: newAuditId(1_700_000_000_000),
  at: 1_700_000_000_000,
  actor: "alice",
  role: "operator",
  action: "force-release",
  resource: "lock:orders/42",
  token: "lk1:abc",
  holder: { label: "billing", host: "web-3", pid: 4242, fence: "17" },
  reason: "stuck after deploy",
  outcome: "pending",
  nodes: [{ id: "node-0", result: "pending" }],
  ip: "10.0.0.5",
  userAgent: "curl/8",
  ...over,
});

describe("audit records", () => {
  it("makes ids that sort by time as strings and never repeat", () => {
    const ids = Array.from({ length: 1000 }, () => newAuditId(1_700_000_000_000));
    expect(new Set(ids).size).toBe(1000);
    expect(newAuditId(999) < newAuditId(1000)).toBe(true);
    expect(newAuditId(9_999_999_999) < newAuditId(10_000_000_000)).toBe(true);
    expect(auditIdTime(newAuditId(1_234_567))).toBe(1_234_567);
  });

  it("merges an intent with its outcome, whichever arrives first, and de-duplicates copies from several nodes", () => {
    const e = entry();
    const intent: AuditRecord = { v: 1, kind: "intent", id: e.id, entry: e };
    const outcome: AuditRecord = { v: 1, kind: "outcome", id: e.id, outcome: "released", nodes: [{ id: "node-0", result: "deleted" }], finishedAt: e.at + 5 };
    const merger = new AuditMerger();
    for (const r of [outcome, intent, intent, outcome]) merger.add(r);
    expect(merger.entries()).toEqual([{ ...e, outcome: "released", nodes: [{ id: "node-0", result: "deleted" }], finishedAt: e.at + 5 }]);
  });

  it("keeps an intent without outcome as pending and drops an outcome without intent", () => {
    const merger = new AuditMerger();
    const e = entry();
    merger.add({ v: 1, kind: "intent", id: e.id, entry: e });
    merger.add({ v: 1, kind: "outcome", id: newAuditId(), outcome: "released", nodes: [], finishedAt: 1 });
    expect(merger.entries().map((x) => x.outcome)).toEqual(["pending"]);
  });

  it("orders entries newest first", () => {
    const merger = new AuditMerger();
    for (const at of [3, 1, 2]) {
      const e = entry({ id: newAuditId(at * 1000), at: at * 1000 });
      merger.add({ v: 1, kind: "intent", id: e.id, entry: e });
    }
    expect(merger.entries().map((e) => e.at)).toEqual([3000, 2000, 1000]);
  });

  it("refuses malformed records (anyone who can write to a node can write to the stream)", () => {
    const e = entry();
    expect(parseAuditRecord(JSON.stringify({ v: 1, kind: "intent", id: e.id, entry: e }))).not.toBeNull();
    for (const bad of [
      "not json",
      "null",
      "[]",
      JSON.stringify({ v: 2, kind: "intent", id: e.id, entry: e }),
      JSON.stringify({ v: 1, kind: "intent", id: "../../etc", entry: e }),
      JSON.stringify({ v: 1, kind: "intent", id: e.id, entry: { ...e, id: newAuditId() } }),
      JSON.stringify({ v: 1, kind: "intent", id: e.id, entry: { ...e, resource: 5 } }),
      JSON.stringify({ v: 1, kind: "outcome", id: e.id, outcome: "deleted-everything", nodes: [], finishedAt: 1 }),
      JSON.stringify({ v: 1, kind: "outcome", id: e.id, outcome: "released", nodes: "all", finishedAt: 1 }),
      JSON.stringify({ v: 1, kind: "other", id: e.id }),
    ]) {
      expect(parseAuditRecord(bad), bad.slice(0, 60)).toBeNull();
    }
  });

  it("filters by resource and actor substrings (case-insensitive) and a half-open time range", () => {
    const e = entry({ at: 5000 });
    expect(matchesFilters(e, {})).toBe(true);
    expect(matchesFilters(e, { resource: "ORDERS" })).toBe(true);
    expect(matchesFilters(e, { resource: "payments" })).toBe(false);
    expect(matchesFilters(e, { actor: "ALI" })).toBe(true);
    expect(matchesFilters(e, { actor: "bob" })).toBe(false);
    expect(matchesFilters(e, { from: 5000, to: 5001 })).toBe(true);
    expect(matchesFilters(e, { to: 5000 })).toBe(false);
    expect(matchesFilters(e, { from: 5001 })).toBe(false);
  });

  it("filters by the deployment an entry names, exactly, leaving out entries that name none", () => {
    expect(matchesFilters(entry({ deployment: "orders" }), { deployment: "orders" })).toBe(true);
    expect(matchesFilters(entry({ deployment: "orders-eu" }), { deployment: "orders" })).toBe(false);
    expect(matchesFilters(entry({ deployment: "cache" }), { deployment: "orders" })).toBe(false);
    // A lock-pattern change (every deployment's) and a release recorded before deployments were named.
    expect(matchesFilters(entry({ action: "patterns-changed" }), { deployment: "orders" })).toBe(false);
    expect(matchesFilters(entry(), { deployment: "orders" })).toBe(false);
    expect(matchesFilters(entry(), {})).toBe(true);
  });

  it("writes CSV a spreadsheet opens safely", () => {
    // The reason cell sits between the token and the outcome.
    const reasonCell = (reason: string) => auditCsv([entry({ reason })]).split("\r\n")[1]!.split(",lk1:abc,")[1]!.split(",pending,")[0];
    expect(reasonCell("plain")).toBe("plain");
    expect(reasonCell('say "hi", then go')).toBe('"say ""hi"", then go"');
    expect(reasonCell("line\nbreak")).toBe('"line\nbreak"');
    expect(reasonCell("it's stuck")).toBe(`"it's stuck"`);
    expect(reasonCell("=1+1")).toBe(`"'=1+1"`);
    expect(reasonCell("+cmd")).toBe(`"'+cmd"`);
    expect(reasonCell("-2")).toBe(`"'-2"`);
    expect(reasonCell("@SUM(A1)")).toBe(`"'@SUM(A1)"`);
    expect(reasonCell("\tcmd")).toBe(`"'\tcmd"`);
    expect(auditCsv([])).toBe("id,time,actor,role,action,resource,deployment,holder,fence,token,reason,outcome,nodes,ip,userAgent\r\n");
    const csv = auditCsv([entry({ outcome: "released", deployment: "orders", nodes: [{ id: "node-0", result: "deleted" }, { id: "node-1", result: "error", error: "timeout" }] })]);
    const [header, row] = csv.trim().split("\r\n");
    expect(header).toBe("id,time,actor,role,action,resource,deployment,holder,fence,token,reason,outcome,nodes,ip,userAgent");
    expect(row).toContain(",2023-11-14T22:13:20.000Z,alice,operator,force-release,lock:orders/42,orders,billing @ web-3:4242,17,lk1:abc,stuck after deploy,released,node-0=deleted node-1=error,10.0.0.5,curl/8");
  });
});
