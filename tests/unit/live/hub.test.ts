import { EventEmitter } from "node:events";
import v8 from "node:v8";
import vm from "node:vm";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { lockOf, type CompactLock } from "@/lib/locks/compact-lock";
import type { Lock, LiveStats } from "@/lib/locks/types";
import type { LiveEventMap } from "@/server/live/events";
import { MAX_KEPT_VIEWS, NO_LOCKS, StreamHub } from "@/server/live/hub";
import { LINGER_MS, LockStore, type NodeSample } from "@/server/live/store";
import { StreamLimitError } from "@/server/live/stream-limits";

const T = Date.now();
const NODES = ["node-0", "node-1", "node-2"];
const STATS: LiveStats = { serverTime: T, held: 0, locks: 0, acquisitionsPerSec: 0, contentionPerSec: 0, expirationsPerSec: 0, nodesUp: 3, nodesTotal: 3, nodesNotAnswering: 0, nodesWithoutNotifications: 0, degraded: false };

/** `groups`: a lock's group is its resource up to the first `/` (else every lock is in `other`). */
function setUp(options: ConstructorParameters<typeof StreamHub>[1] = {}, groups = false) {
  const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>());
  NODES.forEach((_, i) => store.setNodeUp(i, true, T));
  store.watching = true;
  const groupOf = groups ? (resource: string) => resource.split("/")[0] as string : undefined;
  const hub = new StreamHub({ store, ...(groupOf ? { groupOf } : {}), watcherStatus: () => [], stats: () => STATS }, options);
  return { store, hub };
}

const all = (value: string | null, expiry = T + 60_000): NodeSample[] =>
  [0, 1, 2].map((node) => ({ node, value, expiry: value === null ? Number.NaN : expiry, cause: value === null ? "del" : null }));

/** Reads what the stream has queued and applies it as the browser's feed does: snapshot, then upserts and removals in order. */
class Browser {
  readonly locks = new Map<string, Lock>();
  /** Every event's name, in order, and the last frame id. */
  readonly events: string[] = [];
  lastId: string | null = null;
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;
  private buffer = "";
  private readonly decoder = new TextDecoder();
  constructor(stream: ReadableStream<Uint8Array>) {
    this.reader = stream.getReader();
  }
  /** Reads every chunk already queued (each hub write is one chunk). */
  async drain(chunks: number): Promise<void> {
    for (let i = 0; i < chunks; i++) {
      const { value, done } = await this.reader.read();
      if (done) return;
      this.buffer += this.decoder.decode(value, { stream: true });
    }
    let end: number;
    while ((end = this.buffer.indexOf("\n\n")) >= 0) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      this.lastId = /^id: (.*)$/m.exec(block)?.[1] ?? this.lastId;
      if (event) this.events.push(event);
      if (!event || !data) continue;
      if (event === "snapshot") {
        for (const sent of (JSON.parse(data) as { locks: Array<Lock | CompactLock> }).locks) {
          const lock = lockOf(sent);
          this.locks.set(lock.resource, lock);
        }
      } else if (event === "lock") {
        const lock = lockOf(JSON.parse(data) as Lock | CompactLock);
        this.locks.set(lock.resource, lock);
      } else if (event === "lock-removed") this.locks.delete((JSON.parse(data) as { resource: string }).resource);
    }
  }
  read() {
    return this.reader.read();
  }
  close() {
    return this.reader.cancel();
  }
}

