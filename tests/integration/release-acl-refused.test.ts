import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import { README_CONSOLE_ACL } from "../support/acl";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import type { TestCluster } from "../support/redis";

const PASSWORD = "console-password-release-0123456789";
const ORDERS_ACL = "~orders:* &__keyspace@0__:orders:*";

interface AuditEntryBody {
  resource: string;
  outcome: string;
  nodes: Array<{ id: string; result: string; error?: string }>;
}

/**
 * A force release of a lock under a pattern that one lock node's ACL does not let the console's Redis user touch
 * (the node's user lacks `~orders:*`): that node's copy cannot be deleted, and neither the answer nor the audit
 * entry may say otherwise, nor blame a timeout or the credentials.
 */
describe("a force release on a node whose ACL refuses the lock's key", () => {
  let cluster: TestCluster;
  let nodes: Redis[];
  let release: typeof ReleaseModule;
  let audit: typeof AuditModule;
  const auditDir = mkdtempSync(path.join(os.tmpdir(), "lockscope-release-acl-"));

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { AUDIT_FILE: path.join(auditDir, "audit.jsonl"), LOCK_PATTERNS: "lock:*,orders:*" } });
    nodes = cluster.clients();
    // Nodes 0 and 1 let the console's user have the order locks; node 2's user was set up before they existed.
    for (const [i, c] of nodes.entries()) await c.call("ACL", "SETUSER", "lockscope", ...`>${PASSWORD} ${README_CONSOLE_ACL}${i < 2 ? ` ${ORDERS_ACL}` : ""}`.split(" "));
    process.env.REDIS_URLS = cluster.ports.map((port) => `redis://lockscope:${PASSWORD}@127.0.0.1:${port}`).join(",");
    release = await import("@/app/api/locks/[resource]/release/route");
    audit = await import("@/app/api/audit/route");
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
    rmSync(auditDir, { recursive: true, force: true });
  });

  const forceRelease = (resource: string) => call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, { body: { reason: "stuck order lock" }, params: { resource } });
  const auditOf = async (resource: string) => {
    const res = await call(audit.GET, "GET", `/api/audit?resource=${encodeURIComponent(resource)}&limit=10`, { token: VIEWER_TOKEN });
    return (res.body as { entries: AuditEntryBody[] }).entries.filter((e) => e.resource === resource);
  };

  it("a lock held on that node only: a 422 naming the node and the ACL rule it needs, nothing deleted", async () => {
    await nodes[2]!.set("orders:solo", "holder-solo", "PX", 60_000);
    const res = await forceRelease("orders:solo");
    expect(res.status).toBe(422);
    expect(res.body).toEqual({
      error: {
        code: "unprocessable",
        message:
          "node-2 refuses the console's Redis user the key `orders:solo` (the user needs `~orders:*` there), so it may hold it, and no node the console may read does: nothing was touched. Add the rule to the console's Redis user on node-2, then try again.",
        details: { refused: ["node-2"], rule: "~orders:*" },
      },
    });
    expect(await nodes[2]!.get("orders:solo")).toBe("holder-solo");
    // Nothing was asked of the nodes, so nothing was audited as released.
    expect((await auditOf("orders:solo")).filter((e) => e.outcome === "released")).toEqual([]);
  });

  it("a Redlock on every node: released on the two that allow it, and the third named as refusing it", async () => {
    await Promise.all(nodes.map((c) => c.set("orders:quorum", "holder-quorum", "PX", 60_000)));
    const res = await forceRelease("orders:quorum");
    // Deleted on two nodes of three: no quorum holds it any more, the lock is over; node 2 keeps its copy, and says why.
    const refused = { id: "node-2", result: "error", error: "its ACL does not let the console's Redis user at this key (the user needs `~orders:*` there): nothing was deleted on this node" };
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ outcome: "released", nodes: [{ id: "node-0", result: "deleted" }, { id: "node-1", result: "deleted" }, refused] });
    expect(await Promise.all(nodes.map((c) => c.get("orders:quorum")))).toEqual([null, null, "holder-quorum"]);
    const [entry] = await auditOf("orders:quorum");
    expect(entry).toMatchObject({ outcome: "released", nodes: [{ id: "node-0", result: "deleted" }, { id: "node-1", result: "deleted" }, refused] });
  });

  it("a Redlock the ACL refuses on two nodes of three: partial, not released", async () => {
    await nodes[1]!.call("ACL", "SETUSER", "lockscope", "resetkeys", ...README_CONSOLE_ACL.split(" ").filter((rule) => rule.startsWith("~")));
    await Promise.all(nodes.map((c) => c.set("orders:two-refuse", "holder-two", "PX", 60_000)));
    const res = await forceRelease("orders:two-refuse");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ outcome: "partial", nodes: [{ id: "node-0", result: "deleted" }, { id: "node-1", result: "error" }, { id: "node-2", result: "error" }] });
    const [entry] = await auditOf("orders:two-refuse");
    expect(entry?.outcome).toBe("partial");
    expect(entry?.nodes.map((n) => n.error ?? null)).toEqual([
      null,
      "its ACL does not let the console's Redis user at this key (the user needs `~orders:*` there): nothing was deleted on this node",
      "its ACL does not let the console's Redis user at this key (the user needs `~orders:*` there): nothing was deleted on this node",
    ]);
  });
});
