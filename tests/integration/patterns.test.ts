import path from "node:path";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as DiscoveryRoute from "@/app/api/discovery/route";
import type * as PatternsRoute from "@/app/api/patterns/route";
import type * as PatternsModule from "@/server/patterns";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, tearDownConsole, VIEWER_TOKEN } from "../support/console";
import { until } from "../support/wait";
import { RedissonWriter } from "../support/redisson";

/**
 * The live lock patterns (`GET`/`PUT /api/patterns`) and discovery's route, through the real route handlers:
 * a change applies at once, survives a restart of the store, is audited before it applies (and refused when
 * it cannot be), and bad input gets a clear 4xx.
 */
describe("lock patterns and discovery routes", () => {
  let cluster: TestCluster;
  let patterns: typeof PatternsRoute;
  let discovery: typeof DiscoveryRoute;
  let store: typeof PatternsModule;
  const audited: Array<{ kind: "intent" | "outcome"; value: unknown }> = [];
  let auditFails = false;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1, env: { LOCK_PATTERNS: "lock:*,locks:*" } });
    store = await import("@/server/patterns");
    patterns = await import("@/app/api/patterns/route");
    discovery = await import("@/app/api/discovery/route");
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  const auditor = {
    recordIntent: (change: unknown) => {
      if (auditFails) return Promise.reject(new Error("audit stream unreachable"));
      audited.push({ kind: "intent", value: change });
      return Promise.resolve();
    },
    recordOutcome: (id: string, outcome: string) => {
      audited.push({ kind: "outcome", value: { id, outcome } });
      return Promise.resolve();
    },
  };
  const body = (globs: Array<{ glob: string; scope?: string }>, reason = "show the billing locks") => ({ patterns: globs, reason });

  it("refuses a change while nothing can audit it", async () => {
    const res = await call(patterns.PUT, "PUT", "/api/patterns", { body: body([{ glob: "lock:*" }]) });
    expect(res.status).toBe(503);
    expect((await call(patterns.GET, "GET", "/api/patterns", { token: VIEWER_TOKEN })).body).toMatchObject({ patterns: [{ glob: "lock:*" }, { glob: "locks:*" }], source: "config", revision: "config" });
  });

  it("applies a change at once, audited, and keeps it across a restart", async () => {
    store.setPatternsAuditor(auditor);
    const seen: unknown[] = [];
    store.getPatternStore().onChange((state) => seen.push(state.patterns));
    const next = [{ glob: "lock:*" }, { glob: "billing:*", scope: "single" }];
    const res = await call(patterns.PUT, "PUT", "/api/patterns", { body: body(next) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ patterns: next, source: "console", updatedBy: "operator" });
    expect(seen).toEqual([next]);
    const auditId = (res.body as { auditId: string }).auditId;
    expect(audited).toHaveLength(2);
    expect(audited[0]).toMatchObject({
      kind: "intent",
      value: { id: auditId, action: "patterns-changed", previous: [{ glob: "lock:*" }, { glob: "locks:*" }], patterns: next, reason: "show the billing locks", actor: "operator" },
    });
    expect(audited[1]).toEqual({ kind: "outcome", value: { id: auditId, outcome: "applied" } });
    expect((await call(patterns.GET, "GET", "/api/patterns", { token: VIEWER_TOKEN })).body).toMatchObject({ patterns: next });
    expect(store.getPatternStore().declaredScope("billing:invoice-1")).toBe("single");
    // A key under no pattern: the lock's page and its history both name the patterns in force now.
    for (const route of [await import("@/app/api/locks/[resource]/route"), await import("@/app/api/locks/[resource]/history/route")]) {
      const res = await call(route.GET, "GET", "/api/locks/user%3A1", { token: VIEWER_TOKEN, params: { resource: "user:1" } });
      expect(res.status).toBe(404);
      expect((res.body as { error: { message: string } }).error.message).toContain("lock patterns (lock:*, billing:*)");
    }

    // A new process reads the same file.
    const file = path.join(process.env.LOCKSCOPE_DATA_DIR ?? "", "patterns.json");
    expect(JSON.parse(readFileSync(file, "utf8"))).toMatchObject({ patterns: next, basedOn: ["lock:*", "locks:*"] });
    expect(new store.PatternStore(file, ["lock:*", "locks:*"]).current()).toMatchObject({ patterns: next, source: "console" });
    // Unless LOCK_PATTERNS itself was changed since: then the environment wins.
    expect(new store.PatternStore(file, ["other:*"]).current()).toMatchObject({ patterns: [{ glob: "other:*" }], source: "config" });
  });

  it("changes nothing when the audit log cannot record the change", async () => {
    auditFails = true;
    try {
      const res = await call(patterns.PUT, "PUT", "/api/patterns", { body: body([{ glob: "x:*" }]) });
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ error: { code: "unavailable" } });
    } finally {
      auditFails = false;
    }
    expect(store.getPatternStore().current().patterns.map((p) => p.glob)).toEqual(["lock:*", "billing:*"]);
  });

  it("refuses a change made on a list that changed since it was read (409), and takes one made on the list in force", async () => {
    const read = (await call(patterns.GET, "GET", "/api/patterns", { token: VIEWER_TOKEN })).body as { revision: string; patterns: unknown[] };
    expect(read.revision).toMatch(/^\d{13}-[0-9a-f]+$/);
    const list = [{ glob: "lock:*" }, { glob: "billing:*", scope: "single" }];
    // Read before the last change: the list was LOCK_PATTERNS then.
    const stale = await call(patterns.PUT, "PUT", "/api/patterns", { body: { ...body([{ glob: "lock:*" }]), revision: "config" } });
    expect(stale.status).toBe(409);
    expect(stale.body).toMatchObject({ error: { code: "conflict", details: { revision: read.revision } } });
    expect((stale.body as { error: { message: string } }).error.message).toMatch(/were changed by operator at .* since you read them \(now: lock:\*, billing:\*\); nothing changed/);
    expect(store.getPatternStore().current()).toMatchObject({ patterns: list, revision: read.revision });

    const fresh = await call(patterns.PUT, "PUT", "/api/patterns", { body: { ...body(list), revision: read.revision } });
    expect(fresh.status).toBe(200);
    expect((fresh.body as { revision: string }).revision).not.toBe(read.revision);
  });

  it("answers bad input with a clear error and lets only operators change patterns", async () => {
    const cases: Array<[unknown, number, RegExp]> = [
      [{ patterns: [], reason: "none at all" }, 422, /at least one pattern/],
      [body([{ glob: "a b" }]), 422, /no spaces/],
      [body([{ glob: "lock:*" }, { glob: "lock:*" }]), 422, /listed twice/],
      [body([{ glob: "lockscope:*" }]), 422, /audit log/],
      [body([{ glob: "*" }]), 422, /audit log/],
      [body([{ glob: "lock:*", scope: "sometimes" }]), 422, /scope/],
      // Read by Redis otherwise than as written: a bracket without its pair, an empty class.
      [body([{ glob: "zz:[a-" }]), 422, /`zz:\[a-` has a `\[` without its `\]`, which Redis reads as a class running to the end/],
      [body([{ glob: "lock:[]x]" }]), 422, /class of nothing/],
      [{ patterns: [{ glob: "lock:*" }], reason: "x" }, 422, /reason/],
      // Control characters, in a reason (the audit log shows it) or a glob.
      [{ patterns: [{ glob: "lock:*" }], reason: "bad\u0007reason" }, 422, /reason must not contain control characters/],
      [body([{ glob: "lock:\u0000" }]), 422, /no control characters/],
      // The console's shared state, and keys kept beside locks only: never locks, so the list would show nothing.
      [body([{ glob: "lockscope:c*" }]), 422, /matches `lockscope:consoles`, one of the console's own keys/],
      [body([{ glob: "lockscope:revoked-session:*" }]), 422, /one of the console's own keys/],
      [body([{ glob: "fence:*" }]), 422, /matches only keys under `fence:\*`.*never locks: it would show nothing/],
      [body([{ glob: "redisson_lock_queue:{orders}" }]), 422, /never locks/],
      // A revision is what GET gave.
      [{ ...body([{ glob: "lock:*" }]), revision: "bogus" }, 422, /a revision is what GET \/api\/patterns gave/],
    ];
    for (const [input, status, message] of cases) {
      const res = await call(patterns.PUT, "PUT", "/api/patterns", { body: input });
      expect([JSON.stringify(input), res.status]).toEqual([JSON.stringify(input), status]);
      expect((res.body as { error: { message: string } }).error.message).toMatch(message);
    }
    expect((await call(patterns.PUT, "PUT", "/api/patterns", { token: VIEWER_TOKEN, body: body([{ glob: "lock:*" }]) })).status).toBe(403);
    expect((await call(patterns.GET, "GET", "/api/patterns", { token: null })).status).toBe(401);
  });

  it("serves discovery's findings outside the patterns", async () => {
    await new RedissonWriter(cluster.client(0)).lock("orders:lock-1", 1);
    await new RedissonWriter(cluster.client(0)).lock("billing:lock-2", 1);
    const res = await until("discovery completes", async () => {
      const r = await call(discovery.GET, "GET", "/api/discovery", { token: VIEWER_TOKEN });
      return (r.body as { complete?: boolean }).complete ? r : null;
    });
    expect(res.status).toBe(200);
    // billing:* is under the patterns now: only the other family is suggested.
    expect(res.body).toMatchObject({ complete: true, candidates: [{ pattern: "orders:*", format: "redisson", keys: 1, examples: ["orders:lock-1"] }] });
    // It takes no query: a parameter given anyway is said back, not ignored.
    const asked = await call(discovery.GET, "GET", "/api/discovery?pattern=orders:*", { token: VIEWER_TOKEN });
    expect(asked.status).toBe(400);
    expect(asked.body).toEqual({ error: { code: "bad_request", message: "/api/discovery takes no query parameters (got `pattern`)." } });
  });
});