describe("the stream hub", () => {
  it("keeps a lock taken again in the very frame its ended row leaves the list", async () => {
    const { store, hub } = setUp();
    const browser = new Browser(hub.open(null, null));
    await browser.drain(3); // preamble, node event, snapshot
    store.apply("lock:again", all("v"), T);
    hub.tick(T);
    store.apply("lock:again", all(null), T + 200);
    hub.tick(T + 200);
    await browser.drain(2);
    expect(browser.locks.get("lock:again")?.state).toBe("released");
    // The ended row leaves the list, and before the frame goes out the lock is taken again.
    const later = T + 200 + LINGER_MS;
    store.tick(later);
    store.apply("lock:again", all("w"), later);
    hub.tick(later);
    await browser.drain(1);
    expect(browser.locks.get("lock:again")).toMatchObject({ state: "held", token: "w" });
  });

  it("drops a client that falls too far behind at once, discarding its backlog", async () => {
    const { store, hub } = setUp({ maxBacklogBytes: 16 * 1024 });
    const stream = hub.open(null, null);
    // Nobody reads: every change piles up until the backlog passes the cap.
    for (let i = 0; i < 1_000; i++) {
      store.apply(`lock:pile:${i}`, all(`value-${i}-${"x".repeat(100)}`), T + i * 200);
      hub.tick(T + i * 200);
    }
    expect(hub.clientCount).toBe(0);
    // An errored stream, not one closed after its queue: the server ends the response (and its socket) now.
    await expect(stream.getReader().read()).rejects.toThrow(/fell too far behind/);
  });

  it("closes the stream of an aborted request that nothing but the stream holds (a request's signal follows through a weak link)", async () => {
    v8.setFlagsFromString("--expose-gc");
    const gc = vm.runInNewContext("gc") as () => void;
    const { hub } = setUp();
    const tab = new AbortController();
    // As the route does: the request, whose signal follows the tab's; nothing else keeps the request.
    const stream = ((request: Request) => hub.open(null, request))(new Request("http://localhost/api/locks/stream", { signal: tab.signal }));
    expect(hub.clientCount).toBe(1);
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    tab.abort();
    expect(hub.clientCount).toBe(0);
    // What was queued before the abort, then the end.
    const reader = stream.getReader();
    let ended = false;
    for (let i = 0; i < 10 && !ended; i++) ended = (await reader.read()).done;
    expect(ended).toBe(true);
  });

  it("refuses a stream past the limit per address and per token, and counts a closed one out", async () => {
    const { hub } = setUp({ limits: { perAddress: 2, perCredential: 3 } });
    const alice = { address: "10.0.0.1", credential: "token-a" };
    const first = hub.open(null, null, alice);
    hub.open(null, null, alice);
    expect(() => hub.open(null, null, alice)).toThrow(StreamLimitError);
    // Another address with the same token: the token's limit applies.
    hub.open(null, null, { address: "10.0.0.2", credential: "token-a" });
    expect(() => hub.open(null, null, { address: "10.0.0.3", credential: "token-a" })).toThrow(/this token \(at most 3/);
    await first.cancel();
    expect(() => hub.open(null, null, alice)).not.toThrow();
  });

  it("leaves nothing behind of a stream whose start fails: its place under the limits and its view go", async () => {
    const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>());
    NODES.forEach((_, i) => store.setNodeUp(i, true, T));
    store.watching = true;
    let failing = true;
    const watcherStatus = () => {
      if (failing) throw new Error("node status unavailable");
      return [];
    };
    const hub = new StreamHub({ store, watcherStatus, stats: () => STATS }, { limits: { perAddress: 1, perCredential: 1 } });
    const alice = { address: "10.0.0.1", credential: "token-a" };
    expect(() => hub.open(null, null, alice)).toThrow(/node status unavailable/);
    expect(hub.clientCount).toBe(0);
    // The address's one stream is free again, and with no view left open no lock change is built.
    failing = false;
    hub.tick(T + 1_000);
    hub.tick(T + 62_000);
    const drains = vi.spyOn(store, "drain");
    store.apply("lock:after", all("v"), T + 62_000);
    hub.tick(T + 62_100);
    expect(drains).not.toHaveBeenCalled();
    const browser = new Browser(hub.open(null, null, alice));
    await browser.drain(3);
    expect(browser.locks.get("lock:after")?.token).toBe("v");
    await browser.close();
  });

  it("ends a session's streams once it is signed out or expires, and leaves a bearer token's open", async () => {
    const signedOut = new Set<string>();
    const { hub } = setUp({ sessionRevoked: (id) => Promise.resolve(signedOut.has(id)) });
    const owner = (session: { id: string; expiresAtMs: number } | null) => ({ address: "10.0.0.1", credential: session?.id ?? "bearer", session });
    const alice = new Browser(hub.open(null, null, owner({ id: "alice", expiresAtMs: T + 3_600_000 })));
    const bob = new Browser(hub.open(null, null, owner({ id: "bob", expiresAtMs: T + 1_000 })));
    const script = new Browser(hub.open(null, null, owner(null)));
    for (const b of [alice, bob, script]) await b.drain(3);
    await hub.checkSessions(T);
    expect(hub.clientCount).toBe(3);
    signedOut.add("alice");
    await hub.checkSessions(T + 2_000);
    expect(hub.clientCount).toBe(1);
    for (const b of [alice, bob]) {
      // What was queued, up to the end of the stream: its last event says why it ended.
      let text = "";
      for (let chunk = await b.read(); !chunk.done; chunk = await b.read()) text += new TextDecoder().decode(chunk.value);
      expect(text.trimEnd().split("\n\n").at(-1)).toBe('event: end\ndata: {"reason":"signed-out"}');
    }
    await script.close();
  });

  it("encodes one snapshot for the streams that open together, each followed by the changes since it", async () => {
    const { store, hub } = setUp();
    for (let i = 0; i < 1_200; i++) store.apply(`lock:many:${i}`, all(`v${i}`), T);
    hub.tick(T);
    const built = vi.spyOn(store, "lock");
    // (Within the second a snapshot is shared for, however busy the machine.)
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    onTestFinished(() => void vi.useRealTimers());
    const first = new Browser(hub.open(null, null));
    await first.drain(5); // preamble, node event, 3 snapshot parts
    expect(first.locks.size).toBe(1_200);
    const once = built.mock.calls.length;
    expect(once).toBe(1_200);

    // A change, then a second tab: it shares the first one's snapshot and gets the change after it.
    store.apply("lock:many:7", all(null), T + 150);
    store.apply("lock:new", all("fresh"), T + 150);
    hub.tick(T + 150);
    const second = new Browser(hub.open(null, null));
    await second.drain(7); // preamble, node event, 3 shared parts, the nodes again (as of now), the frame since
    expect(second.locks.size).toBe(1_201);
    expect(second.locks.get("lock:many:7")?.state).toBe("released");
    expect(second.locks.get("lock:new")).toMatchObject({ state: "held", token: "fresh" });
    // No lock was built again for the second tab's snapshot (the frame's locks are built once, by the tick).
    expect(built.mock.calls.length - once).toBe(0);
    await first.drain(1);
    expect(first.locks.get("lock:new")?.token).toBe("fresh");
  });

  it("shares the whole snapshot of tens of thousands of listed locks with the streams that open together", async () => {
    // About 25 MB of rows, as a churn of 10,000 changes/s lists with its ended locks lingering: a team's tabs
    // opening at once each wrote a third of it anew when only 16 MB of a snapshot were shared.
    const { store, hub } = setUp();
    const token = "t".repeat(200);
    for (let i = 0; i < 36_000; i++) store.apply(`lock:fleet:${i}`, all(`${token}${i}`), T);
    hub.tick(T);
    const built = vi.spyOn(store, "lock");
    const bytesOf = async (stream: ReadableStream<Uint8Array>) => {
      const reader = stream.getReader();
      let bytes = 0;
      // (Each write is a chunk: up to the snapshot's last part, the one with the id.)
      for (;;) {
        const { value, done } = await reader.read();
        if (done) throw new Error("the stream ended before its snapshot did");
        bytes += value.byteLength;
        if (/^id: [^\n]*\nevent: snapshot\n/.test(new TextDecoder().decode(value.subarray(0, 200)))) break;
      }
      await reader.cancel();
      return bytes;
    };
    // The tabs open within the second a snapshot is shared for, however long a busy machine takes to write it.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    onTestFinished(() => void vi.useRealTimers());
    const first = await bytesOf(hub.open(null, null));
    expect(first).toBeGreaterThan(20 * 1024 * 1024);
    expect(built.mock.calls.length).toBe(36_000);
    for (let tab = 0; tab < 3; tab++) expect(await bytesOf(hub.open(null, null))).toBe(first);
    expect(built.mock.calls.length).toBe(36_000);

    // Three times as many, past what is shared: none of it is kept (a million locks' streams would share their
    // first few percent), each stream builds its own.
    const larger = setUp();
    for (let i = 0; i < 108_000; i++) larger.store.apply(`lock:fleet:${i}`, all(`${token}${i}`), T);
    larger.hub.tick(T);
    const builtLarger = vi.spyOn(larger.store, "lock");
    const large = await bytesOf(larger.hub.open(null, null));
    expect(large).toBeGreaterThan(64 * 1024 * 1024);
    expect(builtLarger.mock.calls.length).toBe(108_000);
    expect(await bytesOf(larger.hub.open(null, null))).toBe(large);
    expect(builtLarger.mock.calls.length).toBe(216_000);
  }, 60_000);

  it("makes frames less often with many streams open (each with every change since), and every tick with few", async () => {
    const { store, hub } = setUp();
    const drains = vi.spyOn(store, "drain");
    const one = new Browser(hub.open(null, null));
    await one.drain(3);
    hub.tick(T + 1_000);
    hub.tick(T + 1_010);
    expect(drains).toHaveBeenCalledTimes(2);

    const streams = Array.from({ length: 99 }, () => hub.open(null, null));
    store.apply("lock:a", all("v1"), T + 1_020);
    hub.tick(T + 1_020);
    store.apply("lock:b", all("v2"), T + 1_030);
    hub.tick(T + 1_030);
    hub.tick(T + 1_040);
    hub.tick(T + 1_060);
    // A hundred streams: one frame per 100 ms at most, so none of these four ticks made one.
    expect(drains).toHaveBeenCalledTimes(2);
    hub.tick(T + 1_110);
    expect(drains).toHaveBeenCalledTimes(3);
    // One frame, with both changes.
    await one.drain(1);
    expect([...one.locks.keys()].sort()).toEqual(["lock:a", "lock:b"]);
    for (const stream of streams) await stream.cancel();
  });

  it("makes no frame while the only streams carry no locks, and every frame again once one does, until a minute after it closed", async () => {
    const { store, hub } = setUp();
    const drains = vi.spyOn(store, "drain");
    // The grouped view's streams: nodes and counts, no lock.
    const grouped = Array.from({ length: 3 }, () => hub.open(null, null, null, NO_LOCKS));
    store.apply("lock:a", all("v1"), T);
    hub.tick(T);
    hub.tick(T + 100);
    expect(drains).not.toHaveBeenCalled();

    // A stream of every lock: its snapshot has the lock, and the next change comes as a frame.
    const browser = new Browser(hub.open(null, null));
    await browser.drain(3);
    expect(browser.locks.get("lock:a")?.token).toBe("v1");
    store.apply("lock:a", all("v2"), T + 200);
    hub.tick(T + 200);
    await browser.drain(1);
    expect(browser.locks.get("lock:a")?.token).toBe("v2");
    expect(drains).toHaveBeenCalled();

    // Closed: frames are still made for a minute from the next tick (the tab may reconnect and resume), then
    // no more.
    await browser.close();
    drains.mockClear();
    hub.tick(T + 1_000);
    hub.tick(T + 60_900);
    expect(drains).toHaveBeenCalledTimes(2);
    drains.mockClear();
    hub.tick(T + 61_100);
    hub.tick(T + 61_200);
    expect(drains).not.toHaveBeenCalled();
    for (const stream of grouped) await stream.cancel();
  });

  it("resumes a stream only where every frame since its id carried its view's locks", async () => {
    const { store, hub } = setUp({}, true);
    const users = new Browser(hub.open(null, null, null, "users"));
    await users.drain(3);
    const orders = new Browser(hub.open(null, null, null, "orders"));
    await orders.drain(3);
    store.apply("orders/1", all("o1"), T);
    hub.tick(T);
    await orders.drain(1);
    const id = orders.lastId;
    expect(id).toMatch(/^[0-9a-f]{8}:\d+:[0-9a-f]{12}$/);
    await orders.close();

    // Back within the minute: the frames since carry its group's changes, and it resumes from them.
    store.apply("orders/1", all(null), T + 200);
    hub.tick(T + 200);
    const soon = new Browser(hub.open(id, null, null, "orders"));
    await soon.drain(3);
    expect(soon.events).toEqual(["node", "lock"]);
    expect(soon.locks.get("orders/1")?.state).toBe("released");
    await soon.close();

    // Away for two minutes while the users' group changes: its own changes were dropped unbuilt meanwhile, so it
    // starts again from a snapshot.
    hub.tick(T + 300);
    for (let t = T + 1_000; t <= T + 120_000; t += 1_000) {
      store.apply(`users/${t}`, all("u"), t);
      hub.tick(t);
    }
    store.apply("orders/2", all("o2"), T + 120_100);
    hub.tick(T + 120_100);
    const late = new Browser(hub.open(id, null, null, "orders"));
    await late.drain(3);
    expect(late.events).toEqual(["node", "snapshot"]);
    expect(late.locks.get("orders/2")?.token).toBe("o2");
    await late.close();
    await users.close();
  });

  it("gives a stream a fresh snapshot where its view was forgotten since the last one was made (a script asked for many groups)", async () => {
    const { store, hub } = setUp({}, true);
    store.apply("orders/1", all("v1"), T);
    hub.tick(T);
    const first = new Browser(hub.open(null, null));
    await first.drain(3);
    expect(first.locks.get("orders/1")?.token).toBe("v1");
    store.apply("orders/0", all("x"), T + 100);
    hub.tick(T + 100);
    await first.drain(1);
    await first.close();
    // A script opens and closes a stream per made-up group: the every-lock view is forgotten, and the changes
    // of the locks no view kept shows are dropped unbuilt.
    for (let i = 0; i < MAX_KEPT_VIEWS; i++) await hub.open(null, null, null, `made-up-${i}`).cancel();
    store.apply("orders/1", all("v2"), T + 200);
    hub.tick(T + 200);
    // A tab opens within the second the first one's snapshot may be shared: not that one, whose frames since lack the change.
    const second = new Browser(hub.open(null, null));
    await second.drain(3);
    expect(second.locks.get("orders/1")?.token).toBe("v2");
    await second.close();
  });

  it("builds only the changed locks of the groups its streams follow", async () => {
    const { store, hub } = setUp({}, true);
    const drains = vi.spyOn(store, "drain");
    const built = () => drains.mock.results.flatMap((r) => (r.value as ReturnType<LockStore["drain"]>).upserts.map((l) => l.resource));
    const orders = new Browser(hub.open(null, null, null, "orders"));
    await orders.drain(3);
    store.apply("orders/1", all("v1"), T);
    store.apply("users/1", all("u1"), T);
    hub.tick(T);
    await orders.drain(1);
    expect(built()).toEqual(["orders/1"]);
    expect([...orders.locks.keys()]).toEqual(["orders/1"]);

    // A stream of every lock: from then on every changed lock is built.
    const every = new Browser(hub.open(null, null));
    await every.drain(3);
    expect(every.locks.get("users/1")?.token).toBe("u1");
    drains.mockClear();
    store.apply("orders/2", all("v2"), T + 200);
    store.apply("users/2", all("u2"), T + 200);
    hub.tick(T + 200);
    expect(built().sort()).toEqual(["orders/2", "users/2"]);
    await every.drain(1);
    expect(every.locks.get("users/2")?.token).toBe("u2");
    await every.close();
    await orders.close();
  });
  it("keeps every stream's view apart whatever its group is named (a lock key may hold control characters)", async () => {
    // A group named NUL once shared the key of the every-lock view: its snapshot went to the every-lock
    // streams, and once its view was made first, theirs got no lock changes at all.
    const { store, hub } = setUp({}, true);
    store.apply("orders/1", all("v1"), T);
    hub.tick(T);
    const nul = new Browser(hub.open(null, null, null, "\u0000"));
    await nul.drain(3);
    expect([...nul.locks.keys()]).toEqual([]);
    const every = new Browser(hub.open(null, null));
    await every.drain(3);
    expect(every.locks.get("orders/1")?.token).toBe("v1");
    store.apply("orders/1", all("v2"), T + 5_000);
    store.apply("orders/2", all("new"), T + 5_000);
    hub.tick(T + 5_000);
    await every.drain(1);
    expect(every.locks.get("orders/1")?.token).toBe("v2");
    expect(every.locks.get("orders/2")?.token).toBe("new");
    // The other way round: a NUL group's stream opened right after an every-lock one gets none of its snapshot.
    const nulAgain = new Browser(hub.open(null, null, null, "\u0000"));
    await nulAgain.drain(3);
    expect([...nulAgain.locks.keys()]).toEqual([]);
    await Promise.all([nul.close(), every.close(), nulAgain.close()]);
  });

  it("sends a deployment's stream its own part of a frame beside a stream of a group named like that part", async () => {
    const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>());
    store.deployment = "orders";
    NODES.forEach((_, i) => store.setNodeUp(i, true, T));
    store.watching = true;
    const hub = new StreamHub({ store, snapshotKeys: () => [], groupOf: (resource: string) => resource.split("/")[0] as string, watcherStatus: () => [], stats: () => STATS });
    const odd = new Browser(hub.open(null, null, null, "orders\u0000\u0000", null, false));
    await odd.drain(3);
    const deployment = new Browser(hub.open(null, null, null, null, "orders", false));
    await deployment.drain(3);
    store.apply("a/1", all("v1"), T);
    hub.tick(T);
    await deployment.drain(1);
    expect(deployment.locks.get("a/1")?.token).toBe("v1");
    await Promise.all([odd.close(), deployment.close()]);
  });

  it("encodes each view's frame once for its streams with rows and without (`?locks=changes`), each under its own id, and resumes each", async () => {
    const { store, hub } = setUp({}, true);
    const everyRows = new Browser(hub.open(null, null));
    const everyChanges = [new Browser(hub.open(null, null, null, null, null, false)), new Browser(hub.open(null, null, null, null, null, false))];
    const ordersRows = new Browser(hub.open(null, null, null, "orders"));
    const ordersChanges = new Browser(hub.open(null, null, null, "orders", null, false));
    const browsers = [everyRows, ...everyChanges, ordersRows, ordersChanges];
    for (const b of browsers) await b.drain(3);
    // (The second stream of a view shares the first one's snapshot: the nodes are told again after it.)
    await everyChanges[1]?.drain(1);

    const encode = vi.spyOn(TextEncoder.prototype, "encode");
    // (A resource beyond ASCII: the id line is set in by byte.)
    store.apply("orders/ü✓-1", all("o1"), T);
    store.apply("users/1", all("u1"), T);
    hub.tick(T);
    const framesEncoded = encode.mock.calls.filter(([text]) => text?.includes("event: lock\n")).length;
    encode.mockRestore();
    // One for every lock's streams, one for the group's, whichever their filter, and the replay ring's of compact
    // locks (what the browser's streams take).
    expect(framesEncoded).toBe(3);

    const raw = await Promise.all(browsers.map(async (b) => new TextDecoder().decode((await b.read()).value)));
    const [rowsText, changesText, changesText2, ordersText, ordersChangesText] = raw as [string, string, string, string, string];
    const idOf = (text: string) => /^id: (.*)$/m.exec(text)?.[1] as string;
    const tagOf = (text: string) => idOf(text).split(":")[2] as string;
    // The same events, with the id before the last one, differing in the filter's tag alone.
    expect(changesText).toBe(changesText2);
    expect(tagOf(changesText)).not.toBe(tagOf(rowsText));
    expect(changesText.replace(tagOf(changesText), "TAG")).toBe(rowsText.replace(tagOf(rowsText), "TAG"));
    expect(ordersChangesText.replace(tagOf(ordersChangesText), "TAG")).toBe(ordersText.replace(tagOf(ordersText), "TAG"));
    for (const text of raw) {
      expect(text.endsWith("\n\n")).toBe(true);
      expect(text.split("\n\n").at(-2)).toMatch(/^id: [0-9a-f]{8}:\d+:[0-9a-f]{12}\nevent: lock\ndata: \{/);
    }
    expect(ordersChangesText).toContain('"resource":"orders/ü✓-1"');
    expect(ordersChangesText).not.toContain("users/1");

    // Each resumes from its own id, with the frames since under its own tag; another filter's id gets a snapshot.
    const changesId = idOf(changesText);
    for (const b of browsers) await b.close();
    store.apply("users/1", all(null), T + 200);
    hub.tick(T + 200);
    const back = new Browser(hub.open(changesId, null, null, null, null, false));
    await back.drain(3);
    expect(back.events).toEqual(["node", "lock"]);
    expect(back.lastId?.split(":")[2]).toBe(tagOf(changesText));
    expect(back.locks.get("users/1")?.state).toBe("released");
    const other = new Browser(hub.open(idOf(rowsText), null, null, null, null, false));
    await other.drain(3);
    expect(other.events).toEqual(["node", "snapshot"]);
    await Promise.all([back.close(), other.close()]);
  });

  it("sends compact locks to the streams that ask, each view's encoded once, the same locks as whole ones, and resumes either form from the other's id", async () => {
    const { store, hub } = setUp({}, true);
    // Locks of every shape: held, ended, partial (one value ahead), held with a node holding another value.
    store.apply("orders/1", all("o1"), T);
    store.apply("orders/2", all("o2"), T);
    store.apply("orders/2", all(null), T + 10);
    store.apply("users/1", [{ node: 0, value: "a", expiry: T + 60_000, cause: null }, { node: 1, value: "a", expiry: T + 60_000, cause: null }, { node: 2, value: "b", expiry: T + 60_000, cause: null }], T);
    store.apply("users/2", [{ node: 0, value: "x", expiry: T + 60_000, cause: null }, { node: 1, value: null, expiry: Number.NaN, cause: "del" }, { node: 2, value: null, expiry: Number.NaN, cause: "del" }], T);
    // (The nodes' disagreements settle first: they wait a moment for the rest of a write.)
    store.tick(T + 50);
    hub.tick(T + 50);
    const whole = new Browser(hub.open(null, null));
    const compact = [new Browser(hub.open(null, null, null, null, null, true, true)), new Browser(hub.open(null, null, null, null, null, true, true))];
    const ordersCompact = new Browser(hub.open(null, null, null, "orders", null, true, true));
    await whole.drain(3);
    for (const b of [...compact, ordersCompact]) await b.drain(3);
    // (The second stream of a view shares the first one's snapshot: the nodes are told again after it.)
    await compact[1]?.drain(1);
    expect(whole.locks.size).toBe(4);
    // (Each snapshot reads the nodes' TTLs when it is made: a millisecond apart, they may differ by one.)
    const atRest = (locks: Map<string, Lock>) => new Map([...locks].map(([key, lock]) => [key, { ...lock, nodes: lock.nodes.map((n) => ({ ...n, pttlMs: n.pttlMs === null ? null : 0 })) }]));
    expect(compact[0]?.locks.get("users/1")?.nodes.map((n) => n.token)).toEqual(["a", "a", "b"]);
    for (const b of compact) expect(atRest(b.locks)).toEqual(atRest(whole.locks));
    expect([...ordersCompact.locks.keys()].sort()).toEqual(["orders/1", "orders/2"]);
    expect(atRest(ordersCompact.locks).get("orders/2")).toEqual(atRest(whole.locks).get("orders/2"));

    const encode = vi.spyOn(TextEncoder.prototype, "encode");
    store.apply("orders/1", all(null), T + 200);
    store.apply("users/2", all("x"), T + 200);
    store.apply("orders/3", all("o3"), T + 200);
    hub.tick(T + 200);
    const framesEncoded = encode.mock.calls.filter(([text]) => text?.includes("event: lock\n")).length;
    encode.mockRestore();
    // Every lock's compact (the replay ring's too) and whole, and the group's compact: once each, whatever the number
    // of streams.
    expect(framesEncoded).toBe(3);
    const browsers = [whole, ...compact, ordersCompact];
    const raw = await Promise.all(browsers.map(async (b) => new TextDecoder().decode((await b.read()).value)));
    const [wholeText, compactText, compactText2] = raw as [string, string, string];
    expect(compactText2).toBe(compactText);
    expect(compactText).toMatch(/^event: lock\ndata: \["/);
    // The same events in under 60 % of the bytes.
    expect(compactText.length).toBeLessThan(0.6 * wholeText.length);
    const applied = async (b: Browser, text: string) => {
      const again = new Browser(new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode(text)), c.close()) }));
      await again.drain(1);
      return again.locks;
    };
    const wholeChanges = await applied(whole, wholeText);
    expect(wholeChanges.size).toBe(3);
    expect(await applied(compact[0]!, compactText)).toEqual(wholeChanges);
    expect(await applied(ordersCompact, raw[3]!)).toEqual(new Map([...wholeChanges].filter(([key]) => key.startsWith("orders/"))));

    // A compact stream resumes from a whole one's id (and the other way round), each in its own form.
    const wholeId = /^id: (.*)$/m.exec(wholeText)?.[1] as string;
    const compactId = /^id: (.*)$/m.exec(compactText)?.[1] as string;
    expect(compactId).toBe(wholeId);
    for (const b of browsers) await b.close();
    store.apply("users/1", all(null), T + 400);
    hub.tick(T + 400);
    const backCompact = new Browser(hub.open(wholeId, null, null, null, null, true, true));
    const backWhole = new Browser(hub.open(compactId, null));
    await backCompact.drain(3);
    await backWhole.drain(3);
    expect(backCompact.events).toEqual(["node", "lock"]);
    expect(backWhole.events).toEqual(["node", "lock"]);
    expect(backCompact.locks.get("users/1")?.state).toBe("released");
    expect(backCompact.locks).toEqual(backWhole.locks);
    await Promise.all([backCompact.close(), backWhole.close()]);
  });
});
