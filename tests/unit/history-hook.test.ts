import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import type { LiveEventMap } from "@/server/live/events";
import { LockStore, type NodeSample } from "@/server/live/store";
import type { LockHistoryEvent } from "@/server/history/types";

const T = 1_800_000_000_000;
const NODES = ["node-0", "node-1", "node-2"];
const held = (node: number, value: string, expiry: number): NodeSample => ({ node, value, expiry, cause: null });
const gone = (node: number, cause: NodeSample["cause"] = "del"): NodeSample => ({ node, value: null, expiry: Number.NaN, cause });
const all = (value: string, expiry: number) => NODES.map((_, i) => held(i, value, expiry));

function storeRecording(watching = true) {
  const store = new LockStore(NODES, 2, new EventEmitter<LiveEventMap>());
  const recorded: LockHistoryEvent[] = [];
  store.history = { record: (e) => recorded.push(e), room: () => null };
  NODES.forEach((_, i) => store.setNodeUp(i, true, T));
  store.watching = watching;
  const seen = () => recorded.map((e) => `${e.type} ${e.token ?? "-"}`);
  return { store, recorded, seen };
}

describe("the live view's history hook", () => {
  it("records each lifecycle event with the value it concerns, a hand-over as the old value's end and the new one's start", () => {
    const { store, seen, recorded } = storeRecording();
    store.apply("lock:a", all("v1", T + 10_000), T);
    store.apply("lock:a", all("v1", T + 20_000), T + 1_000);
    // The next holder's value replaces the last one's in one script: no read saw the key free.
    store.apply("lock:a", all("v2", T + 30_000), T + 2_000);
    store.apply("lock:a", NODES.map((_, i) => gone(i)), T + 3_000);
    expect(seen()).toEqual(["acquired v1", "extended v1", "released v1", "acquired v2", "released v2"]);
    expect(recorded.every((e) => e.resource === "lock:a" && e.deployment === "default")).toBe(true);
    expect(recorded[2]?.detail).toBe("handed straight to the next holder");
  });

  it("names the store's deployment on every event it records, as on every lock it builds", () => {
    const { store, recorded } = storeRecording();
    store.deployment = "orders";
    store.apply("lock:a", all("v1", T + 10_000), T);
    store.apply("lock:a", NODES.map((_, i) => gone(i)), T + 1_000);
    expect(recorded.map((e) => `${e.deployment} ${e.type}`)).toEqual(["orders acquired", "orders released"]);
    expect(store.get("lock:a", T + 1_000)?.deployment).toBe("orders");
  });

  it("corrects the recorded end when a force release of a lock that just ended arrives a moment later", () => {
    const { store, recorded } = storeRecording();
    store.apply("lock:j", all("v", T + 10_000), T);
    store.apply("lock:j", NODES.map((_, i) => gone(i)), T + 10);
    store.noteForceRelease("lock:j", { value: "v", actor: "alice", reason: "stuck worker" }, T + 12);
    expect(recorded.map((e) => [e.type, e.token, e.relabels ?? null])).toEqual([
      ["acquired", "v", null],
      ["released", "v", null],
      ["force-released", "v", "released"],
    ]);
    expect(recorded[2]).toMatchObject({ at: recorded[1]!.at, detail: "by alice: “stuck worker”" });
  });

  it("records a lock found held by the first reconcile as a hold, at the time it was acquired", () => {
    const { store, recorded } = storeRecording(false);
    store.apply("lock:old", all("foreign", T + 10_000), T);
    expect(recorded).toMatchObject([{ at: T, resource: "lock:old", type: "acquired", token: "foreign" }]);
  });
});
