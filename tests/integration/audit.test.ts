import { spawnSync } from "node:child_process";
import { appendFileSync, closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type Redis from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as AuditModule from "@/app/api/audit/route";
import type * as ExportModule from "@/app/api/audit/export/route";
import type * as ReleaseModule from "@/app/api/locks/[resource]/release/route";
import type * as LogModule from "@/server/audit/log";
import type { OutcomeRetryingStore } from "@/server/audit/outcome-retry";
import type { AuditEntry } from "@/server/audit/types";
import { newAuditId, parseAuditLines } from "@/server/audit/records";
import type { TestCluster } from "../support/redis";
import { call, setUpConsole, VIEWER_TOKEN, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

interface Page {
  entries: AuditEntry[];
  next: string | null;
  source: "stream" | "file";
}

function newEntry(over: Partial<AuditEntry> = {}): AuditEntry {
  return {
    id: newAuditId(),
    at: Date.now(),
    actor: "tester",
    role: "operator",
    action: "force-release",
    resource: "lock:disk/1",
    token: null,
    holder: null,
    reason: "disk test",
    outcome: "pending",
    nodes: [],
    ip: "127.0.0.1",
    userAgent: null,
    ...over,
  };
}

/** Fills a filesystem to the last byte with one file, so the next write that needs a new block fails. */
function fill(file: string): void {
  const fd = openSync(file, "w");
  const chunk = Buffer.alloc(4096, 0x78);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
  } finally {
    closeSync(fd);
  }
}

describe("audit log", () => {
  let cluster: TestCluster;
  let nodes: Redis[];
  let auditRoute: typeof AuditModule;
  let exportRoute: typeof ExportModule;
  let release: typeof ReleaseModule;
  let logModule: typeof LogModule;
  let dir: string;
  const released: string[] = [];

  const getPage = async (query: string, token: string | null = VIEWER_TOKEN) => {
    const res = await call(auditRoute.GET, "GET", `/api/audit${query}`, { token });
    return { status: res.status, body: res.body as Page & { error?: { message: string } } };
  };
  const releaseAs = async (resource: string, actor: string, reason: string) => {
    await Promise.all(nodes.map((n) => n.set(resource, `value-of-${resource}`, "PX", 30_000)));
    const res = await call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
      params: { resource },
      body: { reason },
      headers: { "x-lockscope-actor": actor },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    released.push((res.body as { auditId: string }).auditId);
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "lockscope-audit-"));
    cluster = await setUpConsole({ nodes: 3, env: { AUDIT_FILE: path.join(dir, "audit.jsonl") } });
    nodes = cluster.clients();
    auditRoute = await import("@/app/api/audit/route");
    exportRoute = await import("@/app/api/audit/export/route");
    release = await import("@/app/api/locks/[resource]/release/route");
    logModule = await import("@/server/audit/log");
    await releaseAs("lock:orders/1", "alice", "stuck after deploy");
    await releaseAs("lock:orders/2", "bob", "=HYPERLINK(\"http://evil\")");
    await releaseAs("locks:billing", "alice", "billing cron hung");
    await releaseAs("lock:orders/3", "carol", "holder OOM-killed");
    await releaseAs("lock:inventory", "bob", "manual cleanup, ticket #81");
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
    rmSync(dir, { recursive: true, force: true });
  });

  it("lists entries newest first and pages through them with `next`", async () => {
    const seen: string[] = [];
    let query = "?limit=2";
    for (;;) {
      const { status, body } = await getPage(query);
      expect(status).toBe(200);
      expect(body.source).toBe("stream");
      expect(body.entries.length).toBeLessThanOrEqual(2);
      seen.push(...body.entries.map((e) => e.id));
      if (!body.next) break;
      query = `?limit=2&before=${body.next}`;
    }
    expect(seen).toEqual([...released].reverse());
  });

  it("filters by resource, actor and time range", async () => {
    const byResource = await getPage("?resource=ORDERS");
    expect(byResource.body.entries.map((e) => e.resource)).toEqual(["lock:orders/3", "lock:orders/2", "lock:orders/1"]);
    const byActor = await getPage("?actor=bob");
    expect(byActor.body.entries.map((e) => e.resource)).toEqual(["lock:inventory", "lock:orders/2"]);
    const both = await getPage("?actor=alice&resource=billing");
    expect(both.body.entries.map((e) => e.reason)).toEqual(["billing cron hung"]);

    const third = Number(released[2]!.slice(0, 13));
    const fromThird = await getPage(`?from=${third}`);
    expect(fromThird.body.entries.every((e) => e.at >= third)).toBe(true);
    expect(fromThird.body.entries.map((e) => e.id)).toContain(released[2]);
    const untilThird = await getPage(`?to=${new Date(third).toISOString()}`);
    expect(untilThird.body.entries.every((e) => e.at < third)).toBe(true);
    const future = await getPage(`?from=${Date.now() + 3_600_000}`);
    expect(future.body.entries).toEqual([]);
  });

  it("shows each entry's per-node outcome", async () => {
    const { body } = await getPage("?resource=lock:inventory");
    expect(body.entries[0]).toMatchObject({
      actor: "bob",
      outcome: "released",
      nodes: [
        { id: "node-0", result: "deleted" },
        { id: "node-1", result: "deleted" },
        { id: "node-2", result: "deleted" },
      ],
    });
  });

  it("exports CSV (formula cells neutralised) and JSON", async () => {
    const csv = await call(exportRoute.GET, "GET", "/api/audit/export?format=csv", { token: VIEWER_TOKEN });
    expect(csv.status).toBe(200);
    expect(csv.headers.get("content-type")).toMatch(/text\/csv/);
    expect(csv.headers.get("content-disposition")).toMatch(/attachment; filename="lockscope-audit-.*\.csv"/);
    const lines = (csv.body as string).trim().split("\r\n");
    expect(lines[0]).toBe("id,time,actor,role,action,resource,deployment,holder,fence,token,reason,outcome,nodes,ip,userAgent");
    expect(lines).toHaveLength(released.length + 1);
    // Each release names the deployment it acted on, beside its resource (one deployment: `default`).
    expect(lines.find((l) => l.includes(",lock:inventory,"))).toContain(",lock:inventory,default,");
    expect(csv.body as string).toContain(`"'=HYPERLINK(""http://evil"")"`);
    expect(csv.body as string).toContain("node-0=deleted node-1=deleted node-2=deleted");

    const json = await call(exportRoute.GET, "GET", "/api/audit/export?format=json&actor=alice", { token: VIEWER_TOKEN });
    expect(json.status).toBe(200);
    const body = json.body as { entries: AuditEntry[]; truncated: boolean };
    expect(body.truncated).toBe(false);
    expect(body.entries.map((e) => e.reason)).toEqual(["billing cron hung", "stuck after deploy"]);
  });

  it("exports from a `before` cursor, as the list pages, and gives the cursor to go on from where an export was cut", async () => {
    // All of it: nothing left, no cursor.
    const whole = await call(exportRoute.GET, "GET", "/api/audit/export?format=json", { token: VIEWER_TOKEN });
    expect(whole.status, JSON.stringify(whole.body)).toBe(200);
    expect(whole.body).toMatchObject({ truncated: false, next: null });
    expect(whole.headers.get("x-audit-next")).toBeNull();
    // From the third release back: the two before it, as the list gives them from the same cursor.
    const older = await call(exportRoute.GET, "GET", `/api/audit/export?format=json&before=${released[2]}`, { token: VIEWER_TOKEN });
    expect(older.status, JSON.stringify(older.body)).toBe(200);
    expect((older.body as { entries: AuditEntry[] }).entries.map((e) => e.id)).toEqual([released[1], released[0]]);
    expect((await getPage(`?before=${released[2]}`)).body.entries.map((e) => e.id)).toEqual([released[1], released[0]]);
    const csv = await call(exportRoute.GET, "GET", `/api/audit/export?format=csv&before=${released[2]}&actor=bob`, { token: VIEWER_TOKEN });
    expect(csv.status).toBe(200);
    expect((csv.body as string).trim().split("\r\n").slice(1).map((l) => l.split(",")[0])).toEqual([released[1]]);
    // A cursor that is not an entry id: 400 naming it.
    const bad = await call(exportRoute.GET, "GET", "/api/audit/export?format=csv&before=yesterday", { token: VIEWER_TOKEN });
    expect(bad.status).toBe(400);
    expect((bad.body as { error: { message: string } }).error.message).toMatch(/`before` must be an entry id/);
  });

  it("needs a viewer to read, and refuses bad queries with a 400 that names the problem", async () => {
    expect((await getPage("", null)).status).toBe(401);
    const cases: Array<[string, RegExp]> = [
      ["?limit=0", /at least 1/],
      ["?limit=501", /at most 500/],
      ["?limit=ten", /whole number/],
      ["?before=yesterday", /entry id/],
      ["?from=last-week", /epoch milliseconds, an ISO date/],
      // What Date.parse would read anyway: text after the date, a time in the server's own zone.
      ["?from=2025-01-01%20(hello%20world)", /epoch milliseconds, an ISO date/],
      ["?to=2025-01-01%20PST", /epoch milliseconds, an ISO date/],
      ["?from=2025-01-01T00:00:00", /with Z or an offset/],
      // Said once, not "Invalid query: query: …".
      ["?from=2000&to=1000", /^Invalid query: `from` must be before `to`\.$/],
      // Not rolled over into the next month, as Date.parse would (2 March).
      ["?from=2025-02-30", /`from` names a day that does not exist \(2025-02-30\)/],
      ["?to=2025-04-31T00:00:00Z", /`to` names a day that does not exist/],
      ["?page=2", /^Invalid query: unknown field\(s\) `page`\.$/],
      // Names an object has built in are parameters like any other (not "given more than once").
      ["?constructor=1", /unknown field.*constructor/],
      ["?toString=1", /unknown field.*toString/],
      ["?__proto__=1", /unknown field.*__proto__/],
      ["?limit=1&limit=2", /more than once/],
      [`?resource=${"x".repeat(1100)}`, /at most 1024/],
    ];
    for (const [query, message] of cases) {
      const { status, body } = await getPage(query);
      expect(status, query).toBe(400);
      expect(body.error?.message, query).toMatch(message);
    }
    const exportBad = await call(exportRoute.GET, "GET", "/api/audit/export?format=xml", { token: VIEWER_TOKEN });
    expect(exportBad.status).toBe(400);
  });

  it("reads this console's file when no node answers", async () => {
    for (let i = 0; i < 3; i++) cluster.pause(i);
    try {
      const { status, body } = await getPage("?limit=100");
      expect(status).toBe(200);
      expect(body.source).toBe("file");
      expect(body.entries.map((e) => e.id)).toEqual([...released].reverse());
      expect(body.entries.every((e) => e.outcome === "released")).toBe(true);
    } finally {
      for (let i = 0; i < 3; i++) cluster.resume(i);
    }
  });

  it("keeps what the nodes lost: a stream wiped by a node restart without persistence is filled in from the file", async () => {
    await Promise.all(nodes.map((n) => n.del("lockscope:audit")));
    const { status, body } = await getPage("?limit=100");
    expect(status).toBe(200);
    expect(body.source).toBe("stream");
    expect(body.entries.map((e) => e.id)).toEqual([...released].reverse());
    expect(body.entries.every((e) => e.outcome === "released")).toBe(true);
  });

  it("stays complete when two console instances write at once, across many pages of stream", async () => {
    const { getNodes } = await import("@/server/nodes");
    const instanceA = new logModule.AuditLog(getNodes(), path.join(dir, "a.jsonl"), 200);
    const instanceB = new logModule.AuditLog(getNodes(), path.join(dir, "b.jsonl"), 200);
    const intent = (n: number): AuditEntry => newEntry({ actor: `bulk-${n % 2 === 0 ? "a" : "b"}`, resource: `lock:bulk/${n}`, reason: "bulk test" });
    // 2 x 160 releases, intents and outcomes interleaved: 640 stream records, more than one read chunk.
    const ids = new Set<string>();
    await Promise.all(
      [instanceA, instanceB].map(async (log, k) => {
        for (let i = 0; i < 160; i++) {
          const entry = intent(i * 2 + k);
          ids.add(entry.id);
          await log.recordIntent(entry);
          if (i % 10 !== 0) await log.recordOutcome(entry.id, "released", [{ id: "node-0", result: "deleted" }], Date.now());
        }
      }),
    );
    expect(ids.size).toBe(320);
    const seen: AuditEntry[] = [];
    let query = "?limit=100&resource=lock:bulk/";
    for (;;) {
      const { body } = await getPage(query);
      seen.push(...body.entries);
      if (!body.next) break;
      query = `?limit=100&resource=lock:bulk/&before=${body.next}`;
    }
    expect(seen).toHaveLength(320);
    expect(new Set(seen.map((e) => e.id))).toEqual(ids);
    const sorted = [...seen].sort((a, b) => (a.id < b.id ? 1 : -1));
    expect(seen.map((e) => e.id)).toEqual(sorted.map((e) => e.id));
    expect(seen.filter((e) => e.outcome === "pending")).toHaveLength(32);
  });
  it("records two operators releasing the same lock at once as one release, and never leaves the other pending", async () => {
    const resource = "lock:raced";
    await Promise.all(nodes.map((n) => n.set(resource, "raced-value", "PX", 30_000)));
    const send = (actor: string) =>
      call(release.POST, "POST", `/api/locks/${encodeURIComponent(resource)}/release`, {
        params: { resource },
        body: { reason: `race by ${actor}`, token: "raced-value" },
        headers: { "x-lockscope-actor": actor },
      });
    const answers = await Promise.all([send("dora"), send("emil")]);
    const statuses = answers.map((a) => a.status).sort();
    // One deletes it; the other finds it gone, before its intent (404, nothing audited) or after (404 or 409, audited).
    expect(statuses[0]).toBe(200);
    expect([404, 409]).toContain(statuses[1]);
    expect(await Promise.all(nodes.map((n) => n.exists(resource)))).toEqual([0, 0, 0]);
    const { body } = await getPage(`?resource=${encodeURIComponent(resource)}`);
    expect(body.entries.filter((e) => e.outcome === "released")).toHaveLength(1);
    expect(body.entries.every((e) => e.outcome !== "pending")).toBe(true);
    expect(new Set(body.entries.map((e) => e.id)).size).toBe(body.entries.length);
    const winner = answers.find((a) => a.status === 200)!.body as { auditId: string };
    expect(body.entries.find((e) => e.outcome === "released")?.id).toBe(winner.auditId);
  });

  it("lists this console's own entries as its file has them, whatever records someone added to the nodes' streams", async () => {
    await releaseAs("lock:forged", "frank", "the real reason");
    const id = released.at(-1)!;
    const real = (await getPage("?resource=lock:forged")).body.entries[0]!;
    expect(real).toMatchObject({ id, actor: "frank", outcome: "released" });
    // A Redis user that may write the stream adds an intent and an outcome with the entry's id.
    const forgedIntent = { v: 1, kind: "intent", id, entry: { ...real, actor: "mallory", reason: "nothing to see", outcome: "pending" } };
    const forgedOutcome = { v: 1, kind: "outcome", id, outcome: "failed", nodes: [], finishedAt: real.finishedAt! + 3_600_000 };
    for (const node of nodes) {
      await node.xadd("lockscope:audit", "*", "r", JSON.stringify(forgedIntent));
      await node.xadd("lockscope:audit", "*", "r", JSON.stringify(forgedOutcome));
    }
    const listed = (await getPage("?resource=lock:forged")).body.entries;
    expect(listed.map((e) => [e.id, e.actor, e.reason, e.outcome])).toEqual([[id, "frank", "the real reason", "released"]]);
    // Filtered on what only the added record says, the entry is not listed: its file says otherwise.
    expect((await getPage("?actor=mallory")).body.entries).toEqual([]);
    expect((await getPage("?resource=lock:forged&actor=mallory")).body.entries).toEqual([]);
    const exported = await call(exportRoute.GET, "GET", "/api/audit/export?format=json&actor=mallory", { token: VIEWER_TOKEN });
    expect((exported.body as Page).entries).toEqual([]);
  });

  it("offers an outcome the stream did not take again until a quorum has it, without writing it to the file again", async () => {
    const { getNodes } = await import("@/server/nodes");
    const { OutcomeRetryingStore } = await import("@/server/audit/outcome-retry");
    const file = path.join(dir, "retried.jsonl");
    // Retried by hand below, not by its timer.
    const store = new OutcomeRetryingStore(new logModule.AuditLog(getNodes(), file, 200), { everyMs: 3_600_000 });
    const entry = newEntry({ resource: "lock:retried", reason: "stream lost its quorum" });
    await store.recordIntent(entry);
    const outcomeLines = () => parseAuditLines(readFileSync(file, "utf8")).records.filter((r) => r.kind === "outcome" && r.id === entry.id);
    cluster.pause(1);
    cluster.pause(2);
    try {
      expect((await store.recordOutcome(entry.id, "released", [{ id: "node-0", result: "deleted" }], Date.now())).durable).toBe(false);
      expect(await store.retry()).toBe(1);
      expect(await store.retry()).toBe(1);
    } finally {
      cluster.resume(1);
      cluster.resume(2);
    }
    expect(await store.retry()).toBe(0);
    expect(outcomeLines()).toHaveLength(1);
    const listed = await store.list({ limit: 5, filters: { resource: "lock:retried" } });
    expect(listed.entries.map((e) => [e.id, e.outcome])).toEqual([[entry.id, "released"]]);
  });

  it("counts the console's outcomes waiting for the audit store in lockscope_audit_outcomes_pending, down to 0 once taken", async () => {
    const { getAuditStore } = await import("@/server/audit/current");
    const { getRegistry } = await import("@/server/metrics");
    const pending = async () => {
      const text = await getRegistry().getSingleMetricAsString("lockscope_audit_outcomes_pending");
      return Number(/^lockscope_audit_outcomes_pending (\S+)$/m.exec(text)?.[1]);
    };
    const store = getAuditStore() as OutcomeRetryingStore;
    const entry = newEntry({ resource: "lock:pending-gauge", reason: "stream lost its quorum" });
    await store.recordIntent(entry);
    expect(await pending()).toBe(0);
    cluster.pause(1);
    cluster.pause(2);
    try {
      expect((await store.recordOutcome(entry.id, "released", [{ id: "node-0", result: "deleted" }], Date.now())).durable).toBe(false);
      expect(await pending()).toBe(1);
    } finally {
      cluster.resume(1);
      cluster.resume(2);
    }
    await until("the store took the waiting outcome", async () => (await store.retry()) === 0, 10_000);
    expect(await pending()).toBe(0);
  });

  it("finds an entry behind more than 200 000 newer records in the file: by time range at once, by actor page by page", async () => {
    // A console's file keeps every release it made, for years: a page reads a bounded number of records per
    // request, which must end a page early (with a `next`), never the search.
    const file = path.join(dir, "long.jsonl");
    const old = Date.now() - 30 * 86_400_000;
    const line = (at: number, actor: string): string => {
      const entry = newEntry({ id: newAuditId(at), at, actor, resource: "lock:long", reason: "r", ip: "::1" });
      return `${JSON.stringify({ v: 1, kind: "intent", id: entry.id, entry })}\n`;
    };
    const first = line(old, "old-timer");
    const oldId = (JSON.parse(first) as { id: string }).id;
    writeFileSync(file, first);
    const newer = old + 86_400_000;
    for (let chunk = 0; chunk < 201; chunk++) {
      let text = "";
      for (let i = 0; i < 1_000; i++) text += line(newer + chunk * 1_000 + i, "bulk");
      appendFileSync(file, text);
    }
    const log = new logModule.AuditLog([], file, 200);

    const byTime = await log.list({ limit: 10, filters: { to: old + 3_600_000 } });
    expect(byTime.entries.map((e) => e.id)).toEqual([oldId]);
    expect(byTime.next).toBeNull();

    const found: string[] = [];
    let before: string | undefined;
    for (let pages = 0; ; pages++) {
      expect(pages, "pages asked").toBeLessThan(10);
      const page = await log.list({ limit: 10, ...(before ? { before } : {}), filters: { actor: "old-timer" } });
      found.push(...page.entries.map((e) => e.id));
      if (!page.next) break;
      before = page.next;
    }
    expect(found).toEqual([oldId]);
  });

  describe("on a disk that fills up", () => {
    // A real 256 KB filesystem: a full one fails writes with ENOSPC, partway through a record.
    const mountPoint = mkdtempSync(path.join(os.tmpdir(), "lockscope-audit-disk-"));
    beforeAll(() => {
      const mounted = spawnSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", mountPoint], { encoding: "utf8" });
      if (mounted.status !== 0) throw new Error(`this test mounts a small tmpfs and needs root: ${mounted.stderr}`);
    });
    afterAll(() => {
      spawnSync("umount", [mountPoint]);
      rmSync(mountPoint, { recursive: true, force: true });
    });

    it("cuts a failed append back, so the next release's records are whole and readable", async () => {
      const { getNodes } = await import("@/server/nodes");
      const file = path.join(mountPoint, "audit.jsonl");
      const log = new logModule.AuditLog(getNodes(), file, 200);
      const first = newEntry({ reason: "before the disk filled" });
      await log.recordIntent(first);
      await log.recordOutcome(first.id, "released", [{ id: "node-0", result: "deleted" }], Date.now());
      const goodLength = statSync(file).size;

      const filler = path.join(mountPoint, "filler");
      fill(filler);
      // Longer than what is left of the file's last block: part of it is written, then the disk is full.
      const refused = newEntry({ reason: "x".repeat(6000) });
      const failure = await log.recordIntent(refused).then(
        () => null,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(logModule.AuditUnavailableError);
      expect((failure as Error).message).toContain("ENOSPC");
      expect(statSync(file).size).toBe(goodLength);

      rmSync(filler);
      const next = newEntry({ reason: "after space was freed" });
      await log.recordIntent(next);
      await log.recordOutcome(next.id, "released", [{ id: "node-0", result: "deleted" }], Date.now());

      const { records, unreadable } = parseAuditLines(readFileSync(file, "utf8"));
      expect(unreadable).toEqual([]);
      expect(records.map((r) => `${r.kind} ${r.id}`)).toEqual([`intent ${first.id}`, `outcome ${first.id}`, `intent ${next.id}`, `outcome ${next.id}`]);
    });

    it("starts each record on its own line after a torn one, and reads past the torn one", async () => {
      const { getNodes } = await import("@/server/nodes");
      const file = path.join(mountPoint, "torn.jsonl");
      const log = new logModule.AuditLog(getNodes(), file, 200);
      const first = newEntry({ reason: "whole" });
      await log.recordIntent(first);
      // What a console killed in the middle of an append leaves: a record without its end.
      appendFileSync(file, JSON.stringify({ v: 1, kind: "intent", id: newAuditId(), entry: newEntry() }).slice(0, 40));
      const next = newEntry({ reason: "after the torn record" });
      await log.recordIntent(next);
      await log.recordOutcome(next.id, "released", [{ id: "node-0", result: "deleted" }], Date.now());

      const { records, unreadable } = parseAuditLines(readFileSync(file, "utf8"));
      expect(unreadable).toEqual([2]);
      expect(records.map((r) => `${r.kind} ${r.id}`)).toEqual([`intent ${first.id}`, `intent ${next.id}`, `outcome ${next.id}`]);

      // With no node answering, the console lists the file's entries: the release after the torn record is there.
      for (let i = 0; i < 3; i++) cluster.pause(i);
      try {
        const listed = await log.list({ limit: 10, filters: {} });
        expect(listed.source).toBe("file");
        expect(Object.fromEntries(listed.entries.map((e) => [e.id, e.outcome]))).toEqual({ [next.id]: "released", [first.id]: "pending" });
      } finally {
        for (let i = 0; i < 3; i++) cluster.resume(i);
      }
    });
  });
});
