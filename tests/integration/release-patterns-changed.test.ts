import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import type * as PatternsModule from "@/server/patterns";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";

/**
 * No key outside the lock patterns is ever deleted, whenever the patterns change: on another console sharing them
 * through the lock nodes (this console reads them every 2 s), or on this one while a release runs.
 */
describe("a force release of a key whose lock pattern was removed", () => {
  const CONFIGURED = ["lock:*", "orders:*"];
  let cluster: TestCluster;
  let nodes: Redis[];
  let release: typeof ReleaseModule;
  let audit: typeof AuditModule;
  let patterns: typeof PatternsModule;
  let otherConsole: PatternsModule.PatternStore;
  const auditor = { recordIntent: () => Promise.resolve(), recordOutcome: () => Promise.resolve() };
  const meta = { actor: "bob", role: "operator" as const, reason: "orders no longer locked here", ip: "127.0.0.1", userAgent: null };

  const postRelease = (resource: string, body: unknown) =>
    call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, { body, params: { resource } });
  const holdEverywhere = (resource: string, value: string) => Promise.all(nodes.map((n) => n.set(resource, value, "PX", 60_000)));
  const valuesOf = (resource: string) => Promise.all(nodes.map((n) => n.get(resource)));
  const auditEntries = async (resource: string) => {
    const res = await call(audit.GET, "GET", `/api/audit?resource=${encodeURIComponent(resource)}&limit=100`, { token: VIEWER_TOKEN });
    expect(res.status).toBe(200);
    return (res.body as { entries: Array<{ resource: string; outcome: string }> }).entries.filter((e) => e.resource === resource);
  };
  /** Runs `act` right after the next release's audit intent is durable, before any node is asked to release. */
  const afterNextIntent = async (act: () => Promise<unknown>) => {
    const { getAuditStore } = await import("@/server/audit/current");
    const store = getAuditStore();
    const recordIntent = store.recordIntent.bind(store);
    return vi.spyOn(store, "recordIntent").mockImplementationOnce(async (entry) => {
      await recordIntent(entry);
      await act();
    });
  };
  /** Puts the patterns back as configured, on the nodes and on this console. */
  const restore = async () => {
    await otherConsole.replace(CONFIGURED.map((glob) => ({ glob })), meta, auditor);
    await patterns.getPatternStore().refresh();
    expect(patterns.getPatternStore().current().patterns.map((p) => p.glob)).toEqual(CONFIGURED);
  };

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: CONFIGURED.join(","), AUDIT_FILE: path.join(mkdtempSync(path.join(os.tmpdir(), "lockscope-release-patterns-")), "audit.jsonl") } });
    nodes = cluster.clients();
    release = await import("@/app/api/locks/[resource]/release/route");
    audit = await import("@/app/api/audit/route");
    patterns = await import("@/server/patterns");
    const shared = await import("@/server/patterns-shared");
    const nodesModule = await import("@/server/nodes");
    const { whenReady } = await import("@/server/health");
    await Promise.all(nodesModule.getNodes().map((n) => whenReady(n.client, 5_000)));
    // This console shares its patterns through the nodes, as it does once started; its periodic read of them is
    // not running, as between two reads.
    const own = patterns.getPatternStore();
    own.shareVia(shared.nodesShare(own, nodesModule.getNodes, 500));
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), "lockscope-other-console-")), "patterns.json");
    otherConsole = new patterns.PatternStore(file, CONFIGURED);
    otherConsole.shareVia(shared.nodesShare(otherConsole, nodesModule.getNodes, 500));
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("refuses (404) a key whose pattern another console removed since this one last read the patterns, and deletes nothing", async () => {
    await holdEverywhere("orders:41", "holder-41");
    await otherConsole.replace([{ glob: "lock:*" }], meta, auditor);
    try {
      const res = await postRelease("orders:41", { reason: "stuck order", token: "holder-41" });
      expect(res.status, JSON.stringify(res.body)).toBe(404);
      expect((res.body as { error: { message: string } }).error.message).toContain("not a lock key under the lock patterns (lock:*)");
      expect(await valuesOf("orders:41")).toEqual(["holder-41", "holder-41", "holder-41"]);
    } finally {
      await restore();
    }
  });

  it("deletes nothing when another console removes the pattern while the release runs, and audits it failed, not released", async () => {
    await holdEverywhere("orders:42", "holder-42");
    const spy = await afterNextIntent(() => otherConsole.replace([{ glob: "lock:*" }], meta, auditor));
    try {
      const res = await postRelease("orders:42", { reason: "stuck order", token: "holder-42" });
      expect(res.status, JSON.stringify(res.body)).toBe(404);
      expect((res.body as { error: { message: string } }).error.message).toMatch(/no longer under the lock patterns \(lock:\*\).*nothing was deleted/);
      expect(await valuesOf("orders:42")).toEqual(["holder-42", "holder-42", "holder-42"]);
      const [entry] = await auditEntries("orders:42");
      expect(entry).toMatchObject({ outcome: "failed" });
    } finally {
      spy.mockRestore();
      await restore();
    }
  });

  it("deletes nothing when the pattern is removed on this console while the release runs", async () => {
    await holdEverywhere("orders:43", "holder-43");
    const spy = await afterNextIntent(() => patterns.getPatternStore().replace([{ glob: "lock:*" }], meta, auditor));
    try {
      const res = await postRelease("orders:43", { reason: "stuck order" });
      expect(res.status, JSON.stringify(res.body)).toBe(404);
      expect(await valuesOf("orders:43")).toEqual(["holder-43", "holder-43", "holder-43"]);
    } finally {
      spy.mockRestore();
      await restore();
    }
  });

  it("still releases a key under the patterns in force", async () => {
    await holdEverywhere("orders:44", "holder-44");
    const res = await postRelease("orders:44", { reason: "stuck order", token: "holder-44" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await valuesOf("orders:44")).toEqual([null, null, null]);
  });
});
