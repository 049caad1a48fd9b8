import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type * as LiveModule from "@/server/live";
import type { TestCluster } from "../support/redis";
import { setUpConsole, tearDownConsole } from "../support/console";
import { until } from "../support/wait";

/**
 * Lock patterns that overlap (an operator adds `lock:orders:*` beside `lock:*`): Redis delivers a key's
 * notification once per pattern that matches it, and the console counts each change once.
 */
describe("overlapping lock patterns", () => {
  let cluster: TestCluster;
  let live: typeof LiveModule;

  beforeAll(async () => {
    cluster = await setUpConsole({ nodes: 1, env: { LOCK_PATTERNS: "lock:?,lock:*,lock:orders:*,*:orders:*,*:é" } });
    live = await import("@/server/live");
    expect(await live.waitUntilReconciled(30_000)).toBe(true);
  });

  afterAll(async () => {
    await tearDownConsole(cluster);
  });

  const sets = () => live.getKeyspaceEventCounts().find((c) => c.nodeId === "node-0")?.counts.get("set") ?? 0;

  it("counts a change once, whichever patterns match its key", async () => {
    const client = cluster.client(0);
    const before = sets();
    // Matched by three patterns, by `lock:*` only, and by the last only.
    for (let i = 0; i < 10; i++) await client.set("lock:orders:1", `v${i}`, "PX", 30_000);
    for (let i = 0; i < 10; i++) await client.set("lock:mail:1", `v${i}`, "PX", 30_000);
    for (let i = 0; i < 10; i++) await client.set("shop:orders:1", `v${i}`, "PX", 30_000);
    // Redis matches bytes: `lock:?` does not match `lock:é` (two bytes); `lock:*` and `*:é` do, and both deliver.
    for (let i = 0; i < 5; i++) await client.set("lock:é", `v${i}`, "PX", 30_000);
    for (let i = 0; i < 5; i++) await client.set("lock:x", `v${i}`, "PX", 30_000);
    // Notifications come in order on one connection: once this last one (an event no SET sends) is counted,
    // every notification of the sets before it has come.
    const persists = () => live.getKeyspaceEventCounts().find((c) => c.nodeId === "node-0")?.counts.get("persist") ?? 0;
    const persistsBefore = persists();
    await client.persist("lock:orders:1");
    await until("the last notification counted", () => Promise.resolve(persists() > persistsBefore ? true : null));
    expect(sets() - before).toBe(40);
    expect(persists() - persistsBefore).toBe(1);
  });
});
