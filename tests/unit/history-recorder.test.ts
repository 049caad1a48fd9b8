import { describe, expect, it } from "vitest";
import { HistoryRecorder } from "@/server/history/recorder";
import type { HistoryStore, LockHistoryEvent } from "@/server/history/types";

/** A store the test controls: writes wait on a gate the test opens, or fail while `failing` is set. */
class GatedStore implements Pick<HistoryStore, "insert"> {
  written: LockHistoryEvent[][] = [];
  failing = false;
  private opened: Promise<void> = Promise.resolve();
  private openGate: () => void = () => undefined;

  close(): void {
    this.opened = new Promise((resolve) => (this.openGate = resolve));
  }
  open(): void {
    this.openGate();
  }
  async insert(events: readonly LockHistoryEvent[]): Promise<void> {
    await this.opened;
    if (this.failing) throw new Error("database down");
    this.written.push([...events]);
  }
}

const event = (i: number): LockHistoryEvent => ({ at: i, resource: `lock:r/${i}`, deployment: "default", type: "acquired", token: `t${i}` });

describe("history recorder", () => {
  it("writes in batches of at most batchSize, in order", async () => {
    const store = new GatedStore();
    const recorder = new HistoryRecorder(store, { batchSize: 3, flushMs: 1_000 });
    for (let i = 0; i < 7; i++) recorder.record(event(i));
    await recorder.flush();
    expect(store.written.map((b) => b.length)).toEqual([3, 3, 1]);
    expect(store.written.flat().map((e) => e.at)).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });

  it("says whether a flush wrote everything queued, so that nothing reads the database as if it had", async () => {
    const store = new GatedStore();
    const recorder = new HistoryRecorder(store, { batchSize: 2, flushMs: 1_000, unreachable: () => true });
    for (let i = 0; i < 3; i++) recorder.record(event(i));
    store.failing = true;
    expect(await recorder.flush()).toBe(false);
    expect(recorder.pending).toBe(3);
    store.failing = false;
    expect(await recorder.flush()).toBe(true);
    expect(recorder.pending).toBe(0);
    expect(store.written.flat().map((e) => e.at)).toEqual([0, 1, 2]);
  });

  it("never blocks while the database is slow: past the capacity events are dropped and counted", async () => {
    const store = new GatedStore();
    store.close();
    const drops: Array<[number, string]> = [];
    const recorder = new HistoryRecorder(store, { capacity: 5, batchSize: 2, flushMs: 1, onDrop: (n, why) => drops.push([n, why]) });
    for (let i = 0; i < 8; i++) recorder.record(event(i));
    expect(recorder.pending).toBe(5);
    expect(drops).toEqual([
      [1, "queue-full"],
      [1, "queue-full"],
      [1, "queue-full"],
    ]);
    store.open();
    await recorder.flush();
    expect(store.written.flat().map((e) => e.at)).toEqual([0, 1, 2, 3, 4]);
  });

  it("keeps a failed batch and writes it once the database is back; gives it up after `attempts` tries", async () => {
    const store = new GatedStore();
    store.failing = true;
    const drops: Array<[number, string]> = [];
    const errors: unknown[] = [];
    const recorder = new HistoryRecorder(store, { batchSize: 10, flushMs: 1_000, attempts: 3, onDrop: (n, why) => drops.push([n, why]), onError: (e) => errors.push(e) });
    recorder.record(event(1));
    await recorder.flush();
    expect(errors).toHaveLength(1);
    expect(recorder.pending).toBe(1);
    store.failing = false;
    await recorder.flush();
    expect(store.written.flat().map((e) => e.at)).toEqual([1]);

    store.failing = true;
    recorder.record(event(2));
    for (let i = 0; i < 3; i++) await recorder.flush();
    expect(drops).toEqual([[1, "write-failed"]]);
    expect(recorder.pending).toBe(0);
  });

  it("keeps every queued event while the database does not answer, however long, and writes them once it is back", async () => {
    const store = new GatedStore();
    const unreachable = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
    const insert = store.insert.bind(store);
    let down = true;
    store.insert = async (events) => {
      if (down) throw unreachable;
      return insert(events);
    };
    const drops: Array<[number, string]> = [];
    const recorder = new HistoryRecorder(store, { batchSize: 10, flushMs: 1_000, attempts: 3, onDrop: (n, why) => drops.push([n, why]) });
    recorder.record(event(1));
    recorder.record(event(2));
    // Many more tries than `attempts`: the database is down, not refusing these events.
    for (let i = 0; i < 10; i++) await recorder.flush();
    expect(drops).toEqual([]);
    expect(recorder.pending).toBe(2);
    down = false;
    await recorder.flush();
    expect(store.written.flat().map((e) => e.at)).toEqual([1, 2]);
    expect(recorder.pending).toBe(0);
  });

  it("keeps the queued events while the database is too slow to write them in time, and writes them once it keeps up", async () => {
    const store = new GatedStore();
    // What PostgreSQL answers a statement that ran past the console's statement timeout.
    const cancelled = Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" });
    const insert = store.insert.bind(store);
    let slow = true;
    store.insert = async (events) => {
      if (slow) throw cancelled;
      return insert(events);
    };
    const drops: Array<[number, string]> = [];
    const recorder = new HistoryRecorder(store, { batchSize: 10, flushMs: 1_000, attempts: 3, onDrop: (n, why) => drops.push([n, why]) });
    recorder.record(event(1));
    recorder.record(event(2));
    // Many more tries than `attempts`: the database is slow, not refusing these events.
    for (let i = 0; i < 10; i++) await recorder.flush();
    expect(drops).toEqual([]);
    expect(recorder.pending).toBe(2);
    slow = false;
    await recorder.flush();
    expect(store.written.flat().map((e) => e.at)).toEqual([1, 2]);
  });

  it("makes a bulk producer wait for room once the queue is half full, and never while the database fails", async () => {
    const store = new GatedStore();
    store.close();
    const recorder = new HistoryRecorder(store, { capacity: 10, batchSize: 4, flushMs: 1 });
    for (let i = 0; i < 4; i++) recorder.record(event(i));
    expect(recorder.room()).toBeNull();
    for (let i = 4; i < 6; i++) recorder.record(event(i));
    const room = recorder.room();
    expect(room).not.toBeNull();
    let roomMade = false;
    void room?.then(() => (roomMade = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    // The database has not answered: the producer still waits, and nothing was dropped.
    expect(roomMade).toBe(false);
    expect(recorder.pending).toBe(6);
    store.open();
    await room;
    expect(recorder.pending).toBeLessThan(5);
    await recorder.flush();
    expect(store.written.flat().map((e) => e.at)).toEqual([0, 1, 2, 3, 4, 5]);

    // A database that refuses writes: the producer goes on at once (the queue's bound and drop count hold).
    store.failing = true;
    for (let i = 6; i < 12; i++) recorder.record(event(i));
    await recorder.flush();
    expect(recorder.room()).toBeNull();
  });
});
