import { mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as NodesModule from "@/server/nodes";
import type * as PatternsModule from "@/server/patterns";
import type * as SharedModule from "@/server/patterns-shared";
import type { TestCluster } from "../support/redis";
import { setUpConsole, tearDownConsole } from "../support/console";

type Store = PatternsModule.PatternStore;

/**
 * Consoles over the same lock nodes share the lock patterns through them (`lockscope:patterns` on each node):
 * each store below stands for one console, with its own data folder and its own LOCK_PATTERNS, over three real
 * redis-server nodes.
 */
describe("lock patterns shared between consoles", () => {
  let cluster: TestCluster;
  let patterns: typeof PatternsModule;
  let shared: typeof SharedModule;
  let nodes: typeof NodesModule;
  const CONFIGURED = ["lock:*", "locks:*"];
  const outcomes: Array<{ id: string; outcome: string }> = [];
  const auditor = {
    recordIntent: () => Promise.resolve(),
    recordOutcome: (id: string, outcome: string) => {
      outcomes.push({ id, outcome });
      return Promise.resolve();
    },
  };
  const meta = (actor: string) => ({ actor, role: "operator" as const, reason: "show the billing locks", ip: "127.0.0.1", userAgent: null });

  /** A console's pattern store: its own data folder, sharing through the nodes. */
  const consoleStore = (configured = CONFIGURED): { store: Store; file: string } => {
    const file = path.join(mkdtempSync(path.join(os.tmpdir(), "lockscope-patterns-")), "patterns.json");
    const store = new patterns.PatternStore(file, configured);
    store.shareVia(shared.nodesShare(store, nodes.getNodes, 500));
    return { store, file };
  };
  const sync = (store: Store) => shared.syncPatterns(store, nodes.getNodes(), 500);
  const stampsOnNodes = () => Promise.all([0, 1, 2].map((i) => cluster.client(i).hget(shared.PATTERNS_KEY, "stamp")));
  const globs = (store: Store) => store.current().patterns.map((p) => p.glob);

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 3, env: { LOCK_PATTERNS: CONFIGURED.join(",") } });
    patterns = await import("@/server/patterns");
    shared = await import("@/server/patterns-shared");
    nodes = await import("@/server/nodes");
    const { whenReady } = await import("@/server/health");
    await Promise.all(nodes.getNodes().map((n) => whenReady(n.client, 5_000)));
  });
  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  it("applies a change made on one console on the other at its next read of the nodes, and keeps it in that console's folder", async () => {
    const a = consoleStore();
    const b = consoleStore();
    const seenOnB: string[][] = [];
    b.store.onChange((state) => seenOnB.push(state.patterns.map((p) => p.glob)));

    const next = [{ glob: "lock:*" }, { glob: "billing:*", scope: "single" as const }];
    const { shared: where, state } = await a.store.replace(next, meta("alice"), auditor);
    const revision = state.revision;
    expect(where).toEqual({ recorded: ["node-0", "node-1", "node-2"], missed: [] });
    expect(await stampsOnNodes()).toEqual([revision, revision, revision]);
    expect(globs(b.store)).toEqual(CONFIGURED);

    await sync(b.store);
    expect(b.store.current()).toMatchObject({ patterns: next, source: "console", updatedBy: "alice", revision });
    expect(seenOnB).toEqual([["lock:*", "billing:*"]]);
    expect(b.store.declaredScope("billing:invoice-1")).toBe("single");
    // Read again: nothing new, no second announcement.
    await sync(b.store);
    expect(seenOnB).toHaveLength(1);
    // B restarted while no node answers: its own folder has the change.
    expect(JSON.parse(readFileSync(b.file, "utf8"))).toMatchObject({ patterns: next, stamp: revision, basedOn: CONFIGURED });
    expect(new patterns.PatternStore(b.file, CONFIGURED).current()).toMatchObject({ patterns: next, revision });
  });

  it("copies the newest change to a node that lost it, and back to every node when all restarted empty", async () => {
    const a = consoleStore();
    const { revision: auditId } = (await a.store.replace([{ glob: "lock:*" }, { glob: "orders:*" }], meta("alice"), auditor)).state;
    await cluster.client(1).del(shared.PATTERNS_KEY);
    const b = consoleStore();
    await sync(b.store);
    expect(await stampsOnNodes()).toEqual([auditId, auditId, auditId]);

    await cluster.flushAll();
    expect(await stampsOnNodes()).toEqual([null, null, null]);
    // A console that never changed the patterns has nothing to give back; one that applied the change does.
    const fresh = consoleStore();
    await sync(fresh.store);
    expect(await stampsOnNodes()).toEqual([null, null, null]);
    await sync(a.store);
    expect(await stampsOnNodes()).toEqual([auditId, auditId, auditId]);
    await sync(fresh.store);
    expect(globs(fresh.store)).toEqual(["lock:*", "orders:*"]);
  });

  it("makes two changes made at once on two consoles one after the other, the later everywhere", async () => {
    const a = consoleStore();
    const b = consoleStore();
    const [first, second] = await Promise.all([
      a.store.replace([{ glob: "lock:*" }, { glob: "a:*" }], meta("alice"), auditor),
      b.store.replace([{ glob: "lock:*" }, { glob: "b:*" }], meta("bob"), auditor),
    ]);
    // Neither was told 409 for the other: the one that took the lease second read the first from the nodes and
    // was made over it (no revision was given, so it replaces it).
    const later = first.state.revision > second.state.revision ? first : second;
    const earlier = later === first ? second : first;
    expect(later.state.revision > earlier.state.revision).toBe(true);
    // A read of the nodes (every 2 s on a console) settles the consoles.
    for (const store of [a.store, b.store]) await sync(store);
    expect(globs(a.store)).toEqual(later.state.patterns.map((p) => p.glob));
    expect(globs(b.store)).toEqual(later.state.patterns.map((p) => p.glob));
    expect(await stampsOnNodes()).toEqual([later.state.revision, later.state.revision, later.state.revision]);
  });

  it("applies only one of two changes made at once over the same list, and tells the other who changed it", async () => {
    const a = consoleStore();
    const b = consoleStore();
    for (const store of [a.store, b.store]) await sync(store);
    const read = a.store.current().revision;
    expect(b.store.current().revision).toBe(read);
    const intents = outcomes.length;
    for (let round = 0; round < 5; round += 1) {
      const base = a.store.current().revision;
      await sync(b.store);
      expect(b.store.current().revision).toBe(base);
      const settled = await Promise.allSettled([
        a.store.replace([{ glob: "lock:*" }, { glob: `alice-${round}:*` }], meta("alice"), auditor, base),
        b.store.replace([{ glob: "lock:*" }, { glob: `bob-${round}:*` }], meta("bob"), auditor, base),
      ]);
      const applied = settled.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []));
      const refused = settled.flatMap((o) => (o.status === "rejected" ? [o.reason as Error & { code: string; details: { revision: string } }] : []));
      expect(applied).toHaveLength(1);
      expect(refused).toHaveLength(1);
      const winner = applied[0]!;
      const loser = winner.state.updatedBy === "alice" ? "bob" : "alice";
      expect(refused[0]).toMatchObject({ code: "conflict", details: { revision: winner.state.revision } });
      expect(refused[0]!.message).toMatch(new RegExp(`^The lock patterns were changed by ${winner.state.updatedBy} at .* since you read them \\(now: lock:\\*, ${winner.state.updatedBy}-${round}:\\*\\); nothing changed`));
      // The refused change reached neither the nodes nor either console.
      for (const store of [a.store, b.store]) await sync(store);
      for (const store of [a.store, b.store]) expect(globs(store)).toEqual(["lock:*", `${winner.state.updatedBy}-${round}:*`]);
      expect(await stampsOnNodes()).toEqual([winner.state.revision, winner.state.revision, winner.state.revision]);
      expect(globs(a.store)).not.toContain(`${loser}-${round}:*`);
    }
    // The refused ones were never audited as applied: each round recorded one outcome, "applied".
    expect(outcomes.slice(intents).map((o) => o.outcome)).toEqual(["applied", "applied", "applied", "applied", "applied"]);
  });

  it("passes over a change made before a console started over other LOCK_PATTERNS, and applies one made while it runs", async () => {
    const a = consoleStore();
    await a.store.replace([{ glob: "lock:*" }, { glob: "before:*" }], meta("alice"), auditor);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const edited = consoleStore(["mutex:*"]);
    await sync(edited.store);
    // The environment was edited since that change: the variable wins.
    expect(edited.store.current()).toMatchObject({ patterns: [{ glob: "mutex:*" }], source: "config", revision: "config" });

    const { revision } = (await a.store.replace([{ glob: "mutex:*" }, { glob: "after:*" }], meta("alice"), auditor)).state;
    await sync(edited.store);
    expect(edited.store.current()).toMatchObject({ patterns: [{ glob: "mutex:*" }, { glob: "after:*" }], source: "console", revision });
  });

  it("orders a change after every change it knows, whatever the console's clock says", async () => {
    // Another console whose clock runs a minute ahead made the change in force.
    const ahead = `${String(Date.now() + 60_000).padStart(13, "0")}-abcdef`;
    const record = { version: 1, stamp: ahead, patterns: [{ glob: "lock:*" }, { glob: "ahead:*" }], updatedAt: Date.now() + 60_000, updatedBy: "carol", basedOn: CONFIGURED };
    await Promise.all([0, 1, 2].map((i) => cluster.client(i).hset(shared.PATTERNS_KEY, "stamp", ahead, "record", JSON.stringify(record))));
    const b = consoleStore();
    await sync(b.store);
    expect(b.store.current().revision).toBe(ahead);
    // This console's change, made now by its own clock, still comes after it: every console takes it.
    const { state } = await b.store.replace([{ glob: "lock:*" }, { glob: "behind:*" }], meta("bob"), auditor);
    expect(state.revision > ahead).toBe(true);
    const other = consoleStore();
    await sync(other.store);
    expect(globs(other.store)).toEqual(["lock:*", "behind:*"]);
  });

  it("refuses a change (409) when a later one from another console reaches a node while it is made, and that one stands", async () => {
    const b = consoleStore();
    await sync(b.store);
    const before = b.store.current();
    // Another console's change reaches node 2 after this console read the nodes, while the audit log records this
    // one's intent: a console that does not take the lease (one of an older version, during an upgrade).
    const later = `${String(Date.now() + 120_000).padStart(13, "0")}-fedcba`;
    const theirs = { version: 1, stamp: later, patterns: [{ glob: "lock:*" }, { glob: "theirs:*" }], updatedAt: Date.now(), updatedBy: "dave", basedOn: CONFIGURED };
    const meanwhile = { ...auditor, recordIntent: () => cluster.client(2).hset(shared.PATTERNS_KEY, "stamp", later, "record", JSON.stringify(theirs)).then(() => undefined) };
    const refused = b.store.replace([{ glob: "lock:*" }, { glob: "mine:*" }], meta("bob"), meanwhile);
    await expect(refused).rejects.toMatchObject({ code: "conflict", details: { revision: later } });
    await expect(refused).rejects.toThrow(/changed on another console at the same moment; theirs stands and yours was not applied/);
    expect(b.store.current()).toEqual(before);
    // The next read gives every node and console theirs.
    await sync(b.store);
    expect(globs(b.store)).toEqual(["lock:*", "theirs:*"]);
    expect(await stampsOnNodes()).toEqual([later, later, later]);
  });

  it("refuses a change while most nodes do not answer, and changes nothing", async () => {
    const a = consoleStore();
    await sync(a.store);
    const before = a.store.current();
    const kept = readFileSync(a.file, "utf8");
    const audited = outcomes.length;
    for (const i of [0, 1, 2]) await cluster.kill(i);
    await expect(a.store.replace([{ glob: "lock:*" }, { glob: "never:*" }], meta("alice"), auditor)).rejects.toThrow(
      /^The lock patterns are changed only while most lock nodes answer, so that two consoles never change them at once \(node-0, node-1, node-2 did not answer in time\); nothing changed\.$/,
    );
    expect(a.store.current()).toEqual(before);
    expect(readFileSync(a.file, "utf8")).toBe(kept);
    // Refused before the audit log was asked to record it.
    expect(outcomes).toHaveLength(audited);
  });
});
